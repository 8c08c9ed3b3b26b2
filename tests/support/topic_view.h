// TopicView: the parts of GET /v1/topics/{topic} that tests compare, and its parser, so every
// test reads the sidecar's topic view the same way.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "shoal/common/status.h"

namespace shoal::testing {

struct PartitionView {
  std::string state, owner;
  bool held = false;  // the sidecar holds the partition's log (counters present)
  uint64_t end_offset = 0;
  bool accepting = false;
  bool sealed_here = false;
  std::map<std::string, uint64_t> committed;  // per group
  bool operator==(const PartitionView&) const = default;
};
struct TopicView {
  uint64_t epoch = 0;
  std::map<uint32_t, PartitionView> partitions;
  bool operator==(const TopicView&) const = default;
};

inline std::ostream& operator<<(std::ostream& os, const TopicView& v) {
  os << "{epoch " << v.epoch;
  for (const auto& [id, p] : v.partitions) {
    os << "; p" << id << " " << p.state << " on " << p.owner;
    if (p.held) {
      os << " end=" << p.end_offset << " accepting=" << p.accepting
         << " sealed_here=" << p.sealed_here;
      for (const auto& [g, o] : p.committed) os << " " << g << "@" << o;
    }
  }
  return os << "}";
}

// Parses the body of GET /v1/topics/{topic}.
Result<TopicView> ParseTopicView(const std::string& body);

}  // namespace shoal::testing
