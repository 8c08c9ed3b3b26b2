#!/usr/bin/env python3
"""Checks the Grafana dashboard and the alert rules against each other and docs/metrics.md.

  check_observability.py dashboard DASHBOARD.json METRICS.md
      The dashboard parses and is importable as is: uid, title, schemaVersion; a `datasource`
      variable of type datasource for Prometheus that every panel, target, annotation and query
      variable uses; a multi-value `topic` variable; each panel with a gridPos inside 24 columns
      and a unique id. Every expression names documented metrics and labels, and filters every
      metric that has a topic label by topic=~"$topic".
  check_observability.py rules RULES.yaml METRICS.md
      Every expression and annotation template of the rule file names documented metrics and
      labels (promtool checks the syntax; this checks the names, which promtool cannot know).

Standard library only. Exits 1 with one line per problem.
"""
import json
import os
import re
import sys

# Labels Prometheus attaches to every series of a target: the scrape configs of the Helm chart
# (PodMonitor, ServiceMonitor) and of the tests add these.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "shoal_component", "container",
                 "endpoint", "service", "cluster"}
DS_UID_FORMS = {"$datasource", "${datasource}"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "offset", "bool"}
HIST_SUFFIXES = ("_bucket", "_sum", "_count")

problems = []


def problem(where, msg):
    problems.append(f"{where}: {msg}")


def documented_metrics(path):
    """{name: (type, set of labels)} from the tables of docs/metrics.md."""
    metrics = {}
    row = re.compile(r"^\|\s*`([a-z_:][a-z0-9_:]*)`\s*\|\s*(\w+)\s*\|([^|]*)\|")
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = row.match(line)
            if not m:
                continue
            labels = {l.strip() for l in m.group(3).split(",") if re.fullmatch(r"\s*\w+\s*", l)}
            metrics[m.group(1)] = (m.group(2), labels)
    if not metrics:
        problem(path, "no metric table found")
    # Prometheus' own series of each target.
    metrics["up"] = ("gauge", set())
    return metrics


def resolve(name, metrics):
    """(documented name, labels) of a series name, histogram series included; None if unknown."""
    if name in metrics:
        return name, set(metrics[name][1])
    for s in HIST_SUFFIXES:
        base = name[: -len(s)] if name.endswith(s) else None
        if base and base in metrics and metrics[base][0] == "histogram":
            return base, set(metrics[base][1]) | ({"le"} if s == "_bucket" else set())
    return None


