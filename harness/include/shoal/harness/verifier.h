// The verifier: from what producers had acknowledged and what consumer groups saw, counts lost,
// reordered and duplicated events (invariants 4, 6 and 7). Pure functions; thread-safe.
//
// Events are identified by (producer, seq). Each event's value carries a per-(producer, key)
// counter n that grows in send order; a producer sends a key's next event only after the previous
// one was acknowledged, so n order is acknowledgement order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shoal/common/status.h"

namespace shoal::harness {

struct AckedEvent {
  std::string producer;
  std::string key;
  uint64_t seq = 0;
  uint64_t n = 0;
  uint64_t acked_ns = 0;  // CLOCK_MONOTONIC when the acknowledgement arrived (0: not known)
};

struct SeenEvent {
  std::string producer;
  std::string key;
  uint64_t seq = 0;
  uint64_t n = 0;
  uint64_t observed_ns = 0;  // CLOCK_MONOTONIC when the consumer took it: one order machine-wide
  uint32_t partition = 0;
  uint64_t offset = 0;
  // CLOCK_MONOTONIC when a commit covering it was accepted (0: never, or not tracked).
  uint64_t committed_ns = 0;
  // CLOCK_MONOTONIC when the consume that returned it was sent (0: not tracked): the sidecar
  // handed it out after that, and before observed_ns.
  uint64_t asked_ns = 0;
};

struct VerifyReport {
  uint64_t acked = 0;
  uint64_t seen = 0;
  uint64_t lost = 0;        // acked, never seen
  uint64_t reordered = 0;   // seen after a later event of the same (producer, key)
  uint64_t duplicated = 0;  // seen more than once
  // Of those, the sightings before which no commit of the earlier one was accepted: a batch
  // handed out again that the group had not committed (at-least-once, as after a failover moves
  // a partition away from the consumer holding a batch of it), not a committed event read again.
  uint64_t redelivered_uncommitted = 0;
  uint64_t unacked_seen = 0;  // appended but the producer never got the answer (allowed)
  // A group that joined late (Verify's joined_ns): acked events it never saw that were acked
  // before it joined and precede, per (producer, key), everything it saw. They were in partitions
  // retired before the group existed, as a new Kafka group finds only what is retained. Not lost.
  uint64_t before_join = 0;
  std::vector<std::string> examples;  // a few concrete violations, for the reader

  bool ok() const { return lost == 0 && reordered == 0 && duplicated == 0; }
  std::string ToJson() const;
  std::string ToText() const;
};

// `joined_ns` (CLOCK_MONOTONIC) > 0: the group's first request was answered then. An acked event
// it did not see is then lost only if it was acked after that, or a later event of its
// (producer, key) was seen; otherwise it counts in before_join. `origin_ns` > 0: the examples
// of events seen twice give the times of both sightings and of the first accepted commit that
// covered one, in seconds from it (a harness passes its start, the time its own log counts from).
VerifyReport Verify(const std::vector<AckedEvent>& acked, std::vector<SeenEvent> seen,
                    uint64_t joined_ns = 0, uint64_t origin_ns = 0);

// JSON lines: {"p":..,"k":..,"s":..,"n":..} per acked event; seen events add "t","part","off".
std::string AckedLine(const AckedEvent& e);
std::string SeenLine(const SeenEvent& e);
Result<std::vector<AckedEvent>> ReadAckedFile(const std::string& path);
Result<std::vector<SeenEvent>> ReadSeenFile(const std::string& path);
// Every seen file of a directory (one per consumer), read into one list; a missing directory
// holds none.
Result<std::vector<SeenEvent>> ReadSeenDir(const std::string& dir);
// Lines (events) in the seen files of a directory so far, for waiting until consumers caught up.
uint64_t CountSeenLines(const std::string& dir);

}  // namespace shoal::harness
