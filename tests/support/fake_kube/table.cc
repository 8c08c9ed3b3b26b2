#include "support/fake_kube/table.h"

#include <cctype>
#include <cstdio>
#include <ctime>

namespace shoal::testing {
namespace {

using web::json::value;

// Milliseconds since the epoch of an RFC 3339 time ("2026-12-01T17:18:29Z", with fractional
// seconds or a numeric offset as Go's time.RFC3339 parses them), or -1.
int64_t ParseTime(const std::string& s) {
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return -1;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  if (*rest == '.') {
    int64_t frac = 0, scale = 1000;
    for (++rest; std::isdigit(static_cast<unsigned char>(*rest)); ++rest) {
      if (scale > 1) {
        scale /= 10;
        frac += (*rest - '0') * scale;
      }
    }
    ms += frac;
  }
  if (*rest == 'Z' && rest[1] == '\0') return ms;
  int hh = 0, mm = 0;
  char sign = 0;
  if (std::sscanf(rest, "%c%2d:%2d", &sign, &hh, &mm) == 3 && (sign == '+' || sign == '-')) {
    const int64_t off = (hh * 60 + mm) * 60000;
    return sign == '+' ? ms - off : ms + off;
  }
  return -1;
}

// k8s.io/apimachinery/pkg/util/duration HumanDuration, the age kubectl shows.
std::string HumanDuration(int64_t ms) {
  const int64_t s = ms / 1000;
  if (s < 0) return "<invalid>";
  if (s < 120) return std::to_string(s) + "s";
  const int64_t m = s / 60;
  if (m < 10) {
    const int64_t rest = s % 60;
    return std::to_string(m) + "m" + (rest ? std::to_string(rest) + "s" : "");
  }
  if (m < 180) return std::to_string(m) + "m";
  const int64_t h = m / 60;
  if (h < 8) {
    const int64_t rest = m % 60;
    return std::to_string(h) + "h" + (rest ? std::to_string(rest) + "m" : "");
  }
  if (h < 48) return std::to_string(h) + "h";
  const int64_t d = h / 24;
  if (d < 8) {
    const int64_t rest = h % 24;
    return std::to_string(d) + "d" + (rest ? std::to_string(rest) + "h" : "");
  }
  if (d < 365 * 2) return std::to_string(d) + "d";
  if (d < 365 * 8) {
    const int64_t rest = d % 365;
    return std::to_string(d / 365) + "y" + (rest ? std::to_string(rest) + "d" : "");
  }
  return std::to_string(d / 365) + "y";
}

value Column(const std::string& name, const std::string& type, const std::string& format,
             const std::string& description, int priority) {
  value c = value::object();
  c["name"] = value::string(name);
  c["type"] = value::string(type);
  c["format"] = value::string(format);
  c["description"] = value::string(description);
  c["priority"] = value::number(priority);
  return c;
}

value Cell(const value& v, const PrinterColumn& c, int64_t now_ms) {
  if (v.is_null()) return value::null();
  if (c.type == "date") {
    const int64_t t = v.is_string() ? ParseTime(v.as_string()) : -1;
    return value::string(t < 0 ? "<unknown>" : HumanDuration(now_ms - t));
  }
  if (c.type == "integer" && v.is_number()) return value::number(v.as_number().to_int64());
  if ((c.type == "number" && v.is_number()) || (c.type == "boolean" && v.is_boolean())) return v;
  if (v.is_string()) return v;
  return value::string(v.serialize());
}

}  // namespace

bool WantsTable(const std::string& accept) {
  return accept.find("as=Table") != std::string::npos &&
         accept.find("g=meta.k8s.io") != std::string::npos;
}

value EvalJsonPath(const value& obj, const std::string& path) {
  std::string p = path;
  if (p.size() >= 2 && p.front() == '{' && p.back() == '}') p = p.substr(1, p.size() - 2);
  const value* cur = &obj;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '.') {
      size_t j = i + 1;
      while (j < p.size() && p[j] != '.' && p[j] != '[') ++j;
      const std::string key = p.substr(i + 1, j - i - 1);
      if (key.empty()) {
        i = j;
        continue;
      }
      if (!cur->is_object() || !cur->has_field(key)) return value::null();
      cur = &cur->at(key);
      i = j;
    } else if (p[i] == '[') {
      const size_t close = p.find(']', i);
      if (close == std::string::npos || !cur->is_array()) return value::null();
      const std::string inner = p.substr(i + 1, close - i - 1);
      const value* found = nullptr;
      if (inner.rfind("?(@.", 0) == 0 && inner.back() == ')') {
        // ?(@.key=="value") or ?(@.key=='value')
        const std::string expr = inner.substr(4, inner.size() - 5);
        const size_t eq = expr.find("==");
        if (eq == std::string::npos) return value::null();
        const std::string key = expr.substr(0, eq);
        std::string want = expr.substr(eq + 2);
        if (want.size() >= 2 && (want.front() == '"' || want.front() == '\'')) {
          want = want.substr(1, want.size() - 2);
        }
        for (const auto& e : cur->as_array()) {
          if (e.is_object() && e.has_field(key) && e.at(key).is_string() &&
              e.at(key).as_string() == want) {
            found = &e;
            break;
          }
        }
      } else {
        char* end = nullptr;
        const long n = std::strtol(inner.c_str(), &end, 10);
        if (end == inner.c_str() || *end != '\0' || n < 0 ||
            static_cast<size_t>(n) >= cur->as_array().size()) {
          return value::null();
        }
        found = &cur->as_array().at(static_cast<size_t>(n));
      }
      if (found == nullptr) return value::null();
      cur = found;
      i = close + 1;
    } else {
      return value::null();  // not a path this server evaluates
    }
  }
  return *cur;
}