def strip_strings(expr):
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def check_expr(where, expr, metrics, require_topic_filter):
    """Checks names in one PromQL expression. Returns the labels it may carry."""
    allowed = set(TARGET_LABELS) | {"__name__"}
    # Selectors: a name, optionally followed by {matchers}.
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?", expr):
        name, block = m.group(1), m.group(2) or ""
        start = m.start()
        if start > 0 and (expr[start - 1].isalnum() or expr[start - 1] in "_$."):
            continue
        if not (name.startswith("shoal_") or ":" in name or name == "up"):
            continue
        got = resolve(name, metrics)
        if got is None:
            problem(where, f"metric {name} is not in docs/metrics.md")
            continue
        base, labels = got
        allowed |= labels
        matchers = dict(re.findall(r'(\w+)\s*(?:=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")', block))
        for label in matchers:
            if label not in labels | TARGET_LABELS:
                problem(where, f"{name} has no label {label}")
        if require_topic_filter and "topic" in labels:
            if not re.search(r'\btopic\s*=~\s*"\$topic"', block):
                problem(where, f'{name} is not filtered by topic=~"$topic"')
            if not re.search(r'\bnamespace\s*=~\s*"\$namespace"', block):
                problem(where, f'{name} is not filtered by namespace=~"$namespace" (topics of '
                               'one name in two namespaces would show as one)')
            if require_topic_filter == "dashboard" and not re.search(
                    r'\bcluster\s*=~\s*"\$cluster"', block):
                problem(where, f'{name} is not filtered by cluster=~"$cluster" (topics of one '
                               'name in two clusters would show as one)')
    bare = strip_strings(expr)
    for m in re.finditer(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", bare):
        kept = {l.strip() for l in m.group(2).split(",")} - {""}
        for label in kept:
            if label not in allowed:
                problem(where, f"label {label} in {m.group(1)} (...) belongs to none of its metrics")
        if m.group(1) in ("by", "on") and "topic" in kept and "namespace" not in kept:
            problem(where, f"{m.group(1)} ({m.group(2)}) keeps topic but not namespace: topics "
                           "of one name in two namespaces would merge")
        if (require_topic_filter == "dashboard" and m.group(1) in ("by", "on")
                and "topic" in kept and "cluster" not in kept):
            problem(where, f"{m.group(1)} ({m.group(2)}) keeps topic but not cluster: topics "
                           "of one name in two clusters would merge")
    return allowed


def datasource_is_variable(ds):
    return isinstance(ds, dict) and ds.get("type") == "prometheus" and ds.get("uid") in DS_UID_FORMS


def check_dashboard(path, metrics):
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        problem(path, f"does not parse: {e}")
        return
    if d.get("uid") != "shoal" or len(d.get("uid", "")) > 40:
        problem(path, 'uid must be "shoal" (40 characters at most)')
    if d.get("title") != "Shoal":
        problem(path, 'title must be "Shoal"')
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problem(path, "schemaVersion must be a number, 36 or newer")
    if "id" in d and d["id"] is not None:
        problem(path, "a dashboard to import has no id (null or absent)")

    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problem(path, 'needs a variable "datasource" of type datasource, query prometheus')
    for name, v in variables.items():
        if v.get("type") == "query" and not datasource_is_variable(v.get("datasource")):
            problem(path, f"variable {name} does not use the datasource variable")
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query", "") if isinstance(q, dict) else (q or "")
            lv = re.fullmatch(
                r"\s*label_values\(\s*([a-zA-Z_:][\w:]*)\s*(\{[^}]*\})?\s*,\s*(\w+)\s*\)\s*", q)
            if lv:
                got = resolve(lv.group(1), metrics)
                if got is None or lv.group(3) not in got[1] | TARGET_LABELS:
                    problem(path, f"variable {name}: {q} names an undocumented metric or label")
                elif lv.group(2):
                    check_expr(f"{path} variable {name}", lv.group(1) + lv.group(2), metrics, False)
            else:
                check_expr(f"{path} variable {name}", q, metrics, False)
    # Topics are picked within namespaces within clusters: one name in two namespaces (or two
    # clusters of one Prometheus, Thanos or Mimir) is two topics. With no cluster label, the
    # cluster variable's All (.*) matches every series.
    names = list(variables)
    picks = [
        ("cluster", "label_values(shoal_control_partitions, cluster)", None),
        ("namespace", 'label_values(shoal_control_partitions{cluster=~"$cluster"}, namespace)',
         "cluster"),
        ("topic", 'label_values(shoal_control_partitions{cluster=~"$cluster",'
                  'namespace=~"$namespace"}, topic)', "namespace"),
    ]
    for name, query, after in picks:
        v = variables.get(name)
        q = v.get("query") if v else None
        q = q.get("query", "") if isinstance(q, dict) else (q or "")
        # The cluster's All must match series without the label (one Prometheus, no cluster).
        all_ok = v and (v.get("allValue") == ".*" if name == "cluster" else v.get("includeAll"))
        if (not v or not v.get("multi") or not v.get("includeAll") or not all_ok
                or q != query or (after and after in names
                                  and names.index(after) > names.index(name))):
            problem(path, f"needs a multi-value {name} variable with All"
                          + (' (allValue ".*")' if name == "cluster" else "")
                          + (f" after the {after} one" if after else "") + f", from {query}")

    annotations = d.get("annotations", {}).get("list", [])
    if not annotations:
        problem(path, "no annotations (scaling decisions)")
    for a in annotations:
        where = f"{path} annotation {a.get('name')!r}"
        if not datasource_is_variable(a.get("datasource")):
            problem(where, "does not use the datasource variable")
        if not a.get("expr"):
            problem(where, "has no expr")
        else:
            check_expr(where, a["expr"], metrics, "dashboard")

    ids = set()

    def walk(panels):
        for p in panels:
            where = f"{path} panel {p.get('id')} {p.get('title')!r}"
            if p.get("id") in ids or not isinstance(p.get("id"), int):
                problem(where, "needs a unique numeric id")
            ids.add(p.get("id"))
            g = p.get("gridPos", {})
            if not all(isinstance(g.get(k), int) for k in ("h", "w", "x", "y")) or (
                    g.get("x", 0) + g.get("w", 0) > 24):
                problem(where, "needs a gridPos (h, w, x, y) within 24 columns")
            if p.get("type") == "row":
                if p.get("targets"):
                    problem(where, "a row has no targets")
                walk(p.get("panels", []))
                continue
            if not datasource_is_variable(p.get("datasource")):
                problem(where, "does not use the datasource variable")
            if not p.get("targets"):
                problem(where, "has no targets")
            for t in p.get("targets", []):
                tw = f"{where} target {t.get('refId')}"
                if not datasource_is_variable(t.get("datasource")):
                    problem(tw, "does not use the datasource variable")
                if not t.get("expr"):
                    problem(tw, "has no expr")
                    continue
                check_expr(tw, t["expr"], metrics, "dashboard")

    walk(d.get("panels", []))
    if len(ids) < 2:
        problem(path, "has no panels")


def rule_entries(path):
    """(kind, name, expr, [annotation texts]) of each rule, read without a YAML library: the
    file's own layout (`- record:`/`- alert:` then `expr:` inline or as a block scalar)."""
    lines = open(path, encoding="utf-8").read().split("\n")
    entries = []
    i = 0
    current = None
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)- (record|alert):\s*(\S+)\s*$", line)
        if m:
            current = {"kind": m.group(2), "name": m.group(3), "expr": None, "texts": []}
            entries.append(current)
            i += 1
            continue
        m = re.match(r"^(\s*)runbook_url:\s*\"?([^\"]*)\"?\s*$", line)
        if m and current is not None:
            current["runbook_url"] = m.group(2)
            i += 1
            continue
        m = re.match(r"^(\s*)(expr|summary|description|runbook):\s*(.*)$", line)
        if m and current is not None:
            indent, key, value = len(m.group(1)), m.group(2), m.group(3).strip()
            if value in ("|", "|-", ">", ">-"):
                body = []
                i += 1
                while i < len(lines) and (not lines[i].strip()
                                          or len(lines[i]) - len(lines[i].lstrip()) > indent):
                    body.append(lines[i].strip())
                    i += 1
                value = "\n".join(body).strip()
            else:
                i += 1
                value = value.strip("'\"")
            if key == "expr":
                current["expr"] = value
            else:
                current["texts"].append(value)
            continue
        i += 1
    return entries


