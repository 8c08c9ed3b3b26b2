#include "support/fake_kube/openapi_schema.h"
#include "support/utf8.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <regex>
#include <set>

namespace shoal::testing {

using web::json::value;

namespace {

// ------------------------------------------------------------------------------------------
// Schema access

const value* Kw(const value& schema, const char* key) {
  if (!schema.is_object()) return nullptr;
  auto& obj = schema.as_object();
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &it->second;
}

bool Flag(const value& schema, const char* key) {
  const value* v = Kw(schema, key);
  return v != nullptr && v->is_boolean() && v->as_bool();
}

std::string Str(const value& schema, const char* key) {
  const value* v = Kw(schema, key);
  return v != nullptr && v->is_string() ? v->as_string() : "";
}

// The schema of property `key` of an object schema: properties[key], else additionalProperties
// when it is a schema; nullptr when the field is unknown.
const value* ChildSchema(const value& schema, const std::string& key) {
  if (const value* props = Kw(schema, "properties"); props != nullptr && props->is_object()) {
    auto& obj = props->as_object();
    auto it = obj.find(key);
    if (it != obj.end()) return &it->second;
  }
  const value* extra = Kw(schema, "additionalProperties");
  if (extra != nullptr && extra->is_object()) return extra;
  return nullptr;
}

bool RootOwned(bool root, const std::string& key) {
  return root && (key == "metadata" || key == "apiVersion" || key == "kind");
}

std::string Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// ------------------------------------------------------------------------------------------
// Values as Go's fmt prints them in field errors (%v for numbers and bools, %q for strings).

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string FormatDouble(double d) {
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 1e21) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.0f", d);
    return buf;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d);
  return std::string(buf, r.ptr);
}

std::string FormatNumber(const value& v) {
  const auto& n = v.as_number();
  if (n.is_int64()) return std::to_string(n.to_int64());
  if (n.is_uint64()) return std::to_string(n.to_uint64());
  return FormatDouble(n.to_double());
}

std::string FormatValue(const value& v) {
  if (v.is_null()) return "null";
  if (v.is_string()) return Quote(v.as_string());
  if (v.is_boolean()) return v.as_bool() ? "true" : "false";
  if (v.is_number()) return FormatNumber(v);
  return v.serialize();
}

double ToDouble(const value& v) { return v.as_number().to_double(); }

// kube-openapi's name of a JSON value's type.
std::string TypeName(const value& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return v.as_number().is_integral() ? "integer" : "number";
}

bool IsIntegral(const value& v) {
  if (!v.is_number()) return false;
  if (v.as_number().is_integral()) return true;
  const double d = v.as_number().to_double();  // 2.0 passes as an integer, as in kube-openapi
  return std::isfinite(d) && d == std::floor(d);
}

// ------------------------------------------------------------------------------------------
// Validation

class Validator {
 public:
  std::vector<FieldError> Run(const value& schema, const value& obj, bool root) {
    Check(schema, obj, "", root);
    return std::move(errors_);
  }

 private:
  // field.Invalid(path, v, "<path> in body <what>")
  void Invalid(const std::string& path, const value& v, const std::string& what,
               const char* type = "FieldValueInvalid") {
    errors_.push_back(
        {type, path, "Invalid value: " + FormatValue(v) + ": " + path + " in body " + what});
  }

  void Check(const value& s, const value& v, const std::string& path, bool root) {
    if (v.is_null()) {
      // Nulls left after defaulting (in arrays, or of non-nullable map values) fail the type.
      if (Flag(s, "nullable") || (!Kw(s, "type") && !Flag(s, "x-kubernetes-int-or-string"))) {
        return;
      }
    }
    if (Flag(s, "x-kubernetes-int-or-string")) {
      if (!IsIntegral(v) && !v.is_string()) {
        const value name = value::string(TypeName(v));
        return Invalid(path, name, "must be of type integer,string: " + Quote(TypeName(v)),
                       "FieldValueTypeInvalid");
      }
    } else if (const std::string t = Str(s, "type"); !t.empty()) {
      const bool ok = (t == "object" && v.is_object()) || (t == "array" && v.is_array()) ||
                      (t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) ||
                      (t == "integer" && IsIntegral(v)) || (t == "number" && v.is_number());
      if (!ok) {
        return Invalid(path, value::string(TypeName(v)),
                       "must be of type " + t + ": " + Quote(TypeName(v)),
                       "FieldValueTypeInvalid");
      }
    }
    if (v.is_string()) CheckString(s, v, path);
    if (const value* e = Kw(s, "enum"); e != nullptr && e->is_array()) {
      bool found = false;
      std::string supported;
      for (const auto& x : e->as_array()) {
        found |= x == v;
        supported += (supported.empty() ? "" : ", ") +
                     (x.is_string() ? Quote(x.as_string()) : Quote(x.serialize()));
      }
      if (!found) {
        errors_.push_back({"FieldValueNotSupported", path,
                           "Unsupported value: " + FormatValue(v) +
                               (supported.empty() ? "" : ": supported values: " + supported)});
      }
    }
    if (v.is_array()) CheckArray(s, v, path);
    if (v.is_number()) CheckNumber(s, v, path);
    if (v.is_object()) CheckObject(s, v, path, root);
  }

