#include "support/fake_kube/json_patch.h"

#include <string>
#include <vector>

namespace shoal::testing {

using web::json::value;

namespace {

// RFC 6901: "/a~1b/0" -> {"a/b", "0"}.
Result<std::vector<std::string>> ParsePointer(const std::string& pointer) {
  std::vector<std::string> tokens;
  if (pointer.empty()) return tokens;
  if (pointer[0] != '/') {
    return Status::InvalidArgument("JSON pointer \"" + pointer + "\" does not start with /");
  }
  std::string cur;
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      tokens.push_back(cur);
      cur.clear();
    } else if (pointer[i] == '~' && i + 1 < pointer.size() &&
               (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
      cur += pointer[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      cur += pointer[i];
    }
  }
  return tokens;
}

// An array index token: digits without leading zeros.
bool ParseIndex(const std::string& token, size_t* index) {
  if (token.empty() || token.size() > 9) return false;
  if (token.size() > 1 && token[0] == '0') return false;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  *index = std::stoul(token);
  return true;
}

Status Missing(const std::string& path) {
  return Status::FailedPrecondition("path \"" + path + "\" does not exist");
}

// The node `tokens` names, or nullptr.
value* Resolve(value& root, const std::vector<std::string>& tokens, size_t count) {
  value* node = &root;
  for (size_t i = 0; i < count; ++i) {
    const std::string& t = tokens[i];
    if (node->is_object()) {
      if (!node->has_field(t)) return nullptr;
      node = &node->at(t);
    } else if (node->is_array()) {
      size_t index;
      if (!ParseIndex(t, &index) || index >= node->as_array().size()) return nullptr;
      node = &node->as_array().at(index);
    } else {
      return nullptr;
    }
  }
  return node;
}

Status Add(value& root, const std::string& path, const value& v) {
  auto tokens = ParsePointer(path);
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty()) {
    root = v;
    return Status::Ok();
  }
  value* parent = Resolve(root, *tokens, tokens->size() - 1);
  if (parent == nullptr) return Missing(path);
  const std::string& last = tokens->back();
  if (parent->is_object()) {
    (*parent)[last] = v;
    return Status::Ok();
  }
  if (!parent->is_array()) return Missing(path);
  std::vector<value> items(parent->as_array().begin(), parent->as_array().end());
  size_t index = items.size();
  if (last != "-" && (!ParseIndex(last, &index) || index > items.size())) return Missing(path);
  items.insert(items.begin() + static_cast<std::ptrdiff_t>(index), v);
  *parent = value::array(std::move(items));
  return Status::Ok();
}

Status Remove(value& root, const std::string& path) {
  auto tokens = ParsePointer(path);
  if (!tokens.ok()) return tokens.status();
  if (tokens->empty()) return Status::FailedPrecondition("cannot remove the whole document");
  value* parent = Resolve(root, *tokens, tokens->size() - 1);
  if (parent == nullptr) return Missing(path);
  const std::string& last = tokens->back();
  if (parent->is_object() && parent->has_field(last)) {
    parent->erase(last);
    return Status::Ok();
  }
  size_t index;
  if (parent->is_array() && ParseIndex(last, &index) && index < parent->as_array().size()) {
    parent->erase(index);
    return Status::Ok();
  }
  return Missing(path);
}

Result<value> Get(value& root, const std::string& path) {
  auto tokens = ParsePointer(path);
  if (!tokens.ok()) return tokens.status();
  value* node = Resolve(root, *tokens, tokens->size());
  if (node == nullptr) return Missing(path);
  return *node;
}

Result<std::string> Field(const value& op, const char* key) {
  if (!op.has_field(key) || !op.at(key).is_string()) {
    return Status::InvalidArgument(std::string("a JSON patch operation needs a string \"") + key +
                                   "\"");
  }
  return op.at(key).as_string();
}

Status ApplyOne(value& doc, const value& op) {
  if (!op.is_object()) return Status::InvalidArgument("a JSON patch operation must be an object");
  auto name = Field(op, "op");
  if (!name.ok()) return name.status();
  auto path = Field(op, "path");
  if (!path.ok()) return path.status();
  const std::string& o = *name;
  if (o == "add" || o == "replace" || o == "test") {
    if (!op.has_field("value")) {
      return Status::InvalidArgument("JSON patch operation \"" + o + "\" needs a \"value\"");
    }
    const value& v = op.at("value");
    if (o == "add") return Add(doc, *path, v);
    auto current = Get(doc, *path);
    if (!current.ok()) return current.status();
    if (o == "test") {
      if (!JsonEqual(*current, v)) {
        return Status::FailedPrecondition("testing value " + *path + " failed");
      }
      return Status::Ok();
    }
    if (path->empty()) {
      doc = v;
      return Status::Ok();
    }
    SHOAL_RETURN_IF_ERROR(Remove(doc, *path));  // replace = remove + add at the same place
    return Add(doc, *path, v);
  }
  if (o == "remove") return Remove(doc, *path);
  if (o == "move" || o == "copy") {
    auto from = Field(op, "from");
    if (!from.ok()) return from.status();
    auto v = Get(doc, *from);
    if (!v.ok()) return v.status();
    if (o == "move") {
      if (path->rfind(*from + "/", 0) == 0) {
        return Status::FailedPrecondition("cannot move " + *from + " into its own child");
      }
      SHOAL_RETURN_IF_ERROR(Remove(doc, *from));
    }
    return Add(doc, *path, *v);
  }
  return Status::InvalidArgument("unknown JSON patch operation \"" + o + "\"");
}

}  // namespace

value ApplyMergePatch(const value& target, const value& patch) {
  if (!patch.is_object()) return patch;
  value out = target.is_object() ? target : value::object();
  for (const auto& [key, v] : patch.as_object()) {
    if (v.is_null()) {
      if (out.has_field(key)) out.erase(key);
    } else {
      out[key] = ApplyMergePatch(out.has_field(key) ? out.at(key) : value::null(), v);
    }
  }
  return out;
}

Result<value> ApplyJsonPatch(const value& target, const value& patch) {
  if (!patch.is_array()) return Status::InvalidArgument("a JSON patch must be an array");
  value doc = target;
  for (const auto& op : patch.as_array()) {
    SHOAL_RETURN_IF_ERROR(ApplyOne(doc, op));
  }
  return doc;
}

bool JsonEqual(const value& a, const value& b) {
  if (a.is_number() && b.is_number()) {
    const auto& x = a.as_number();
    const auto& y = b.as_number();
    if (x.is_int64() && y.is_int64()) return x.to_int64() == y.to_int64();
    if (x.is_uint64() && y.is_uint64()) return x.to_uint64() == y.to_uint64();
    return x.to_double() == y.to_double();
  }
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    const auto& x = a.as_object();
    const auto& y = b.as_object();
    if (x.size() != y.size()) return false;
    for (const auto& [key, v] : x) {
      auto it = y.find(key);
      if (it == y.end() || !JsonEqual(v, it->second)) return false;
    }
    return true;
  }
  if (a.is_array()) {
    const auto& x = a.as_array();
    const auto& y = b.as_array();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!JsonEqual(x.at(i), y.at(i))) return false;
    }
    return true;
  }
  return a == b;
}

}  // namespace shoal::testing
