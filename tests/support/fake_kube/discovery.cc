#include "support/fake_kube/discovery.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace shoal::testing {
namespace {

using web::json::value;

value Strings(const std::vector<std::string>& v) {
  value out = value::array();
  for (size_t i = 0; i < v.size(); ++i) out[i] = value::string(v[i]);
  return out;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The verbs a resource answers (kubectl checks "list" before `get`, "patch" before `apply`).
std::vector<std::string> Verbs(const ResourceType& t) {
  if (t.read_only) return {"get", "list"};
  return {"create", "delete", "get", "list", "patch", "update", "watch"};
}

value Resource(const ResourceType& t) {
  value r = value::object();
  r["name"] = value::string(t.plural);
  r["singularName"] = value::string(t.singular.empty() ? Lower(t.kind) : t.singular);
  r["namespaced"] = value::boolean(t.namespaced);
  r["kind"] = value::string(t.kind);
  r["verbs"] = Strings(Verbs(t));
  if (!t.short_names.empty()) r["shortNames"] = Strings(t.short_names);
  if (!t.categories.empty()) r["categories"] = Strings(t.categories);
  return r;
}

value Subresource(const ResourceType& t, const std::string& sub) {
  value r = value::object();
  r["name"] = value::string(t.plural + "/" + sub);
  r["singularName"] = value::string("");
  r["namespaced"] = value::boolean(t.namespaced);
  if (sub == "scale") {
    // As the real server lists it: the Scale kind of autoscaling/v1.
    r["group"] = value::string("autoscaling");
    r["version"] = value::string("v1");
    r["kind"] = value::string("Scale");
  } else {
    r["kind"] = value::string(t.kind);
  }
  r["verbs"] = Strings({"get", "patch", "update"});
  return r;
}

value ResourceList(const std::vector<ResourceType>& types, const std::string& group,
                   const std::string& version) {
  value list = value::array();
  size_t n = 0;
  for (const auto& t : types) {
    if (t.group != group || t.version != version) continue;
    list[n++] = Resource(t);
    if (t.status_subresource) list[n++] = Subresource(t, "status");
    if (t.scale) list[n++] = Subresource(t, "scale");
  }
  value doc = value::object();
  doc["kind"] = value::string("APIResourceList");
  doc["apiVersion"] = value::string("v1");
  doc["groupVersion"] = value::string(group.empty() ? version : group + "/" + version);
  doc["resources"] = list;
  return doc;
}

}  // namespace

std::optional<value> DiscoveryDocument(const std::vector<ResourceType>& types,
                                       const std::string& path,
                                       const std::string& server_address) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == "/version") {
    value v = value::object();
    v["major"] = value::string("1");
    v["minor"] = value::string(std::to_string(kFakeKubeMinor));
    v["gitVersion"] = value::string("v1." + std::to_string(kFakeKubeMinor) + ".0-shoal-fake");
    v["platform"] = value::string("linux/amd64");
    return v;
  }
  if (p == "/api") {
    value cidr = value::object();
    cidr["clientCIDR"] = value::string("0.0.0.0/0");
    cidr["serverAddress"] = value::string(server_address);
    value doc = value::object();
    doc["kind"] = value::string("APIVersions");
    doc["versions"] = Strings({"v1"});
    doc["serverAddressByClientCIDRs"] = value::array({cidr});
    return doc;
  }
  if (p == "/api/v1") return ResourceList(types, "", "v1");
  if (p == "/apis") {
    // Groups in the order first served; versions in the order listed (the first is preferred).
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> versions;
    for (const auto& t : types) {
      if (t.group.empty()) continue;
      auto& vs = versions[t.group];
      if (vs.empty()) order.push_back(t.group);
      if (std::find(vs.begin(), vs.end(), t.version) == vs.end()) vs.push_back(t.version);
    }
    value groups = value::array();
    for (size_t i = 0; i < order.size(); ++i) {
      value vs = value::array();
      for (size_t j = 0; j < versions[order[i]].size(); ++j) {
        value gv = value::object();
        gv["groupVersion"] = value::string(order[i] + "/" + versions[order[i]][j]);
        gv["version"] = value::string(versions[order[i]][j]);
        vs[j] = gv;
      }
      value g = value::object();
      g["name"] = value::string(order[i]);
      g["versions"] = vs;
      g["preferredVersion"] = vs[0];
      groups[i] = g;
    }
    value doc = value::object();
    doc["kind"] = value::string("APIGroupList");
    doc["apiVersion"] = value::string("v1");
    doc["groups"] = groups;
    return doc;
  }
  // /apis/GROUP and /apis/GROUP/VERSION.
  if (p.rfind("/apis/", 0) == 0) {
    const std::string rest = p.substr(6);
    const size_t slash = rest.find('/');
    const std::string group = rest.substr(0, slash);
    const bool known = std::any_of(types.begin(), types.end(),
                                   [&](const ResourceType& t) { return t.group == group; });
    if (!known) return std::nullopt;
    if (slash == std::string::npos) {
      auto all = DiscoveryDocument(types, "/apis", server_address);
      for (const auto& g : all->at("groups").as_array()) {
        if (g.at("name").as_string() != group) continue;
        value doc = g;
        doc["kind"] = value::string("APIGroup");
        doc["apiVersion"] = value::string("v1");
        return doc;
      }
      return std::nullopt;
    }
    const std::string version = rest.substr(slash + 1);
    if (version.find('/') != std::string::npos) return std::nullopt;
    const bool served = std::any_of(types.begin(), types.end(), [&](const ResourceType& t) {
      return t.group == group && t.version == version;
    });
    if (!served) return std::nullopt;
    return ResourceList(types, group, version);
  }
  return std::nullopt;
}

