// Strong id types: a PartitionId is not an Epoch is not an Offset, even though all are integers.
//
// NamedType<T, Tag> wraps a value and gives it comparison and hashing, nothing else; arithmetic
// must be spelled out with .value(). Values: copyable, not synchronized.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace shoal {

template <typename T, typename Tag>
class NamedType {
 public:
  using value_type = T;
  constexpr NamedType() = default;
  constexpr explicit NamedType(T v) : v_(std::move(v)) {}
  constexpr const T& value() const { return v_; }
  constexpr auto operator<=>(const NamedType&) const = default;

 private:
  T v_{};
};

// Prints the bare value (test messages, diagnostics).
template <typename T, typename Tag>
std::ostream& operator<<(std::ostream& os, const NamedType<T, Tag>& v) {
  return os << v.value();
}

// A partition's id, unique within a topic for its whole life (successors get new ids).
using PartitionId = NamedType<uint32_t, struct PartitionIdTag>;
// A version of the partition map; every change makes epoch + 1.
using Epoch = NamedType<uint64_t, struct EpochTag>;
// A position in one partition's log: the first event has offset 0, offsets are dense.
using Offset = NamedType<uint64_t, struct OffsetTag>;
// The name of the pod (sidecar) that owns a partition.
using PodName = NamedType<std::string, struct PodNameTag>;

// "1, 3, 7": partition ids for messages and logs.
inline std::string JoinIds(const std::vector<PartitionId>& ids) {
  std::string out;
  for (PartitionId id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id.value());
  return out;
}

}  // namespace shoal

template <typename T, typename Tag>
struct std::hash<shoal::NamedType<T, Tag>> {
  size_t operator()(const shoal::NamedType<T, Tag>& v) const { return std::hash<T>{}(v.value()); }
};