def check_rules(path, metrics):
    entries = rule_entries(path)
    if not entries:
        problem(path, "no rules found")
    # Recorded series become metrics with the labels their aggregation keeps.
    for e in entries:
        if e["kind"] == "record" and e["expr"]:
            m = re.search(r"\bby\s*\(([^)]*)\)", e["expr"])
            labels = {l.strip() for l in m.group(1).split(",")} if m else set()
            metrics[e["name"]] = ("gauge", labels)
    for e in entries:
        where = f"{path} {e['kind']} {e['name']}"
        if not e["expr"]:
            problem(where, "has no expr")
            continue
        allowed = check_expr(where, e["expr"], metrics, False)
        if e["kind"] == "alert":
            if len(e["texts"]) < 3:
                problem(where, "needs summary, description and runbook annotations")
            # runbook_url: a section of docs/runbooks.md named after the alert.
            want = "docs/runbooks.md#" + e["name"].lower()
            if e.get("runbook_url") != want:
                problem(where, f"needs runbook_url: \"{want}\" (got {e.get('runbook_url')!r})")
            runbooks = os.path.join(os.path.dirname(os.path.abspath(path)), "..", "docs",
                                    "runbooks.md")
            try:
                with open(runbooks, encoding="utf-8") as f:
                    headings = {l[3:].strip() for l in f if l.startswith("## ")}
            except OSError:
                headings = set()
            if e["name"] not in headings:
                problem(where, f"docs/runbooks.md has no section \"## {e['name']}\"")
            for text in e["texts"]:
                for label in re.findall(r"\$labels\.(\w+)", text):
                    if label not in allowed:
                        problem(where, f"annotation uses $labels.{label}, which no metric of "
                                       "its expression has")
                for name in re.findall(r"\b(shoal_[a-z0-9_]+)\b", text):
                    if name not in TARGET_LABELS and resolve(name, metrics) is None:
                        problem(where, f"annotation names {name}, not in docs/metrics.md")


def main(argv):
    if len(argv) != 4 or argv[1] not in ("dashboard", "rules"):
        print(__doc__, file=sys.stderr)
        return 2
    metrics = documented_metrics(argv[3])
    (check_dashboard if argv[1] == "dashboard" else check_rules)(argv[2], metrics)
    for p in dict.fromkeys(problems):
        print(p)
    if not problems:
        print(f"{argv[2]}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
