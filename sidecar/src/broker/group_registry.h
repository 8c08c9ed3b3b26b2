// GroupRegistry: the consumer groups of the topic that this sidecar has seen, durable in the
// topic's directory (groups.json).
//
// Invariant 4 needs the topic's set of groups: a sealed partition is retired only once every
// group the topic knows consumed it, including a group that has not reached that partition yet
// and so left no commit there. That set is the union of every sidecar's registry: a group enters
// the registry of each sidecar it consumes from or commits to, before that first request is
// served, and leaves only when it is deleted (explicitly, or by the expiry the user sets).
// Retirement asks every sidecar of the map for its registry (Topic::InstallMap, and the
// coordinator's own rule), so a group seen anywhere holds retirement back everywhere.
//
// Activity times are kept in memory and written with the next Flush (the ticker), so a read does
// not cost a disk write; a new group is written at once. At most `max_groups` groups: input never
// decides how much memory the registry takes (a new group past it is refused, nothing changes).
// Thread-safe (one mutex). Owned by Topic.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "shoal/common/status.h"
#include "shoal/common/thread_annotations.h"
#include "storage/file_system.h"

namespace shoal::broker {

class GroupRegistry {
 public:
  struct Group {
    int64_t first_seen_ms = 0;
    int64_t last_active_ms = 0;
    bool operator==(const Group&) const = default;
  };

  // Loads `path` (absent: no groups yet) from `fs`, which outlives the registry.
  static Result<std::unique_ptr<GroupRegistry>> Open(std::string path, size_t max_groups,
                                                     storage::FileSystem& fs);

  // Records a request of `group` at `now_ms`; a group new here is written to disk before this
  // returns (so a restart cannot forget a group that was served). FailedPrecondition past
  // max_groups.
  Status Touch(const std::string& group, int64_t now_ms);
  // Records `group` as known to the leader of a copy this sidecar follows (its name is in the
  // leader's commit store, mirrored here), without a request of its own: so that a group seen
  // only by a pod whose volume is then lost still holds retirement back (the copies' pods know
  // it). Nothing for a group known already, or removed here (Remove) and not back since by a
  // request of its own (Touch); FailedPrecondition past max_groups (nothing changes).
  Status Learn(const std::string& group, int64_t now_ms);
  // Forgets `group` durably; whether it was known. Remembered as removed (the last max_groups
  // removed, in memory), so that Learn does not bring it back from a leader that has not
  // deleted it yet.
  Result<bool> Remove(const std::string& group);
  bool Contains(const std::string& group) const;
  std::map<std::string, Group> All() const;
  // Writes activity times that changed since the last write.
  Status Flush();

  // {"groups":{"G":{"first_seen_ms":..,"last_active_ms":..}}}: GET /v1/admin/groups.
  std::string ToJson() const;
  // The inverse, for peers' answers.
  static Result<std::map<std::string, Group>> ParseJson(std::string_view json);

 private:
  GroupRegistry(std::string path, size_t max_groups, storage::FileSystem& fs)
      : path_(std::move(path)), max_groups_(max_groups), fs_(fs) {}
  Status WriteLocked() const REQUIRES(mu_);
  std::string ToJsonLocked() const REQUIRES(mu_);

  const std::string path_;
  const size_t max_groups_;
  storage::FileSystem& fs_;
  mutable Mutex mu_;
  std::map<std::string, Group> groups_ GUARDED_BY(mu_);
  std::set<std::string> removed_ GUARDED_BY(mu_);
  std::deque<std::string> removed_order_ GUARDED_BY(mu_);  // oldest first, for the bound
  bool dirty_ GUARDED_BY(mu_) = false;
};

}  // namespace shoal::broker