  void CheckString(const value& s, const value& v, const std::string& path) {
    const std::string& str = v.as_string();
    const size_t len = Utf8CodePoints(str);
    if (const value* m = Kw(s, "maxLength"); m != nullptr && m->is_number()) {
      if (len > static_cast<size_t>(m->as_number().to_int64())) {
        errors_.push_back({"FieldValueTooLong", path,
                           "Too long: may not be longer than " + FormatNumber(*m)});
      }
    }
    if (const value* m = Kw(s, "minLength"); m != nullptr && m->is_number()) {
      if (len < static_cast<size_t>(m->as_number().to_int64())) {
        Invalid(path, v, "should be at least " + FormatNumber(*m) + " chars long");
      }
    }
    if (const std::string p = Str(s, "pattern"); !p.empty()) {
      bool match = false;
      try {
        match = std::regex_search(str, std::regex(p, std::regex::ECMAScript));
      } catch (const std::regex_error&) {
        match = true;  // a pattern std::regex cannot compile is not checked
      }
      if (!match) Invalid(path, v, "should match '" + p + "'");
    }
    if (Str(s, "format") == "date-time") {
      static const std::regex kRfc3339(
          "^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?"
          "([Zz]|[+-][0-9]{2}:[0-9]{2})$");
      if (!std::regex_match(str, kRfc3339)) {
        Invalid(path, v, "must be of type date-time: " + Quote(str), "FieldValueTypeInvalid");
      }
    }
  }

  void CheckNumber(const value& s, const value& v, const std::string& path) {
    const double x = ToDouble(v);
    if (const value* m = Kw(s, "maximum"); m != nullptr && m->is_number()) {
      const bool excl = Flag(s, "exclusiveMaximum");
      if (excl ? !(x < ToDouble(*m)) : !(x <= ToDouble(*m))) {
        Invalid(path, v,
                std::string("should be less than ") + (excl ? "" : "or equal to ") +
                    FormatNumber(*m));
      }
    }
    if (const value* m = Kw(s, "minimum"); m != nullptr && m->is_number()) {
      const bool excl = Flag(s, "exclusiveMinimum");
      if (excl ? !(x > ToDouble(*m)) : !(x >= ToDouble(*m))) {
        Invalid(path, v,
                std::string("should be greater than ") + (excl ? "" : "or equal to ") +
                    FormatNumber(*m));
      }
    }
  }

  void CheckArray(const value& s, const value& v, const std::string& path) {
    const auto n = static_cast<int64_t>(v.as_array().size());
    if (const value* m = Kw(s, "maxItems"); m != nullptr && m->is_number()) {
      if (n > m->as_number().to_int64()) {
        errors_.push_back({"FieldValueTooMany", path,
                           "Too many: " + std::to_string(n) + ": must have at most " +
                               FormatNumber(*m) + " items"});
      }
    }
    if (const value* m = Kw(s, "minItems"); m != nullptr && m->is_number()) {
      if (n < m->as_number().to_int64()) {
        Invalid(path, value::number(n), "should have at least " + FormatNumber(*m) + " items");
      }
    }
    if (const value* items = Kw(s, "items"); items != nullptr && items->is_object()) {
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        Check(*items, v.as_array().at(i), path + "[" + std::to_string(i) + "]", false);
      }
    }
  }

  void CheckObject(const value& s, const value& v, const std::string& path, bool root) {
    const auto n = static_cast<int64_t>(v.as_object().size());
    if (const value* m = Kw(s, "maxProperties"); m != nullptr && m->is_number()) {
      if (n > m->as_number().to_int64()) {
        errors_.push_back({"FieldValueTooMany", path,
                           "Too many: " + std::to_string(n) + ": must have at most " +
                               FormatNumber(*m) + " items"});
      }
    }
    if (const value* m = Kw(s, "minProperties"); m != nullptr && m->is_number()) {
      if (n < m->as_number().to_int64()) {
        Invalid(path, value::number(n),
                "should have at least " + FormatNumber(*m) + " properties");
      }
    }
    if (const value* req = Kw(s, "required"); req != nullptr && req->is_array()) {
      for (const auto& r : req->as_array()) {
        if (!r.is_string()) continue;
        const std::string key = r.as_string();
        if (!v.has_field(key) || v.at(key).is_null()) {
          errors_.push_back({"FieldValueRequired", Join(path, key), "Required value"});
        }
      }
    }
    std::map<std::string, const value*> sorted;
    for (const auto& [k, x] : v.as_object()) sorted[k] = &x;
    for (const auto& [key, x] : sorted) {
      if (RootOwned(root, key) && key == "metadata") continue;  // ObjectMeta: the server's
      if (const value* child = ChildSchema(s, key)) Check(*child, *x, Join(path, key), false);
    }
  }

  std::vector<FieldError> errors_;
};

