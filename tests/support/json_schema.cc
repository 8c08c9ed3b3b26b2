#include "support/json_schema.h"
#include "support/utf8.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

namespace shoal::testing {
namespace {

enum class Kind { kNull, kBool, kInt, kFloat, kString, kMap, kSeq };

// The JSON type a node becomes when Helm turns YAML into JSON (YAML 1.1 plain scalars).
Kind KindOf(const YAML::Node& n) {
  if (!n || n.IsNull()) return Kind::kNull;
  if (n.IsMap()) return Kind::kMap;
  if (n.IsSequence()) return Kind::kSeq;
  if (n.Tag() == "!") return Kind::kString;  // quoted
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kBool(
      "^(true|True|TRUE|false|False|FALSE|yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF|y|Y|n|N)$");
  static const std::regex kInt("^[-+]?(0|[1-9][0-9]*)$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  const std::string& s = n.Scalar();
  if (std::regex_match(s, kNull)) return Kind::kNull;
  if (std::regex_match(s, kBool)) return Kind::kBool;
  if (std::regex_match(s, kInt)) return Kind::kInt;
  if (std::regex_match(s, kFloat)) return Kind::kFloat;
  return Kind::kString;
}

bool IsNumber(Kind k) { return k == Kind::kInt || k == Kind::kFloat; }

double NumberOf(const YAML::Node& n) { return std::strtod(n.Scalar().c_str(), nullptr); }

bool TruthOf(const YAML::Node& n) {
  const std::string& s = n.Scalar();
  return s == "true" || s == "True" || s == "TRUE" || s == "yes" || s == "Yes" || s == "YES" ||
         s == "on" || s == "On" || s == "ON" || s == "y" || s == "Y";
}

// JSON equality: numbers by value (1 == 1.0), objects regardless of key order.
bool JsonEqual(const YAML::Node& a, const YAML::Node& b) {
  const Kind ka = KindOf(a), kb = KindOf(b);
  if (IsNumber(ka) && IsNumber(kb)) return NumberOf(a) == NumberOf(b);
  if (ka != kb) return false;
  switch (ka) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return TruthOf(a) == TruthOf(b);
    case Kind::kString:
      return a.Scalar() == b.Scalar();
    case Kind::kSeq:
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!JsonEqual(a[i], b[i])) return false;
      }
      return true;
    case Kind::kMap: {
      if (a.size() != b.size()) return false;
      for (const auto& kv : a) {
        const YAML::Node other = b[kv.first.as<std::string>()];
        if (!other || !JsonEqual(kv.second, other)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

std::string Show(const YAML::Node& n) {
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

std::string TypeName(Kind k) {
  switch (k) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "number";
    case Kind::kString:
      return "string";
    case Kind::kMap:
      return "object";
    case Kind::kSeq:
      return "array";
  }
  return "?";
}

bool HasType(const std::string& type, const YAML::Node& v) {
  const Kind k = KindOf(v);
  if (type == "integer") {
    if (k == Kind::kInt) return true;
    // Draft-06 and later: a number with no fractional part is an integer.
    if (k == Kind::kFloat) {
      const double x = NumberOf(v);
      return std::isfinite(x) && std::floor(x) == x;
    }
    return false;
  }
  if (type == "number") return IsNumber(k);
  return TypeName(k) == type;
}

const std::set<std::string>& Implemented() {
  // clang-format off
  static const std::set<std::string> kKeywords = {
      "type", "enum", "const",
      "properties", "required", "additionalProperties", "minProperties", "maxProperties",
      "items", "minItems", "maxItems", "uniqueItems",
      "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
      "minLength", "maxLength", "pattern",
      "allOf", "anyOf", "oneOf", "not", "$ref"};
  // clang-format on
  return kKeywords;
}

const std::set<std::string>& Annotations() {
  static const std::set<std::string> kKeywords = {
      "$schema", "$id", "$comment", "title", "description", "default", "examples", "definitions"};
  return kKeywords;
}

class Validator {
 public:
  explicit Validator(const YAML::Node& root) : root_(root) {}

  std::vector<std::string> Run(const YAML::Node& doc) {
    Check(root_, doc, "", 0);
    return std::move(errors_);
  }

  // Errors of `doc` against `schema` on their own, for the combinators.
  std::vector<std::string> Try(const YAML::Node& schema, const YAML::Node& doc,
                               const std::string& path, int depth) {
    std::vector<std::string> saved = std::move(errors_);
    errors_.clear();
    Check(schema, doc, path, depth);
    std::vector<std::string> out = std::move(errors_);
    errors_ = std::move(saved);
    return out;
  }

 private:
  void Error(const std::string& path, const std::string& what) {
    errors_.push_back((path.empty() ? "(root)" : path) + ": " + what);
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  YAML::Node Resolve(const std::string& ref, const std::string& path) {
    if (ref == "#") return root_;
    const std::string prefix = "#/definitions/";
    if (ref.rfind(prefix, 0) == 0) {
      const YAML::Node& root = root_;
      const YAML::Node defs = root["definitions"];
      if (defs && defs[ref.substr(prefix.size())]) return defs[ref.substr(prefix.size())];
    }
    Error(path, "unresolvable $ref \"" + ref + "\"");
    return YAML::Node();
  }

  void Check(const YAML::Node& s, const YAML::Node& v, const std::string& path, int depth) {
    if (depth > 64) return Error(path, "schema nesting too deep (a $ref loop?)");
    if (s.IsScalar()) {  // true / false schemas
      if (!TruthOf(s)) Error(path, "no value is allowed here");
      return;
    }
    if (!s.IsMap()) return Error(path, "schema is not an object");
    if (auto ref = s["$ref"]) {
      // Draft-07: $ref ignores its siblings.
      const YAML::Node target = Resolve(ref.as<std::string>(), path);
      if (target) Check(target, v, path, depth + 1);
      return;
    }
    if (auto t = s["type"]) {
      std::vector<std::string> types;
      if (t.IsSequence()) {
        for (const auto& x : t) types.push_back(x.as<std::string>());
      } else {
        types.push_back(t.as<std::string>());
      }
      bool ok = false;
      for (const auto& type : types) ok |= HasType(type, v);
      if (!ok) {
        std::string want;
        for (const auto& type : types) want += (want.empty() ? "" : " or ") + type;
        return Error(path,
                     "must be of type " + want + ", got " + TypeName(KindOf(v)) + " " + Show(v));
      }
    }
    if (auto e = s["enum"]) {
      bool found = false;
      for (const auto& x : e) found |= JsonEqual(x, v);
      if (!found) Error(path, "must be one of " + Show(e) + ", got " + Show(v));
    }
    if (auto c = s["const"]; c && !JsonEqual(c, v)) {
      Error(path, "must be " + Show(c) + ", got " + Show(v));
    }
    const Kind k = KindOf(v);
    if (IsNumber(k)) CheckNumber(s, NumberOf(v), path);
    if (k == Kind::kString) CheckString(s, v.Scalar(), path);
    if (k == Kind::kSeq) CheckArray(s, v, path, depth);
    if (k == Kind::kMap) CheckObject(s, v, path, depth);
    CheckCombinators(s, v, path, depth);
  }

  void CheckNumber(const YAML::Node& s, double x, const std::string& path) {
    if (auto m = s["minimum"]; m && !(x >= m.as<double>())) {
      Error(path, "must be >= " + m.Scalar());
    }
    if (auto m = s["maximum"]; m && !(x <= m.as<double>())) {
      Error(path, "must be <= " + m.Scalar());
    }
    if (auto m = s["exclusiveMinimum"]; m && !(x > m.as<double>())) {
      Error(path, "must be > " + m.Scalar());
    }
    if (auto m = s["exclusiveMaximum"]; m && !(x < m.as<double>())) {
      Error(path, "must be < " + m.Scalar());
    }
    if (auto m = s["multipleOf"]) {
      const double q = x / m.as<double>();
      if (std::fabs(q - std::round(q)) > 1e-9) Error(path, "must be a multiple of " + m.Scalar());
    }
  }

  void CheckString(const YAML::Node& s, const std::string& v, const std::string& path) {
    if (auto m = s["minLength"]; m && Utf8CodePoints(v) < m.as<size_t>()) {
      Error(path, "must be at least " + m.Scalar() + " characters long");
    }
    if (auto m = s["maxLength"]; m && Utf8CodePoints(v) > m.as<size_t>()) {
      Error(path, "must be at most " + m.Scalar() + " characters long");
    }
    if (auto p = s["pattern"]) {
      const std::string re = p.as<std::string>();
      if (!std::regex_search(v, std::regex(re, std::regex::ECMAScript))) {
        Error(path, "must match '" + re + "', got \"" + v + "\"");
      }
    }
  }

  void CheckArray(const YAML::Node& s, const YAML::Node& v, const std::string& path, int depth) {
    if (auto m = s["minItems"]; m && v.size() < m.as<size_t>()) {
      Error(path, "must have at least " + m.Scalar() + " items");
    }
    if (auto m = s["maxItems"]; m && v.size() > m.as<size_t>()) {
      Error(path, "must have at most " + m.Scalar() + " items");
    }
    if (auto u = s["uniqueItems"]; u && TruthOf(u)) {
      for (size_t i = 0; i < v.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
          if (JsonEqual(v[i], v[j])) {
            Error(path + "[" + std::to_string(i) + "]", "duplicates item " + std::to_string(j));
          }
        }
      }
    }
    if (auto items = s["items"]) {
      for (size_t i = 0; i < v.size(); ++i) {
        Check(items, v[i], path + "[" + std::to_string(i) + "]", depth + 1);
      }
    }
  }

  void CheckObject(const YAML::Node& s, const YAML::Node& v, const std::string& path, int depth) {
    const YAML::Node props = s["properties"];
    const YAML::Node extra = s["additionalProperties"];
    for (const auto& kv : v) {
      const std::string key = kv.first.as<std::string>();
      const std::string p = Join(path, key);
      if (props && props[key]) {
        Check(props[key], kv.second, p, depth + 1);
      } else if (extra) {
        if (extra.IsMap()) {
          Check(extra, kv.second, p, depth + 1);
        } else if (!TruthOf(extra)) {
          Error(p, "unknown key (additionalProperties is false)");
        }
      }
    }
    if (auto req = s["required"]) {
      for (const auto& r : req) {
        const std::string key = r.as<std::string>();
        if (!v[key]) Error(Join(path, key), "is required");
      }
    }
    if (auto m = s["minProperties"]; m && v.size() < m.as<size_t>()) {
      Error(path, "must have at least " + m.Scalar() + " keys");
    }
    if (auto m = s["maxProperties"]; m && v.size() > m.as<size_t>()) {
      Error(path, "must have at most " + m.Scalar() + " keys");
    }
  }

  void CheckCombinators(const YAML::Node& s, const YAML::Node& v, const std::string& path,
                        int depth) {
    if (auto all = s["allOf"]) {
      for (const auto& sub : all) Check(sub, v, path, depth + 1);
    }
    if (auto any = s["anyOf"]) {
      std::vector<std::string> why;
      bool ok = false;
      for (const auto& sub : any) {
        auto e = Try(sub, v, path, depth + 1);
        ok |= e.empty();
        if (!e.empty()) why.push_back(e.front());
      }
      if (!ok) Error(path, "matches none of anyOf (first: " + why.front() + ")");
    }
    if (auto one = s["oneOf"]) {
      int matches = 0;
      for (const auto& sub : one) matches += Try(sub, v, path, depth + 1).empty();
      if (matches != 1) {
        Error(path, "must match exactly one of oneOf, matches " + std::to_string(matches));
      }
    }
    if (auto no = s["not"]; no && Try(no, v, path, depth + 1).empty()) {
      Error(path, "must not match the \"not\" schema");
    }
  }

  const YAML::Node root_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> UnsupportedKeywords(const YAML::Node& schema) {
  std::vector<std::string> out;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& s,
                                                                        const std::string& path) {
    if (!s.IsMap()) return;  // true / false
    for (const auto& kv : s) {
      const std::string key = kv.first.as<std::string>();
      const std::string p = path.empty() ? key : path + "." + key;
      if (!Implemented().count(key) && !Annotations().count(key)) {
        out.push_back((path.empty() ? "(root)" : path) + ": " + key);
        continue;
      }
      if (key == "items" && kv.second.IsSequence()) {
        out.push_back(p + ": the tuple form of items");
      } else if (key == "properties" || key == "definitions") {
        for (const auto& sub : kv.second) walk(sub.second, p + "." + sub.first.as<std::string>());
      } else if (key == "items" || key == "additionalProperties" || key == "not") {
        walk(kv.second, p);
      } else if (key == "allOf" || key == "anyOf" || key == "oneOf") {
        for (size_t i = 0; i < kv.second.size(); ++i) {
          walk(kv.second[i], p + "[" + std::to_string(i) + "]");
        }
      }
    }
  };
  walk(schema, "");
  return out;
}

std::vector<std::string> ValidateJsonSchema(const YAML::Node& schema, const YAML::Node& doc) {
  return Validator(schema).Run(doc);
}

}  // namespace shoal::testing
