#include "support/fake_kube/server_side_apply.h"

#include <map>

namespace shoal::testing {
namespace {

using web::json::value;

bool SystemField(const FieldPath& prefix, const std::string& key, bool status_subresource) {
  if (prefix.empty()) {
    return key == "apiVersion" || key == "kind" || (status_subresource && key == "status");
  }
  if (prefix.size() == 1 && prefix[0] == "metadata") {
    return key == "name" || key == "namespace" || key == "uid" || key == "resourceVersion" ||
           key == "generation" || key == "creationTimestamp" || key == "deletionTimestamp" ||
           key == "deletionGracePeriodSeconds" || key == "managedFields" || key == "selfLink";
  }
  return false;
}

void Collect(const value& v, FieldPath& path, bool status_subresource, FieldSet& out) {
  if (v.is_object() && v.size() > 0) {
    for (const auto& [k, child] : v.as_object()) {
      if (SystemField(path, k, status_subresource)) continue;
      path.push_back(k);
      Collect(child, path, status_subresource, out);
      path.pop_back();
    }
    return;
  }
  if (!path.empty()) out.insert(path);
}

const value* At(const value& obj, const FieldPath& path) {
  const value* cur = &obj;
  for (const auto& k : path) {
    if (!cur->is_object() || !cur->has_field(k)) return nullptr;
    cur = &cur->at(k);
  }
  return cur;
}

void Erase(value& obj, const FieldPath& path) {
  if (path.empty()) return;
  std::vector<value*> chain{&obj};
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    value* cur = chain.back();
    if (!cur->is_object() || !cur->has_field(path[i])) return;
    chain.push_back(&cur->at(path[i]));
  }
  if (!chain.back()->is_object() || !chain.back()->has_field(path.back())) return;
  chain.back()->erase(path.back());
  // Objects left empty by the removal go too (as a field of nobody's).
  for (size_t i = chain.size() - 1; i > 0; --i) {
    if (chain[i]->is_object() && chain[i]->size() == 0 && !(i == 1 && path[0] == "metadata")) {
      chain[i - 1]->erase(path[i - 1]);
    } else {
      break;
    }
  }
}

void Merge(value& into, const value& from) {
  if (!into.is_object() || !from.is_object()) {
    into = from;
    return;
  }
  for (const auto& [k, v] : from.as_object()) {
    if (v.is_object() && into.has_field(k) && into.at(k).is_object() && v.size() > 0) {
      Merge(into[k], v);
    } else {
      into[k] = v;
    }
  }
}

std::string Dotted(const FieldPath& p) {
  std::string out;
  for (const auto& k : p) out += "." + k;
  return out;
}

struct Entry {
  std::string manager;
  std::string operation;
  std::string api_version;
  std::string time;
  std::string subresource;
  FieldSet fields;
};

std::vector<Entry> Entries(const value* obj) {
  std::vector<Entry> out;
  if (obj == nullptr) return out;
  const value* mf = At(*obj, {"metadata", "managedFields"});
  if (!mf || !mf->is_array()) return out;
  for (const auto& e : mf->as_array()) {
    auto s = [&](const char* k) {
      return e.has_field(k) && e.at(k).is_string() ? e.at(k).as_string() : std::string();
    };
    Entry x{s("manager"), s("operation"), s("apiVersion"), s("time"), s("subresource"), {}};
    if (e.has_field("fieldsV1")) x.fields = FromFieldsV1(e.at("fieldsV1"));
    out.push_back(std::move(x));
  }
  return out;
}

value ToJson(const std::vector<Entry>& entries) {
  value out = value::array();
  size_t n = 0;
  for (const auto& e : entries) {
    if (e.fields.empty()) continue;
    value j = value::object();
    j["manager"] = value::string(e.manager);
    j["operation"] = value::string(e.operation);
    j["apiVersion"] = value::string(e.api_version);
    j["time"] = value::string(e.time);
    j["fieldsType"] = value::string("FieldsV1");
    j["fieldsV1"] = ToFieldsV1(e.fields);
    if (!e.subresource.empty()) j["subresource"] = value::string(e.subresource);
    out[n++] = j;
  }
  return out;
}

// Whether two fields overlap: one is the other or a prefix of it.
bool Overlap(const FieldPath& a, const FieldPath& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

}  // namespace

void SetManagedFields(value& obj, const value& managed) {
  if (managed.is_array() && managed.size() > 0) {
    obj["metadata"]["managedFields"] = managed;
  } else if (obj.has_field("metadata") && obj.at("metadata").is_object() &&
             obj.at("metadata").has_field("managedFields")) {
    obj["metadata"].erase("managedFields");
  }
}

FieldSet OwnedFields(const value& obj, bool status_subresource) {
  FieldSet out;
  FieldPath path;
  Collect(obj, path, status_subresource, out);
  return out;
}

value ToFieldsV1(const FieldSet& fields) {
  value out = value::object();
  for (const auto& f : fields) {
    value* cur = &out;
    for (const auto& k : f) {
      value& next = (*cur)["f:" + k];
      if (!next.is_object()) next = value::object();
      cur = &next;
    }
  }
  return out;
}

FieldSet FromFieldsV1(const value& fields_v1) {
  FieldSet out;
  FieldPath path;
  std::function<void(const value&)> walk = [&](const value& v) {
    if (!v.is_object() || v.size() == 0) {
      if (!path.empty()) out.insert(path);
      return;
    }
    bool any = false;
    for (const auto& [k, child] : v.as_object()) {
      if (k.rfind("f:", 0) != 0) continue;  // "." (the field itself), k:, v: and i: are lists
      any = true;
      path.push_back(k.substr(2));
      walk(child);
      path.pop_back();
    }
    if (!any && !path.empty()) out.insert(path);
  };
  walk(fields_v1);
  return out;
}

Result<value> Apply(const value* live, const value& applied, const ApplyRequest& r) {
  if (!applied.is_object()) return Status::InvalidArgument("the applied configuration is not an object");
  const FieldSet want = OwnedFields(applied, r.status_subresource);
  std::vector<Entry> entries = Entries(live);
  std::vector<std::string> conflicts;
  for (const auto& f : want) {
    const value* now = live ? At(*live, f) : nullptr;
    const value* to = At(applied, f);
    for (auto& e : entries) {
      if (e.manager == r.manager && e.operation == "Apply") continue;
      for (auto it = e.fields.begin(); it != e.fields.end();) {
        if (!Overlap(*it, f)) {
          ++it;
          continue;
        }
        const bool same = now && to && *now == *to;
        if (same) {  // shared ownership of an agreed value
          ++it;
          continue;
        }
        if (!r.force) {
          conflicts.push_back("conflict with \"" + e.manager + "\"" +
                              (e.operation == "Update" ? " using " + e.api_version : "") + ": " +
                              Dotted(*it));
          ++it;
        } else {
          it = e.fields.erase(it);
        }
      }
    }
  }
  if (!conflicts.empty()) {
    std::string msg = "Apply failed with " + std::to_string(conflicts.size()) +
                      (conflicts.size() == 1 ? " conflict: " : " conflicts: ");
    for (size_t i = 0; i < conflicts.size(); ++i) msg += (i ? "\n" : "") + conflicts[i];
    return Status::Conflict(msg);
  }
  value out = live ? *live : value::object();
  // What this manager applied before and applies no more goes, unless another owns it.
  FieldSet before;
  for (const auto& e : entries) {
    if (e.manager == r.manager && e.operation == "Apply") before = e.fields;
  }
  for (const auto& f : before) {
    if (want.count(f)) continue;
    bool owned = false;
    for (const auto& e : entries) {
      if (e.manager == r.manager && e.operation == "Apply") continue;
      for (const auto& g : e.fields) owned |= Overlap(f, g);
    }
    if (!owned) Erase(out, f);
  }
  value merged_in = applied;
  if (merged_in.has_field("metadata") && merged_in.at("metadata").has_field("managedFields")) {
    merged_in["metadata"].erase("managedFields");
  }
  Merge(out, merged_in);
  bool found = false;
  for (auto& e : entries) {
    if (e.manager == r.manager && e.operation == "Apply") {
      e.fields = want;
      e.time = r.now;
      e.api_version = r.api_version;
      found = true;
    }
  }
  if (!found) entries.push_back({r.manager, "Apply", r.api_version, r.now, "", want});
  SetManagedFields(out, ToJson(entries));
  return out;
}

value RecordUpdate(const value* before, const value& after, const std::string& manager,
                   const std::string& api_version, bool status_subresource,
                   const std::string& now) {
  std::vector<Entry> entries = Entries(before);
  const FieldSet has = OwnedFields(after, status_subresource);
  FieldSet changed;
  for (const auto& f : has) {
    const value* was = before ? At(*before, f) : nullptr;
    if (!was || !(*was == *At(after, f))) changed.insert(f);
  }
  for (auto& e : entries) {
    for (auto it = e.fields.begin(); it != e.fields.end();) {
      bool gone = !has.count(*it);
      bool taken = changed.count(*it) > 0 && !(e.manager == manager && e.operation == "Update");
      if (gone) {
        // A field that became an object (or went) is not the old leaf any more.
        bool prefix_of_live = false;
        for (const auto& f : has) prefix_of_live |= Overlap(*it, f) && f.size() > it->size();
        gone = !prefix_of_live;
      }
      it = (gone || taken) ? e.fields.erase(it) : std::next(it);
    }
  }
  if (!changed.empty()) {
    bool found = false;
    for (auto& e : entries) {
      if (e.manager == manager && e.operation == "Update") {
        e.fields.insert(changed.begin(), changed.end());
        e.time = now;
        found = true;
      }
    }
    if (!found) entries.push_back({manager, "Update", api_version, now, "", changed});
  }
  return ToJson(entries);
}

}  // namespace shoal::testing
