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
// In half the seeds (those without a coordinator that ignores the record) the topic is
// replicated (docs/replication.md): factor 3 (or 2) over 3 or 4 sidecars, acks quorum. Followers
// fetch from their leaders as an action of the schedule (Topic::FetchRound, the leader's
// ServeFetch called in place of the HTTP fetch; an answer may be lost, or arrive after other
// actions ran, a failover's fence among them); a producer is acknowledged only when the real
// sidecar would answer it (QuorumTracker::OnReached, on the simulated clock); one follower is
// slow. Beside crashes and pauses, a sidecar may be isolated from the coordinators (it still
// takes produces and serves its followers), a volume of a pod may be wiped, and the coordinators
// fail over partitions whose leader does not answer them as the control loop does, with the fence
// first: the failover is recorded (compare-and-set), a quorum of the followers is fenced at the
// new leader epoch (Topic::FenceCopies), the most complete becomes the leader
// (replication::ChooseLeader, PartitionMap::FailOver), the map is recorded and installed on the
// new leaders first; a pod that comes back gets the record's map. Checked then as well:
// invariant 9 (every acknowledgement of a replicated partition, at the moment the sidecar gives
// it, is of events a quorum of the copies holds in their files; every event handed to a group
// was held by a quorum), 10 (never two sidecars taking writes for one partition at one leader
// epoch, nor acknowledging them; after a failover every acknowledged event is on the new
// leader), 11 (every entry a copy cuts was unacknowledged and not its leader's own; where a copy
// and its leader hold an entry of one leader epoch at one offset, the logs are equal up to it;
// after the quiet phase every copy is its leader's log, byte for byte) and 6 over the final logs.
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
  // Replicated seeds: -1 as the seed decides (about half), 0 never, 1 always.
  int replicated = -1;
  // Replicated seeds whose changes place copies off one pod at a time (a pod that leaves, as a
  // scale-down drains it), so that copies are dropped from partitions that hold events and
  // added again empty (PartitionInfo::joined): 0 never (the default: the schedules other seeds
  // always ran), 1 always.
  int pods_leave = 0;
  // What replication does not cover yet: until groups' commits travel with the log, a group
  // resumes after a failover from what the new leader knows of it and gets again events it had
  // committed on the old leader; and a sealed partition whose leader's volume is emptied is
  // declared lost, copies or not. Off (the default) both are violations (invariant 4) like any
  // other; on, they are only counted (redelivered_after_failover, lost_with_copies) so that the
  // rest can be checked meanwhile.
  bool tolerate_known_gaps = false;
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
  // Replication (replicated seeds only).
  bool replicated = false;
  uint64_t failovers = 0;          // partitions failed over
  uint64_t live_leaders_replaced = 0;  // of them, whose old leader still ran (a zombie)
  uint64_t fetch_rounds = 0;       // followers' fetch rounds
  uint64_t cut_entries = 0;        // entries cut from copies whose tail left the leader's log
  uint64_t quorum_refusals = 0;    // produces answered unavailable: no quorum in time
  uint64_t isolations = 0;         // sidecars cut off from the coordinators
  uint64_t zombie_appends = 0;     // events taken by a leader a failover had replaced
  uint64_t redelivered_after_failover = 0;  // with tolerate_known_gaps
  uint64_t lost_with_copies = 0;   // partitions with copies declared lost (a sealed one's leader wiped)
  uint64_t copies_joined = 0;      // with pods_leave: copies added to partitions holding events
  bool ok() const { return violations.empty(); }
};

ScheduleResult RunSchedule(const ScheduleOptions& options);

}  // namespace shoal::sim
