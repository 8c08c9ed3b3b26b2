#include "support/sidecar_cluster.h"

#include <cstdlib>

#include "shoal/common/replication.h"
#include "shoal/control/failover.h"

namespace shoal::testing {

namespace {
control::ChangeExecutor::Options ExecOptions(std::chrono::milliseconds step_timeout) {
  control::ChangeExecutor::Options o;
  o.step_timeout = step_timeout;
  return o;
}
std::string Address(uint16_t port) { return "127.0.0.1:" + std::to_string(port); }
}  // namespace

std::string SidecarBinaryUnderTest(const std::string& built) {
  const char* other = std::getenv("SHOAL_SIDECAR_BIN_UNDER_TEST");
  return other && *other ? std::string(other) : built;
}

SidecarCluster::SidecarCluster(SidecarClusterOptions options)
    : opts_(std::move(options)),
      admin_(opts_.token, opts_.admin_tls),
      executor_(admin_, ExecOptions(opts_.step_timeout)) {
  for (size_t i = 0; i < opts_.pods; ++i) {
    SidecarOptions o;
    o.binary = SidecarBinaryUnderTest(opts_.binary);
    o.topic = opts_.topic;
    o.fsync = opts_.fsync;
    o.admin_token = opts_.token;
    o.extra_args = {"--pod-name", Pod(i).value(), "--wait-for-map"};
    o.extra_args.insert(o.extra_args.end(), opts_.extra_args.begin(), opts_.extra_args.end());
    pods_.push_back(std::make_unique<SidecarProcess>(o));
  }
}

Status SidecarCluster::Start() {
  for (auto& p : pods_) {
    Status st = p->Start();
    if (!st.ok()) return st.Annotate(p->Describe());
  }
  std::vector<PartitionInfo> parts;
  const uint32_t count = static_cast<uint32_t>(opts_.partitions_per_pod * pods_.size());
  for (uint32_t i = 0; i < count; ++i) {
    PartitionInfo p;
    p.id = PartitionId(i);
    p.range = {kHashSpace * i / count, kHashSpace * (i + 1) / count};
    p.owner = Pod(i % pods_.size());
    // Made by the first map, as PartitionMap::Initial's: no copy of it joins it later
    // (replication::JoiningCopies).
    p.born = Epoch(1);
    parts.push_back(p);
  }
  PartitionMap map(opts_.topic, Epoch(1), parts);
  for (size_t i = 0; i < pods_.size(); ++i) {
    map = map.WithPeer(Pod(i), {Address(pods_[i]->port()), Address(pods_[i]->admin_port())});
  }
  if (opts_.replication > 1) {
    std::vector<PodName> pods;
    for (size_t i = 0; i < pods_.size(); ++i) pods.push_back(Pod(i));
    auto placed = replication::PlaceReplicas(map, pods, opts_.replication);
    if (!placed.ok()) return placed.status();
    map = std::move(placed).value();
  }
  SHOAL_RETURN_IF_ERROR(map.Validate());
  SHOAL_RETURN_IF_ERROR(executor_.InstallEverywhere(map));
  current_ = map;
  // As a coordinator does once each pod holds a map (control/failover.h).
  for (size_t i = 0; i < pods_.size(); ++i) {
    if (!control::RecordFirstVolume(admin_, Pod(i), admin_address(i), &first_volumes_)) {
      return Status::Unavailable("cannot learn the volume of " + Pod(i).value());
    }
  }
  return Status::Ok();
}

Status SidecarCluster::Apply(const PartitionMap& target, control::ChangeTiming* timing) {
  auto installed = executor_.Apply(current_, target, timing);
  if (!installed.ok()) return installed.status();
  current_ = std::move(installed).value();
  return Status::Ok();
}

std::string SidecarCluster::admin_address(size_t i) const {
  return Address(pods_.at(i)->admin_port());
}
std::string SidecarCluster::data_address(size_t i) const { return Address(pods_.at(i)->port()); }

std::string SidecarCluster::Describe(size_t lines) const {
  std::string out;
  for (const auto& p : pods_) out += p->Describe(lines) + "\n";
  return out;
}

}  // namespace shoal::testing
