#include "support/fake_kube/rbac.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace shoal::testing {

namespace {

Result<std::vector<std::string>> StringList(const YAML::Node& rule, const char* key,
                                            bool required) {
  std::vector<std::string> out;
  const YAML::Node node = rule[key];
  if (!node) {
    if (required) return Status::InvalidArgument(std::string("a rule has no ") + key);
    return out;
  }
  if (!node.IsSequence()) return Status::InvalidArgument(std::string(key) + " must be a list");
  for (const auto& item : node) {
    if (!item.IsScalar()) {
      return Status::InvalidArgument(std::string(key) + " must list strings");
    }
    out.push_back(item.as<std::string>());
  }
  return out;
}

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// The authorizer's ResourceMatches: "*" matches everything, "*/sub" any resource's `sub`.
bool ResourceMatches(const PolicyRule& rule, const std::string& resource,
                     const std::string& subresource) {
  const std::string combined = subresource.empty() ? resource : resource + "/" + subresource;
  for (const auto& r : rule.resources) {
    if (r == "*" || r == combined) return true;
    if (!subresource.empty() && r == "*/" + subresource) return true;
  }
  return false;
}

}  // namespace

Result<std::vector<PolicyRule>> ParsePolicyRules(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("rules are not YAML: ") + e.what());
  }
  if (!root.IsMap() || !root["rules"] || !root["rules"].IsSequence()) {
    return Status::InvalidArgument("want a map with a `rules` list");
  }
  std::vector<PolicyRule> rules;
  for (const auto& node : root["rules"]) {
    if (!node.IsMap()) return Status::InvalidArgument("each rule must be a map");
    PolicyRule rule;
    auto groups = StringList(node, "apiGroups", true);
    if (!groups.ok()) return groups.status();
    auto resources = StringList(node, "resources", true);
    if (!resources.ok()) return resources.status();
    auto verbs = StringList(node, "verbs", true);
    if (!verbs.ok()) return verbs.status();
    auto names = StringList(node, "resourceNames", false);
    if (!names.ok()) return names.status();
    rule.api_groups = std::move(*groups);
    rule.resources = std::move(*resources);
    rule.verbs = std::move(*verbs);
    rule.resource_names = std::move(*names);
    rules.push_back(std::move(rule));
  }
  return rules;
}

Result<std::vector<PolicyRule>> LoadPolicyRules(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read RBAC rules " + path);
  std::stringstream text;
  text << in.rdbuf();
  auto rules = ParsePolicyRules(text.str());
  if (!rules.ok()) return rules.status().Annotate(path);
  return rules;
}

bool RulesAllow(const std::vector<PolicyRule>& rules, const ResourceAttributes& request) {
  for (const auto& rule : rules) {
    if (!Contains(rule.verbs, "*") && !Contains(rule.verbs, request.verb)) continue;
    if (!Contains(rule.api_groups, "*") && !Contains(rule.api_groups, request.group)) continue;
    if (!ResourceMatches(rule, request.resource, request.subresource)) continue;
    if (!rule.resource_names.empty() && !Contains(rule.resource_names, request.name)) continue;
    return true;
  }
  return false;
}

std::string ForbiddenReason(const std::string& user, const ResourceAttributes& request) {
  std::string resource = request.resource;
  if (!request.subresource.empty()) resource += "/" + request.subresource;
  std::string out = "User \"" + user + "\" cannot " + request.verb + " resource \"" + resource +
                    "\" in API group \"" + request.group + "\"";
  if (request.namespace_.empty()) return out + " at the cluster scope";
  return out + " in the namespace \"" + request.namespace_ + "\"";
}

std::string ForbiddenMessage(const std::string& user, const ResourceAttributes& request) {
  std::string qualified = request.resource;
  if (!request.group.empty()) qualified += "." + request.group;
  if (!request.name.empty()) qualified += " \"" + request.name + "\"";
  return qualified + " is forbidden: " + ForbiddenReason(user, request);
}

}  // namespace shoal::testing
