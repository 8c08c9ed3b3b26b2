// The deterministic simulation of the change protocol (issue 13; FoundationDB's way of testing a
// distributed protocol): the real Topic, Partition, storage, ChangeExecutor, MapChange and
// retirement rule, wired in one process through fakes instead of HTTP, disks and wall time:
//
//   - sidecars are Topics on an in-memory file system that knows what is durable
//     (support/sim/mem_file_system.h); a crash drops what was not synced, with torn tails;
//   - their peers and the coordinators' admin planes are function calls that can be lost on the
//     way there or back; a paused or crashed sidecar answers nothing;
//   - time is a ManualClock; every choice comes from one seeded generator, so a seed replays
//     exactly.
//
// A schedule runs producers (idempotent, retrying, some forwards lost half-way), consumer groups
// at different speeds (fast, slow, one that stops and resumes, one that appears late), keys
// skewed so that most ranges stay empty, and a coordinator that splits (empty ranges too),
// merges, moves and retires, crashes anywhere in a change and resumes it; beside it a second
// coordinator that competes for the same record (compare-and-set, as the operator's status is
// written) and may freeze mid-change and wake as a deposed one with its old change in memory.
// In a fifth of the seeds a third coordinator ignores the record altogether (the admin plane
// driven by hand): it can mint an epoch another map already has, which no sidecar can see, so
// for those seeds only the invariants the sidecars keep by themselves are checked: 1, 2 (no two
// writers, ever) and 3. Between any two requests of a change the other actions interleave,
// including the other coordinator's steps. After every action and every admin request it checks
// invariants 1, 2, 3, 5 and 6 of docs/guarantees.md (and 7 as events arrive),
// and at the end, after a quiet phase, 4, 7 and 8: every group saw every acknowledged event it
// could (a late group may start after partitions retired before it appeared), once, in per-key
// order, the change in progress completed and every pod holds the record's map.
//
// RunSchedule is deterministic and single-threaded; several may run in parallel threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace shoal::sim {

struct ScheduleOptions {
  uint64_t seed = 1;
  int steps = 250;       // actions of the random phase
  bool trace = false;    // keep every action in the result (for replaying a failing seed)
};

struct ScheduleResult {
  uint64_t seed = 0;
  std::vector<std::string> violations;  // empty: every invariant held
  std::vector<std::string> trace;       // with ScheduleOptions::trace, or the last actions
  // What the schedule did.
  uint64_t acked = 0;
  uint64_t abandoned = 0;          // sequence_unknown answers given up by producers
  uint64_t changes = 0;            // changes the coordinator completed
  uint64_t retired = 0;            // partitions retired
  uint64_t crashes = 0;            // sidecar crashes (power cuts)
  uint64_t wipes = 0;              // volumes emptied (their partitions declared lost)
  uint64_t coordinator_crashes = 0;
  uint64_t fenced = 0;             // stale_epoch / conflict answers to a coordinator
  uint64_t rogue_changes = 0;      // changes of the second coordinator that took effect
  uint64_t seen = 0;               // events delivered to groups
  uint64_t remote_read = 0;        // events read through a successor from a peer's ancestor
  bool hand_rogue = false;         // the seed had a coordinator that ignores the record
  bool ok() const { return violations.empty(); }
};

ScheduleResult RunSchedule(const ScheduleOptions& options);

}  // namespace shoal::sim
