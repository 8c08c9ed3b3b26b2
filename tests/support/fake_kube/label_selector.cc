#include "support/fake_kube/label_selector.h"

#include <algorithm>

namespace shoal::testing {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Splits at commas outside parentheses: "a in (x,y),b" -> {"a in (x,y)", "b"}.
std::vector<std::string> SplitTopLevel(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool ValidKey(const std::string& key) {
  if (key.empty()) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
           c == '/';
  });
}

}  // namespace

Result<LabelSelector> LabelSelector::Parse(const std::string& text) {
  LabelSelector out;
  if (Trim(text).empty()) return out;
  for (const std::string& raw : SplitTopLevel(text)) {
    const std::string part = Trim(raw);
    const Status bad = Status::InvalidArgument("unable to parse requirement: \"" + part + "\"");
    Requirement req;
    size_t pos;
    if ((pos = part.find("!=")) != std::string::npos) {
      req = {Trim(part.substr(0, pos)), Op::kNotEquals, {Trim(part.substr(pos + 2))}};
    } else if ((pos = part.find("==")) != std::string::npos) {
      req = {Trim(part.substr(0, pos)), Op::kEquals, {Trim(part.substr(pos + 2))}};
    } else if ((pos = part.find('=')) != std::string::npos) {
      req = {Trim(part.substr(0, pos)), Op::kEquals, {Trim(part.substr(pos + 1))}};
    } else if (part.find('(') != std::string::npos) {
      const size_t open = part.find('(');
      const size_t close = part.rfind(')');
      if (close == std::string::npos || close < open) return bad;
      const std::string head = Trim(part.substr(0, open));
      const size_t space = head.find_last_of(" \t");
      if (space == std::string::npos) return bad;
      const std::string op = Trim(head.substr(space + 1));
      req.key = Trim(head.substr(0, space));
      if (op == "in") {
        req.op = Op::kIn;
      } else if (op == "notin") {
        req.op = Op::kNotIn;
      } else {
        return bad;
      }
      for (const auto& v : SplitTopLevel(part.substr(open + 1, close - open - 1))) {
        req.values.push_back(Trim(v));
      }
    } else if (!part.empty() && part[0] == '!') {
      req = {Trim(part.substr(1)), Op::kNotExists, {}};
    } else {
      req = {part, Op::kExists, {}};
    }
    if (!ValidKey(req.key)) return bad;
    out.requirements_.push_back(std::move(req));
  }
  return out;
}

bool LabelSelector::Matches(const std::map<std::string, std::string>& labels) const {
  for (const auto& req : requirements_) {
    const auto it = labels.find(req.key);
    const bool has = it != labels.end();
    const auto in_values = [&] {
      return has && std::find(req.values.begin(), req.values.end(), it->second) != req.values.end();
    };
    switch (req.op) {
      case Op::kEquals:
      case Op::kIn:
        if (!in_values()) return false;
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        if (in_values()) return false;
        break;
      case Op::kExists:
        if (!has) return false;
        break;
      case Op::kNotExists:
        if (has) return false;
        break;
    }
  }
  return true;
}

}  // namespace shoal::testing
