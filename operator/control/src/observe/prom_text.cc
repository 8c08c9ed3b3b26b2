#include "shoal/control/prom_text.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

namespace shoal::control {

namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

// What goes into an error message: the offending text, cut short and without control bytes.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    out += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  }
  if (s.size() > kMax) out += "...";
  return out + "\"";
}

// A float as Prometheus reads one (Go's strconv.ParseFloat): decimal notation, or Inf/Infinity
// with an optional sign, or NaN, in any case. Hex floats and "nan(...)" are not accepted.
std::optional<double> ParseValue(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string_view rest = s;
  bool negative = false;
  if (rest[0] == '+' || rest[0] == '-') {
    negative = rest[0] == '-';
    rest.remove_prefix(1);
  }
  if (EqualsIgnoreCase(rest, "inf") || EqualsIgnoreCase(rest, "infinity")) {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (EqualsIgnoreCase(s, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (rest.empty() || !(IsDigit(rest[0]) || rest[0] == '.')) return std::nullopt;
  for (char c : rest) {
    if (!(IsDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      return std::nullopt;
    }
  }
  double v = 0;
  const auto [end, ec] =
      std::from_chars(rest.data(), rest.data() + rest.size(), v, std::chars_format::general);
  if (ec != std::errc() || end != rest.data() + rest.size()) return std::nullopt;
  return negative ? -v : v;
}

std::optional<int64_t> ParseTimestamp(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty() || !(IsDigit(s[0]) || s[0] == '-')) return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Parses one sample line (not blank, not a comment). Positions never run past the line: every
// read checks `AtEnd()` first.
class LineParser {
 public:
  explicit LineParser(std::string_view line) : line_(line) {}

  Status Parse(PromSample* out) {
    SkipBlanks();
    out->name = MetricName();
    if (out->name.empty()) {
      return Status::InvalidArgument("expected a metric name, found " + Quote(Rest()));
    }
    SkipBlanks();
    if (!AtEnd() && Peek() == '{') {
      ++pos_;
      SHOAL_RETURN_IF_ERROR(Labels(out));
    }
    SkipBlanks();
    const std::string_view value_text = Token();
    if (value_text.empty()) {
      return Status::InvalidArgument(
          "expected a value after " + Quote(out->name) +
          (AtEnd() ? ", found the end of the line" : ", found " + Quote(Rest())));
    }
    const auto value = ParseValue(value_text);
    if (!value) return Status::InvalidArgument("malformed value " + Quote(value_text));
    out->value = *value;
    SkipBlanks();
    if (AtEnd()) return Status::Ok();
    const std::string_view ts_text = Token();
    const auto ts = ParseTimestamp(ts_text);
    if (!ts) return Status::InvalidArgument("malformed timestamp " + Quote(ts_text));
    out->timestamp_ms = *ts;
    SkipBlanks();
    if (!AtEnd()) {
      return Status::InvalidArgument("unexpected text after the timestamp: " + Quote(Rest()));
    }
    return Status::Ok();
  }

 private:
  bool AtEnd() const { return pos_ >= line_.size(); }
  char Peek() const { return line_[pos_]; }
  std::string_view Rest() const { return AtEnd() ? std::string_view() : line_.substr(pos_); }
  void SkipBlanks() {
    while (!AtEnd() && IsBlank(Peek())) ++pos_;
  }
  // Up to the next blank or the end.
  std::string_view Token() {
    const size_t start = pos_;
    while (!AtEnd() && !IsBlank(Peek())) ++pos_;
    return line_.substr(start, pos_ - start);
  }
  std::string MetricName() {
    const size_t start = pos_;
    if (AtEnd() || !(IsAlpha(Peek()) || Peek() == '_' || Peek() == ':')) return "";
    while (!AtEnd() && (IsAlpha(Peek()) || IsDigit(Peek()) || Peek() == '_' || Peek() == ':')) {
      ++pos_;
    }
    return std::string(line_.substr(start, pos_ - start));
  }
  std::string LabelName() {
    const size_t start = pos_;
    if (AtEnd() || !(IsAlpha(Peek()) || Peek() == '_')) return "";
    while (!AtEnd() && (IsAlpha(Peek()) || IsDigit(Peek()) || Peek() == '_')) ++pos_;
    return std::string(line_.substr(start, pos_ - start));
  }

  // After '{': label pairs up to and including '}'.
  Status Labels(PromSample* out) {
    while (true) {
      SkipBlanks();
      if (AtEnd()) return Status::InvalidArgument("unterminated label set: expected '}'");
      if (Peek() == '}') {
        ++pos_;
        return Status::Ok();
      }
      std::string name = LabelName();
      if (name.empty()) {
        return Status::InvalidArgument("expected a label name or '}', found " + Quote(Rest()));
      }
      SkipBlanks();
      if (AtEnd() || Peek() != '=') {
        return Status::InvalidArgument("expected '=' after label name " + Quote(name));
      }
      ++pos_;
      SkipBlanks();
      if (AtEnd() || Peek() != '"') {
        return Status::InvalidArgument("expected '\"' to open the value of label " + Quote(name));
      }
      ++pos_;
      std::string value;
      SHOAL_RETURN_IF_ERROR(LabelValue(name, &value));
      if (!out->labels.emplace(name, std::move(value)).second) {
        return Status::InvalidArgument("label " + Quote(name) + " appears twice");
      }
      SkipBlanks();
      if (AtEnd()) return Status::InvalidArgument("unterminated label set: expected '}'");
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() != '}') {
        return Status::InvalidArgument("expected ',' or '}' after the value of label " +
                                       Quote(name) + ", found " + Quote(Rest()));
      }
    }
  }

  // After the opening '"': the value up to and including the closing '"'.
  Status LabelValue(const std::string& name, std::string* value) {
    while (!AtEnd()) {
      const char c = line_[pos_++];
      if (c == '"') return Status::Ok();
      if (c != '\\') {
        value->push_back(c);
        continue;
      }
      if (AtEnd()) break;
      const char e = line_[pos_++];
      switch (e) {
        case '\\':
          value->push_back('\\');
          break;
        case '"':
          value->push_back('"');
          break;
        case 'n':
          value->push_back('\n');
          break;
        default:
          return Status::InvalidArgument("invalid escape \\" + std::string(1, e) +
                                         " in the value of label " + Quote(name) +
                                         " (only \\\\, \\\" and \\n are allowed)");
      }
    }
    return Status::InvalidArgument("unterminated value of label " + Quote(name));
  }

  std::string_view line_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::vector<PromSample>> ParsePromText(std::string_view text) {
  std::vector<PromSample> samples;
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t first = 0;
    while (first < line.size() && IsBlank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    PromSample sample;
    Status st = LineParser(line).Parse(&sample);
    if (!st.ok()) {
      return Status::InvalidArgument("line " + std::to_string(line_no) + ": " + st.message());
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace shoal::control
