#include "promql_exprs.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace shoal::testing {
namespace {

bool IdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}
bool IdentChar(char c) { return IdentStart(c) || std::isdigit(static_cast<unsigned char>(c)); }
bool VarChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The index after the string literal that starts at `i` (", ' or `; \ escapes in the first two).
size_t SkipString(std::string_view s, size_t i) {
  const char quote = s[i++];
  while (i < s.size() && s[i] != quote) {
    if (s[i] == '\\' && quote != '`') ++i;
    ++i;
  }
  return std::min(i + 1, s.size());
}

// The index after the bracket that closes the one at `i` ('(' or '{' or '['), skipping strings.
size_t SkipBracket(std::string_view s, size_t i) {
  const char open = s[i];
  const char close = open == '(' ? ')' : open == '{' ? '}' : ']';
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(s, i);
      continue;
    }
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
    ++i;
  }
  return s.size();
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

// Words that are never metric names where they appear.
const std::set<std::string>& Keywords() {
  static const std::set<std::string> k = {"and", "or", "unless", "bool", "offset", "inf", "nan"};
  return k;
}
// Followed by a label list in parentheses.
const std::set<std::string>& LabelListKeywords() {
  static const std::set<std::string> k = {"by",       "without",    "on",
                                          "ignoring", "group_left", "group_right"};
  return k;
}
// Aggregation operators: `sum by (x) (...)` puts a keyword between the name and its "(".
const std::set<std::string>& Aggregations() {
  static const std::set<std::string> k = {"sum",    "min",      "max",    "avg",          "group",
                                          "stddev", "stdvar",   "count",  "count_values", "bottomk",
                                          "topk",   "quantile", "limitk", "limit_ratio"};
  return k;
}

// Replaces $name (not followed by a name character), ${name}, ${name:...} and [[name]] /
// [[name:...]].
void ReplaceVariable(std::string& s, const std::string& name, const std::string& value) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '$' && s.compare(i + 1, name.size(), name) == 0 &&
        (i + 1 + name.size() >= s.size() || !VarChar(s[i + 1 + name.size()]))) {
      out += value;
      i += 1 + name.size();
      continue;
    }
    if (s.compare(i, 2, "${") == 0 && s.compare(i + 2, name.size(), name) == 0) {
      const size_t after = i + 2 + name.size();
      if (after < s.size() && (s[after] == '}' || s[after] == ':')) {
        const size_t end = s.find('}', after);
        if (end != std::string::npos) {
          out += value;
          i = end + 1;
          continue;
        }
      }
    }
    if (s.compare(i, 2, "[[") == 0 && s.compare(i + 2, name.size(), name) == 0) {
      const size_t after = i + 2 + name.size();
      if (after < s.size() && (s[after] == ']' || s[after] == ':')) {
        const size_t end = s.find("]]", after);
        if (end != std::string::npos) {
          out += value;
          i = end + 2;
          continue;
        }
      }
    }
    out += s[i++];
  }
  s = std::move(out);
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::vector<std::string> VectorSelectors(std::string_view s) {
  std::vector<std::string> out;
  auto add = [&](std::string sel) {
    if (std::find(out.begin(), out.end(), sel) == out.end()) out.push_back(std::move(sel));
  };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '#') {  // a comment, to the end of the line
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '"' || c == '\'' || c == '`') {
      i = SkipString(s, i);
    } else if (c == '[') {  // a range or subquery: durations only
      i = SkipBracket(s, i);
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      // A number or a duration (5m, 1h30m, 1e3, 0x1f).
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    } else if (c == '{') {  // a selector without a metric name
      const size_t end = SkipBracket(s, i);
      add(std::string(s.substr(i, end - i)));
      i = end;
    } else if (IdentStart(c)) {
      size_t j = i;
      while (j < s.size() && IdentChar(s[j])) ++j;
      const std::string word(s.substr(i, j - i));
      const std::string lower = Lower(word);
      const size_t next = SkipSpace(s, j);
      const char after = next < s.size() ? s[next] : '\0';
      if (LabelListKeywords().count(lower)) {
        i = after == '(' ? SkipBracket(s, next) : j;
      } else if (Keywords().count(lower) || after == '(' || Aggregations().count(lower)) {
        i = j;  // a keyword, a function or an aggregation
      } else if (after == '{') {
        const size_t end = SkipBracket(s, next);
        add(word + std::string(s.substr(next, end - next)));
        i = end;
      } else {
        add(word);
        i = j;
      }
    } else {
      ++i;  // operators, parentheses, commas, @
    }
  }
  return out;
}

std::string SubstituteVariables(std::string expr, const std::map<std::string, std::string>& vars,
                                int interval_seconds) {
  const std::string interval = std::to_string(interval_seconds) + "s";
  const std::string ms = std::to_string(interval_seconds * 1000);
  const std::string s = std::to_string(interval_seconds);
  // Built-ins, longest first.
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, std::string>>{{"__rate_interval", interval},
                                                        {"__interval_ms", ms},
                                                        {"__range_ms", ms},
                                                        {"__range_s", s},
                                                        {"__interval", interval},
                                                        {"__range", interval}}) {
    ReplaceVariable(expr, name, value);
  }
  std::vector<std::pair<std::string, std::string>> sorted(vars.begin(), vars.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& [name, value] : sorted) ReplaceVariable(expr, name, value);
  return expr;
}

std::optional<std::string> UnresolvedVariable(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '$' && i + 1 < s.size() &&
        (s[i + 1] == '{' || std::isalpha(static_cast<unsigned char>(s[i + 1])) ||
         s[i + 1] == '_')) {
      size_t j = i + 1;
      while (j < s.size() && (VarChar(s[j]) || s[j] == '{' || s[j] == '}')) ++j;
      return std::string(s.substr(i, j - i));
    }
    if (s.compare(i, 2, "[[") == 0) {
      const size_t end = s.find("]]", i);
      return std::string(s.substr(i, end == std::string_view::npos ? s.size() - i : end + 2 - i));
    }
  }
  return std::nullopt;
}

TemplateQuery ParseTemplateQuery(std::string_view query) {
  const std::string q = Trim(query);
  TemplateQuery t;
  auto inner = [&](const std::string& prefix) -> std::optional<std::string> {
    if (q.rfind(prefix + "(", 0) != 0 || q.back() != ')') return std::nullopt;
    return q.substr(prefix.size() + 1, q.size() - prefix.size() - 2);
  };
  if (auto args = inner("label_values")) {
    // The label is after the last top-level comma (a selector's matchers may hold commas).
    int depth = 0;
    size_t comma = std::string::npos;
    for (size_t i = 0; i < args->size(); ++i) {
      const char c = (*args)[i];
      if (c == '"' || c == '\'' || c == '`') {
        i = SkipString(*args, i) - 1;
      } else if (c == '(' || c == '{' || c == '[') {
        ++depth;
      } else if (c == ')' || c == '}' || c == ']') {
        --depth;
      } else if (c == ',' && depth == 0) {
        comma = i;
      }
    }
    if (comma == std::string::npos) {
      t.kind = TemplateQuery::Kind::kLabelName;
      t.label = Trim(*args);
    } else {
      t.kind = TemplateQuery::Kind::kSeriesLabel;
      t.expr = Trim(args->substr(0, comma));
      t.label = Trim(args->substr(comma + 1));
    }
    return t;
  }
  if (auto expr = inner("query_result")) {
    t.expr = Trim(*expr);
    return t;
  }
  t.expr = q;
  return t;
}

}  // namespace shoal::testing
