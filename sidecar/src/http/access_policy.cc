#include "http/access_policy.h"

#include <simdjson.h>

#include <fstream>
#include <sstream>

namespace shoal::http {

namespace {

// Whether `group` is one a grant names: the name itself, or a prefix ending in '*'.
bool Matches(const std::string& pattern, const std::string& group) {
  if (!pattern.empty() && pattern.back() == '*') {
    return group.compare(0, pattern.size() - 1, pattern, 0, pattern.size() - 1) == 0;
  }
  return pattern == group;
}

}  // namespace

Result<AccessPolicy> AccessPolicy::Parse(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) {
    return Status::InvalidArgument("the access file is not JSON");
  }
  simdjson::dom::object principals;
  if (doc["principals"].get(principals) != simdjson::SUCCESS) {
    return Status::InvalidArgument("the access file needs \"principals\": an object of names");
  }
  AccessPolicy policy;
  for (auto [name, value] : principals) {
    const std::string who(name);
    simdjson::dom::object grant;
    if (who.empty() || value.get(grant) != simdjson::SUCCESS) {
      return Status::InvalidArgument("principals." + who + ": expected an object");
    }
    Grant g;
    for (auto [field, v] : grant) {
      if (field == "produce") {
        if (v.get(g.produce) != simdjson::SUCCESS) {
          return Status::InvalidArgument("principals." + who + ".produce: expected true or false");
        }
      } else if (field == "groups") {
        simdjson::dom::array groups;
        if (v.get(groups) != simdjson::SUCCESS) {
          return Status::InvalidArgument("principals." + who + ".groups: expected a list");
        }
        for (auto item : groups) {
          std::string_view group;
          if (item.get(group) != simdjson::SUCCESS || group.empty()) {
            return Status::InvalidArgument("principals." + who +
                                           ".groups: expected group names (or prefixes ending "
                                           "in *)");
          }
          g.groups.emplace_back(group);
        }
      } else {
        return Status::InvalidArgument("principals." + who + "." + std::string(field) +
                                       ": unknown field (produce, groups)");
      }
    }
    policy.principals_[who] = std::move(g);
  }
  return policy;
}

Result<AccessPolicy> AccessPolicy::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot read the access file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto policy = Parse(text.str());
  if (!policy.ok()) return policy.status().Annotate(path);
  return policy;
}

const AccessPolicy::Grant* AccessPolicy::Find(const std::string& principal) const {
  auto it = principals_.find(principal);
  return it == principals_.end() ? nullptr : &it->second;
}

Status AccessPolicy::MayProduce(const std::string& principal) const {
  const Grant* g = Find(principal);
  if (g != nullptr && g->produce) return Status::Ok();
  return Status::PermissionDenied("\"" + principal + "\" may not produce to this topic");
}

Status AccessPolicy::MayUseGroup(const std::string& principal, const std::string& group) const {
  if (const Grant* g = Find(principal)) {
    for (const auto& pattern : g->groups) {
      if (Matches(pattern, group)) return Status::Ok();
    }
  }
  return Status::PermissionDenied("\"" + principal + "\" may not read or commit for group \"" +
                                  group + "\"");
}

Status AccessPolicy::MayView(const std::string& principal) const {
  if (Find(principal) != nullptr) return Status::Ok();
  return Status::PermissionDenied("\"" + principal + "\" has no grant on this topic");
}

}  // namespace shoal::http
