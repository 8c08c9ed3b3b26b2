// The consumer groups of a torture run. Each group has one consumer per sidecar and a role that
// decides how it reads, because each role breaks a different shortcut of the broker:
//   fast         reads as fast as events come;
//   slow         reads at a fraction of the produce rate while the load runs, so it is still
//                inside old parents when a change seals and retires their successors' siblings;
//   stop-resume  stops for a while in the middle and resumes with new consumers from its
//                commits, so it holds retirement back while it reads nothing;
//   late         first reads in the middle of the run: it must find every event acked after it
//                joined, and the lineage's order for what it finds.
// What a group saw is verified on its own (Verify), so one group's loss is never hidden by
// another's reads.
//
// Thread-safe: Start, Stop and SetRate come from the torture's scheduler, seen() from its drain
// loop.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "shoal/harness/verifier.h"
#include "shoal/harness/workload.h"

namespace shoal::cli {

class TortureGroup {
 public:
  TortureGroup(std::string name, std::string role, std::vector<std::string> targets)
      : name_(std::move(name)), role_(std::move(role)), targets_(std::move(targets)) {}
  ~TortureGroup() { Stop(); }
  TortureGroup(const TortureGroup&) = delete;
  TortureGroup& operator=(const TortureGroup&) = delete;

  const std::string& name() const { return name_; }
  const std::string& role() const { return role_; }

  // Starts one consumer per sidecar, reading at most `rate` events/s each (0: no limit).
  void Start(double rate);
  // Stops the consumers; each commits what it recorded (retried until accepted, up to a minute)
  // and what they saw is kept for Verify.
  void Stop();
  void SetRate(double rate);
  bool running() const;
  uint64_t seen() const;
  // When the group's first consume was answered (0: never): the sidecars know it from then on.
  uint64_t joined_ns() const;
  // The times Start was called.
  int instances() const;

  // Stops the group and verifies what it saw against `acked`; a late group is verified from its
  // joining.
  // `origin_ns` (CLOCK_MONOTONIC): the time the examples count from (harness::Verify).
  harness::VerifyReport Verify(const std::vector<harness::AckedEvent>& acked, uint64_t origin_ns);
  // Whether every consumer that stopped had its last commit accepted (else a redelivery of that
  // batch is expected and counted as duplicated).
  bool committed_all() const;

 private:
  const std::string name_, role_;
  const std::vector<std::string> targets_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<harness::GroupConsumer>> live_;  // guarded by mu_
  std::vector<harness::SeenEvent> seen_;                       // guarded by mu_: stopped ones'
  uint64_t stopped_seen_ = 0;                                 // guarded by mu_
  uint64_t joined_ns_ = 0;                                    // guarded by mu_
  int instances_ = 0;                                         // guarded by mu_
  bool committed_all_ = true;                                 // guarded by mu_
};

}  // namespace shoal::cli
