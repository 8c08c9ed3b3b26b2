#!/usr/bin/env python3
"""The fake API server's schemas of the built-in kinds it serves (builtin.json), generated from
the Kubernetes OpenAPI as @kubernetes/client-node carries it: each model's attributeTypeMap (field
names and types, dist/gen/models/*.js) and its declaration (required fields: no `?`, *.d.ts).

    npm pack @kubernetes/client-node@1.4.0   # OpenAPI spec v1.34.0
    sha256sum kubernetes-client-node-1.4.0.tgz  # 77dfb693...39d8 (checked below)
    tar xzf kubernetes-client-node-1.4.0.tgz
    tests/support/fake_kube/schemas/generate.py package > tests/support/fake_kube/schemas/builtin.json

The output: {"source": ..., "kinds": {"apps/v1 StatefulSet": "V1StatefulSet", ...},
"definitions": {"V1StatefulSet": <OpenAPI v3 schema>, ...}} where a schema names another
definition as {"$ref": "V1PodTemplateSpec"}. Types map as the OpenAPI does: int32/int64 numbers
are integers, IntOrString is x-kubernetes-int-or-string, maps are additionalProperties, `any`
(RawExtension, JSON) preserves unknown fields. Quantities (resource.Quantity, which the client
types as string) accept an integer or a string, as the API server does.
"""
import hashlib
import json
import os
import re
import sys

PACKAGE = "@kubernetes/client-node@1.4.0"
TARBALL_SHA256 = "77dfb6939180837c23364604c3def1789e069324d2a97eb3635bbba4fdea39d8"

# The built-in kinds the fake API server serves (fake_api_server.cc, DefaultTypes).
KINDS = {
    "v1 Pod": "V1Pod",
    "v1 Service": "V1Service",
    "v1 Secret": "V1Secret",
    "v1 ConfigMap": "V1ConfigMap",
    "v1 ServiceAccount": "V1ServiceAccount",
    "v1 Namespace": "V1Namespace",
    "v1 Event": "CoreV1Event",
    "events.k8s.io/v1 Event": "EventsV1Event",
    "apps/v1 StatefulSet": "V1StatefulSet",
    "apps/v1 Deployment": "V1Deployment",
    "apps/v1 ReplicaSet": "V1ReplicaSet",
    "coordination.k8s.io/v1 Lease": "V1Lease",
    "policy/v1 PodDisruptionBudget": "V1PodDisruptionBudget",
    "networking.k8s.io/v1 NetworkPolicy": "V1NetworkPolicy",
    "rbac.authorization.k8s.io/v1 Role": "V1Role",
    "rbac.authorization.k8s.io/v1 RoleBinding": "V1RoleBinding",
    "rbac.authorization.k8s.io/v1 ClusterRole": "V1ClusterRole",
    "rbac.authorization.k8s.io/v1 ClusterRoleBinding": "V1ClusterRoleBinding",
}

# Fields of type resource.Quantity (in the OpenAPI: io.k8s.apimachinery.pkg.api.resource.Quantity),
# which the client's types give as string: (model, field) -> the field is a quantity, or a map of
# them.
QUANTITIES = {
    ("V1ResourceRequirements", "limits"), ("V1ResourceRequirements", "requests"),
    ("V1VolumeResourceRequirements", "limits"), ("V1VolumeResourceRequirements", "requests"),
    ("V1EmptyDirVolumeSource", "sizeLimit"), ("V1PodSpec", "overhead"),
    ("V1PersistentVolumeClaimStatus", "capacity"),
    ("V1PersistentVolumeClaimStatus", "allocatedResources"),
    ("V1ContainerStatus", "allocatedResources"),
    ("V1ResourceFieldSelector", "divisor"),
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def model(models_dir, name):
    """(attributes [(name, type, format)], required field names) of one generated model."""
    js = read(os.path.join(models_dir, name + ".js"))
    m = re.search(r"\.attributeTypeMap = (\[.*?\]);", js, re.S)
    attrs = [(a["baseName"], a["type"], a["format"]) for a in json.loads(m.group(1))] if m else []
    dts = read(os.path.join(models_dir, name + ".d.ts"))
    required = set(re.findall(r"^\s*'([^']+)': ", dts, re.M))
    return attrs, required


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    package = argv[1]
    tarball = os.path.join(os.path.dirname(os.path.abspath(package)),
                           "kubernetes-client-node-1.4.0.tgz")
    if os.path.exists(tarball):
        digest = hashlib.sha256(open(tarball, "rb").read()).hexdigest()
        if digest != TARBALL_SHA256:
            print(f"generate.py: {tarball} has sha256 {digest}, not {TARBALL_SHA256}",
                  file=sys.stderr)
            return 1
    models_dir = os.path.join(package, "dist", "gen", "models")
    definitions = {}

    def schema_of(t, fmt, quantity):
        if quantity and t == "string":
            return {"x-kubernetes-int-or-string": True}
        if t == "string" or t == "Date" or t == "V1MicroTime":
            return {"type": "string"}
        if t == "number":
            return {"type": "integer"} if fmt in ("int32", "int64") else {"type": "number"}
        if t == "boolean":
            return {"type": "boolean"}
        if t == "IntOrString":
            return {"x-kubernetes-int-or-string": True}
        if t in ("any", "object"):
            return {"x-kubernetes-preserve-unknown-fields": True}
        m = re.fullmatch(r"Array<(.+)>", t)
        if m:
            return {"type": "array", "items": schema_of(m.group(1), "", quantity)}
        m = re.fullmatch(r"\{ \[key: string\]: (.+); \}", t)
        if m:
            return {"type": "object", "additionalProperties": schema_of(m.group(1), "", quantity)}
        if not os.path.exists(os.path.join(models_dir, t + ".js")):
            raise SystemExit(f"generate.py: unknown type {t}")
        visit(t)
        return {"$ref": t}

    def visit(name):
        if name in definitions:
            return
        definitions[name] = None  # in progress (a recursive type refers to itself by $ref)
        attrs, required = model(models_dir, name)
        props = {}
        for field, t, fmt in attrs:
            props[field] = schema_of(t, fmt, (name, field) in QUANTITIES)
        s = {"type": "object", "properties": props}
        req = sorted(f for f, _, _ in attrs if f in required)
        if req:
            s["required"] = req
        definitions[name] = s

    for name in KINDS.values():
        visit(name)
    out = {"source": f"{PACKAGE} (Kubernetes OpenAPI v1.34.0), by generate.py",
           "kinds": KINDS, "definitions": dict(sorted(definitions.items()))}
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