void Prune(const value& s, value& v, const std::string& path, bool root,
           std::vector<std::string>* pruned) {
  if (v.is_array()) {
    const value* items = Kw(s, "items");
    if (items == nullptr || !items->is_object()) return;
    auto& arr = v.as_array();
    for (size_t i = 0; i < arr.size(); ++i) {
      Prune(*items, arr.at(i), path + "[" + std::to_string(i) + "]", false, pruned);
    }
    return;
  }
  if (!v.is_object()) return;
  const bool preserve = Flag(s, "x-kubernetes-preserve-unknown-fields");
  std::vector<std::string> drop;
  for (auto& [key, x] : v.as_object()) {
    if (RootOwned(root, key)) continue;
    const value* child = ChildSchema(s, key);
    if (child == nullptr) {
      if (!preserve) drop.push_back(key);
      continue;
    }
    Prune(*child, x, Join(path, key), false, pruned);
  }
  for (const auto& key : drop) {
    v.erase(key);
    pruned->push_back(Join(path, key));
  }
}

void Default(const value& s, value& v, bool root) {
  if (v.is_array()) {
    const value* items = Kw(s, "items");
    if (items == nullptr || !items->is_object()) return;
    for (auto& x : v.as_array()) Default(*items, x, false);
    return;
  }
  if (!v.is_object()) return;
  // Nulls of non-nullable fields go (structuraldefaulting.PruneNonNullableNullsWithoutDefaults);
  // those with a default get it below.
  std::vector<std::string> nulls;
  for (const auto& [key, x] : v.as_object()) {
    const value* child = ChildSchema(s, key);
    if (x.is_null() && child != nullptr && !Flag(*child, "nullable") && !RootOwned(root, key)) {
      nulls.push_back(key);
    }
  }
  for (const auto& key : nulls) v.erase(key);
  if (const value* props = Kw(s, "properties"); props != nullptr && props->is_object()) {
    for (const auto& [key, child] : props->as_object()) {
      if (RootOwned(root, key)) continue;
      const value* d = Kw(child, "default");
      if (d != nullptr && !v.has_field(key)) v[key] = *d;
    }
  }
  for (auto& [key, x] : v.as_object()) {
    if (RootOwned(root, key)) continue;
    if (const value* child = ChildSchema(s, key)) Default(*child, x, false);
  }
}

// ------------------------------------------------------------------------------------------
// YAML

bool PlainMatches(const std::string& s, const std::regex& re) { return std::regex_match(s, re); }

}  // namespace

std::string AggregateMessage(const std::vector<FieldError>& errors) {
  std::vector<std::string> msgs;
  std::set<std::string> seen;
  for (const auto& e : errors) {
    const std::string m = e.ToString();
    if (seen.insert(m).second) msgs.push_back(m);
  }
  if (msgs.size() == 1) return msgs[0];
  std::string out;
  for (const auto& m : msgs) out += (out.empty() ? "" : ", ") + m;
  return "[" + out + "]";
}