namespace {

std::string GroupVersionPath(const ResourceType& t) {
  return t.group.empty() ? "api/" + t.version : "apis/" + t.group + "/" + t.version;
}

// "io.k8s.api.core.v1.Pod", "dev.shoal.v1alpha1.PartitionedTopic": the reversed group, as the
// real server names definitions.
std::string DefinitionName(const ResourceType& t) {
  if (t.group.empty()) return "io.k8s.api.core." + t.version + "." + t.kind;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = t.group.find('.', start);
    parts.push_back(t.group.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  std::string out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out += *it + ".";
  return out + t.version + "." + t.kind;
}

value Gvk(const ResourceType& t) {
  value g = value::object();
  g["group"] = value::string(t.group);
  g["version"] = value::string(t.version);
  g["kind"] = value::string(t.kind);
  return value::array({g});
}

value QueryParameter(const std::string& name) {
  value p = value::object();
  p["name"] = value::string(name);
  p["in"] = value::string("query");
  value schema = value::object();
  schema["type"] = value::string(name == "force" ? "boolean" : "string");
  schema["uniqueItems"] = value::boolean(true);
  p["schema"] = schema;
  return p;
}

value Operation(const ResourceType& t, const std::string& action,
                const std::vector<std::string>& params) {
  value op = value::object();
  op["operationId"] = value::string(action + t.kind);
  op["x-kubernetes-action"] = value::string(action);
  op["x-kubernetes-group-version-kind"] = Gvk(t)[0];
  value ps = value::array();
  for (size_t i = 0; i < params.size(); ++i) ps[i] = QueryParameter(params[i]);
  op["parameters"] = ps;
  value ok = value::object();
  ok["description"] = value::string("OK");
  value responses = value::object();
  responses["200"] = ok;
  op["responses"] = responses;
  return op;
}

}  // namespace

std::optional<value> OpenApiDocument(const std::vector<ResourceType>& types,
                                     const std::vector<value>& schemas, const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p == "/openapi/v3") {
    value paths = value::object();
    for (const auto& t : types) {
      const std::string gv = GroupVersionPath(t);
      value entry = value::object();
      // The hash makes clients re-fetch after a change; these documents never change.
      entry["serverRelativeURL"] = value::string("/openapi/v3/" + gv + "?hash=shoal-fake-1");
      paths[gv] = entry;
    }
    value doc = value::object();
    doc["paths"] = paths;
    return doc;
  }
  const std::string prefix = "/openapi/v3/";
  if (p.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string gv = p.substr(prefix.size());
  value paths = value::object();
  value definitions = value::object();
  bool any = false;
  const std::vector<std::string> write = {"dryRun", "fieldManager", "fieldValidation"};
  std::vector<std::string> patch = write;
  patch.push_back("force");
  for (size_t i = 0; i < types.size(); ++i) {
    const ResourceType& t = types[i];
    if (GroupVersionPath(t) != gv) continue;
    any = true;
    const std::string base = "/" + gv + (t.namespaced ? "/namespaces/{namespace}/" : "/") + t.plural;
    value collection = value::object();
    collection["get"] = Operation(t, "list", {"labelSelector", "fieldSelector", "watch"});
    if (!t.read_only) collection["post"] = Operation(t, "post", write);
    paths[base] = collection;
    value item = value::object();
    item["get"] = Operation(t, "get", {});
    if (!t.read_only) {
      item["put"] = Operation(t, "put", write);
      item["patch"] = Operation(t, "patch", patch);
      item["delete"] = Operation(t, "delete", {"dryRun"});
    }
    paths[base + "/{name}"] = item;
    for (const char* sub : {"status", "scale"}) {
      const bool has = std::string_view(sub) == "status" ? t.status_subresource : t.scale.has_value();
      if (!has || t.read_only) continue;
      value s = value::object();
      s["get"] = Operation(t, "get", {});
      s["put"] = Operation(t, "put", write);
      paths[base + "/{name}/" + sub] = s;
    }
    value def = i < schemas.size() && !schemas[i].is_null() ? schemas[i] : value::object();
    if (!def.has_field("type")) def["type"] = value::string("object");
    def["x-kubernetes-group-version-kind"] = Gvk(t);
    definitions[DefinitionName(t)] = def;
  }
  if (!any) return std::nullopt;
  value info = value::object();
  info["title"] = value::string("Kubernetes");
  info["version"] = value::string("v1." + std::to_string(kFakeKubeMinor) + ".0");
  value components = value::object();
  components["schemas"] = definitions;
  value doc = value::object();
  doc["openapi"] = value::string("3.0.0");
  doc["info"] = info;
  doc["paths"] = paths;
  doc["components"] = components;
  return doc;
}

}  // namespace shoal::testing