value ToTable(const std::vector<value>& objects, const std::vector<PrinterColumn>& columns,
              const value& list_metadata, const std::string& include_object, int64_t now_ms) {
  std::vector<PrinterColumn> cols = columns;
  if (cols.empty()) {
    cols.push_back({.name = "Age",
                    .type = "date",
                    .format = "",
                    .description = "CreationTimestamp is a timestamp representing the server time "
                                   "when this object was created.",
                    .priority = 0,
                    .json_path = ".metadata.creationTimestamp"});
  }
  value defs = value::array();
  defs[0] = Column("Name", "string", "name",
                   "Name must be unique within a namespace. More info: "
                   "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
                   0);
  for (size_t i = 0; i < cols.size(); ++i) {
    defs[i + 1] = Column(cols[i].name, cols[i].type, cols[i].format, cols[i].description,
                         cols[i].priority);
  }
  value rows = value::array();
  for (size_t r = 0; r < objects.size(); ++r) {
    const value& obj = objects[r];
    value cells = value::array();
    cells[0] = EvalJsonPath(obj, ".metadata.name");
    for (size_t i = 0; i < cols.size(); ++i) {
      cells[i + 1] = Cell(EvalJsonPath(obj, cols[i].json_path), cols[i], now_ms);
    }
    value row = value::object();
    row["cells"] = cells;
    if (include_object == "Object") {
      row["object"] = obj;
    } else if (include_object != "None") {
      value partial = value::object();
      partial["kind"] = value::string("PartialObjectMetadata");
      partial["apiVersion"] = value::string("meta.k8s.io/v1");
      partial["metadata"] = obj.has_field("metadata") ? obj.at("metadata") : value::object();
      row["object"] = partial;
    }
    rows[r] = row;
  }
  value table = value::object();
  table["kind"] = value::string("Table");
  table["apiVersion"] = value::string("meta.k8s.io/v1");
  table["metadata"] = list_metadata.is_null() ? value::object() : list_metadata;
  table["columnDefinitions"] = defs;
  table["rows"] = rows;
  return table;
}

}  // namespace shoal::testing
