#include "broker/group_registry.h"

#include <simdjson.h>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"

namespace shoal::broker {

Result<std::unique_ptr<GroupRegistry>> GroupRegistry::Open(std::string path, size_t max_groups,
                                                           storage::FileSystem& fs) {
  std::unique_ptr<GroupRegistry> r(new GroupRegistry(std::move(path), max_groups, fs));
  std::string text;
  Status st = fs.ReadWholeFile(r->path_, &text);
  if (st.code() == Status::Code::kNotFound) return r;
  SHOAL_RETURN_IF_ERROR(st);
  auto groups = ParseJson(text);
  if (!groups.ok()) return groups.status().Annotate(r->path_);
  MutexLock lock(r->mu_);  // not shared yet; the lock is what the analysis checks
  r->groups_ = std::move(groups).value();
  return r;
}

Status GroupRegistry::Touch(const std::string& group, int64_t now_ms) {
  MutexLock lock(mu_);
  auto it = groups_.find(group);
  if (it != groups_.end()) {
    if (now_ms > it->second.last_active_ms) {
      it->second.last_active_ms = now_ms;
      dirty_ = true;
    }
    return Status::Ok();
  }
  if (groups_.size() >= max_groups_) {
    return Status::FailedPrecondition(
        "this topic already has " + std::to_string(groups_.size()) +
        " consumer groups (--max-groups); delete groups that are gone (shoal delete-group) "
        "before a new one can read");
  }
  groups_[group] = Group{now_ms, now_ms};
  removed_.erase(group);  // its own request: a group again (its place in removed_order_ stays)
  Status st = WriteLocked();
  if (!st.ok()) {
    groups_.erase(group);  // not durable: not known, and the request is refused
    return st.Annotate("registering consumer group " + group);
  }
  dirty_ = false;
  return Status::Ok();
}

Status GroupRegistry::Learn(const std::string& group, int64_t now_ms) {
  MutexLock lock(mu_);
  if (groups_.count(group) || removed_.count(group)) return Status::Ok();
  if (groups_.size() >= max_groups_) {
    return Status::FailedPrecondition("this topic already has " + std::to_string(groups_.size()) +
                                      " consumer groups (--max-groups); group " + group +
                                      ", known to a copy's leader, is not registered here");
  }
  groups_[group] = Group{now_ms, now_ms};
  Status st = WriteLocked();
  if (!st.ok()) {
    groups_.erase(group);
    return st.Annotate("registering consumer group " + group + " of a copy's leader");
  }
  dirty_ = false;
  return Status::Ok();
}

Result<bool> GroupRegistry::Remove(const std::string& group) {
  MutexLock lock(mu_);
  // Remembered as removed whether it was known or not: a copy's leader may still name it.
  if (removed_.insert(group).second) {
    removed_order_.push_back(group);
    while (removed_order_.size() > max_groups_) {
      removed_.erase(removed_order_.front());
      removed_order_.pop_front();
    }
  }
  auto it = groups_.find(group);
  if (it == groups_.end()) return false;
  const Group was = it->second;
  groups_.erase(it);
  Status st = WriteLocked();
  if (!st.ok()) {
    groups_[group] = was;
    return st;
  }
  dirty_ = false;
  return true;
}

bool GroupRegistry::Contains(const std::string& group) const {
  MutexLock lock(mu_);
  return groups_.count(group) > 0;
}

std::map<std::string, GroupRegistry::Group> GroupRegistry::All() const {
  MutexLock lock(mu_);
  return groups_;
}

Status GroupRegistry::Flush() {
  MutexLock lock(mu_);
  if (!dirty_) return Status::Ok();
  SHOAL_RETURN_IF_ERROR(WriteLocked());
  dirty_ = false;
  return Status::Ok();
}

std::string GroupRegistry::ToJson() const {
  MutexLock lock(mu_);
  return ToJsonLocked();
}

std::string GroupRegistry::ToJsonLocked() const {
  std::string out = "{\"groups\":{";
  bool first = true;
  for (const auto& [name, g] : groups_) {
    if (!first) out += ',';
    first = false;
    json::AppendString(out, name);
    out += ":{\"first_seen_ms\":";
    json::AppendInt(out, g.first_seen_ms);
    out += ",\"last_active_ms\":";
    json::AppendInt(out, g.last_active_ms);
    out += '}';
  }
  out += "}}";
  return out;
}

Status GroupRegistry::WriteLocked() const {
  return fs_.WriteFileAtomic(path_, ToJsonLocked());
}

Result<std::map<std::string, GroupRegistry::Group>> GroupRegistry::ParseJson(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::object groups;
  if (parser.parse(json.data(), json.size(), true).get(doc) || doc["groups"].get(groups)) {
    return Status::InvalidArgument("a group registry is {\"groups\":{name:{...}}}");
  }
  std::map<std::string, Group> out;
  for (auto field : groups) {
    Group g;
    if (field.value["first_seen_ms"].get(g.first_seen_ms) ||
        field.value["last_active_ms"].get(g.last_active_ms)) {
      return Status::InvalidArgument("a group needs first_seen_ms and last_active_ms");
    }
    SHOAL_RETURN_IF_ERROR(wire::ValidateGroup(field.key));
    out[std::string(field.key)] = g;
  }
  return out;
}

}  // namespace shoal::broker