value YamlToJson(const YAML::Node& n) {
  if (!n || n.IsNull()) return value::null();
  if (n.IsMap()) {
    value out = value::object();
    for (const auto& kv : n) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
    return out;
  }
  if (n.IsSequence()) {
    std::vector<value> items;
    for (const auto& x : n) items.push_back(YamlToJson(x));
    return value::array(std::move(items));
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return value::string(s);  // quoted
  static const std::regex kTrue("^(true|True|TRUE|yes|Yes|YES|on|On|ON)$");
  static const std::regex kFalse("^(false|False|FALSE|no|No|NO|off|Off|OFF)$");
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kInt("^[-+]?(0|[1-9][0-9]*)$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (PlainMatches(s, kNull)) return value::null();
  if (PlainMatches(s, kTrue)) return value::boolean(true);
  if (PlainMatches(s, kFalse)) return value::boolean(false);
  if (PlainMatches(s, kInt)) {
    try {
      return value::number(static_cast<int64_t>(std::stoll(s)));
    } catch (...) {
      return value::number(std::stod(s));
    }
  }
  if (PlainMatches(s, kFloat)) return value::number(std::stod(s));
  return value::string(s);
}

void ApplyDefaults(const value& schema, value& obj, bool root) { Default(schema, obj, root); }

std::vector<std::string> PruneUnknownFields(const value& schema, value& obj, bool root) {
  std::vector<std::string> pruned;
  Prune(schema, obj, "", root, &pruned);
  std::sort(pruned.begin(), pruned.end());
  return pruned;
}

std::vector<FieldError> ValidateAgainstSchema(const value& schema, const value& obj, bool root) {
  return Validator().Run(schema, obj, root);
}

Result<CrdResource> ParseCrd(const std::string& yaml_text) {
  YAML::Node crd;
  try {
    crd = YAML::Load(yaml_text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("the CRD is not YAML: ") + e.what());
  }
  const value doc = YamlToJson(crd);
  auto str = [](const value& v, const char* key) {
    return v.is_object() && v.has_field(key) && v.at(key).is_string() ? v.at(key).as_string()
                                                                      : std::string();
  };
  if (str(doc, "kind") != "CustomResourceDefinition" ||
      str(doc, "apiVersion") != "apiextensions.k8s.io/v1" || !doc.has_field("spec")) {
    return Status::InvalidArgument("not an apiextensions.k8s.io/v1 CustomResourceDefinition");
  }
  const value& spec = doc.at("spec");
  const value names = spec.has_field("names") ? spec.at("names") : value::object();
  CrdResource out;
  ResourceType& t = out.type;
  t.group = str(spec, "group");
  t.plural = str(names, "plural");
  t.kind = str(names, "kind");
  t.singular = str(names, "singular");
  for (const char* key : {"shortNames", "categories"}) {
    if (!names.has_field(key) || !names.at(key).is_array()) continue;
    auto& into = std::string_view(key) == "shortNames" ? t.short_names : t.categories;
    for (const auto& n : names.at(key).as_array()) {
      if (n.is_string()) into.push_back(n.as_string());
    }
  }
  t.namespaced = str(spec, "scope") != "Cluster";
  t.custom = true;
  t.tracks_generation = true;
  const value* storage = nullptr;
  if (spec.has_field("versions") && spec.at("versions").is_array()) {
    for (const auto& v : spec.at("versions").as_array()) {
      if (v.has_field("storage") && v.at("storage").is_boolean() && v.at("storage").as_bool()) {
        storage = &v;
      }
    }
  }
  if (storage == nullptr || t.group.empty() || t.plural.empty() || t.kind.empty()) {
    return Status::InvalidArgument("the CRD lacks group, names or a storage version");
  }
  t.version = str(*storage, "name");
  if (storage->has_field("subresources")) {
    const value& sub = storage->at("subresources");
    t.status_subresource = sub.has_field("status");
    if (sub.has_field("scale")) {
      const value& sc = sub.at("scale");
      t.scale = ScaleSubresource{.spec_replicas_path = str(sc, "specReplicasPath"),
                                 .status_replicas_path = str(sc, "statusReplicasPath"),
                                 .label_selector_path = str(sc, "labelSelectorPath")};
    }
  }
  if (storage->has_field("additionalPrinterColumns") &&
      storage->at("additionalPrinterColumns").is_array()) {
    for (const auto& c : storage->at("additionalPrinterColumns").as_array()) {
      PrinterColumn col{.name = str(c, "name"),
                        .type = str(c, "type"),
                        .format = str(c, "format"),
                        .description = str(c, "description"),
                        .priority = 0,
                        .json_path = str(c, "jsonPath")};
      if (c.has_field("priority") && c.at("priority").is_integer()) {
        col.priority = c.at("priority").as_integer();
      }
      t.printer_columns.push_back(std::move(col));
    }
  }
  if (!storage->has_field("schema") || !storage->at("schema").has_field("openAPIV3Schema")) {
    return Status::InvalidArgument("the CRD's storage version has no openAPIV3Schema");
  }
  out.schema = storage->at("schema").at("openAPIV3Schema");
  return out;
}

}  // namespace shoal::testing
