// The replication fetch between a follower and a leader (POST /v1/admin/replica/fetch; see
// docs/admin-api.md, "Replication"): the request a follower sends and the answer a leader gives,
// with their codecs. Values and functions only; thread-safe.
//
// A follower asks, for every partition it follows on one leader, for the records from its own
// end (which tells the leader what it holds: Kafka's fetch offset). The leader answers each
// partition with a block: its records from there as they are stored (storage/record.h), or a
// code that says why not. The answer is binary, little-endian:
//
//   "SRF3"  u32 block count
//   block:  u32 partition  u32 code  u64 high_watermark  u64 log_start  u64 log_end
//           u64 leader_epoch  u64 first  u32 records  u32 bytes  u32 epochs
//           u64 commits_incarnation  u64 commits_version  u32 commits_bytes  u32 producers_bytes
//           then `epochs` pairs (u64 epoch, u64 start), then `bytes` bytes of records, then
//           `commits_bytes` bytes of the leader's commit store (storage/commit_store.h records)
//           when commits_incarnation is not 0, then `producers_bytes` bytes of the producer
//           state the leader inherited (storage/producer_table.h)
//
// The groups' commits go with the log: the follower names the state of the leader's commit
// store it mirrors (incarnation, version), and the leader sends its whole state when that is
// not its own. So does a successor's inherited producer state: a follower that says it does not
// hold it yet (seeded false) gets it from a seeded leader, once.
//
// A follower of an earlier release names no "seeded" and reads "SRF2" answers: the same blocks
// without producers_bytes and the producer state. The leader answers it so, so that a rolling
// upgrade keeps replicating.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shoal/common/ids.h"
#include "shoal/common/replication.h"
#include "shoal/common/status.h"

namespace shoal::broker {

struct FetchPartition {
  PartitionId id;
  Epoch leader_epoch{0};  // the leader epoch the follower's map names
  uint64_t from = 0;      // the follower's end: it holds everything below
  uint64_t last_epoch = 0;  // the leader epoch of the follower's last record (0: none)
  uint64_t commits_incarnation = 0;  // the leader's commit store state the follower mirrors
  uint64_t commits_version = 0;      // (0, 0: none)
  bool seeded = false;  // the copy holds its leader's inherited producer state, durably
};

struct FetchRequest {
  std::string follower;  // the follower's pod
  int version = 3;       // of the answer: 3 ("SRF3"), or 2 for a follower that names no "seeded"
  int64_t wait_ms = 0;   // how long the leader may hold the answer while nothing is new
  size_t max_bytes = 1 << 20;
  std::vector<FetchPartition> partitions;
};

inline constexpr size_t kMaxFetchBytes = 16u << 20;
inline constexpr int64_t kMaxFetchWaitMs = 10000;
inline constexpr size_t kMaxFetchEpochs = 65536;

std::string EncodeFetchRequest(const FetchRequest& r);
// Bad input is InvalidArgument naming the field; max_bytes and wait_ms are capped at the limits
// above and partitions at kMaxMapPartitions.
Result<FetchRequest> ParseFetchRequest(std::string_view body);

// The coordinator's fence at a failover (POST /v1/admin/replica/fence):
// {"leader_epoch":N,"partitions":[id, ...]}; the answer is
// {"fenced":[{"id":N,"last_epoch":N,"end":N}, ...]} for the copies followed there.
struct FenceRequest {
  Epoch leader_epoch{0};
  std::vector<PartitionId> partitions;
};
Result<FenceRequest> ParseFenceRequest(std::string_view body);

enum class FetchCode : uint32_t {
  kOk = 0,
  kNotLeader = 1,    // this sidecar does not lead the partition in its map
  kFenced = 2,       // the leader epochs differ: leader_epoch says the leader's
  kNotFollower = 3,  // the leader's map does not name the asker among the partition's replicas
  kDiverged = 4,     // the follower's log left the leader's at log_end: cut it there
  kBehindStart = 5,  // the follower's end is below the leader's oldest record (log_start)
};
std::string_view ToString(FetchCode c);

struct FetchBlock {
  PartitionId id;
  FetchCode code = FetchCode::kOk;
  uint64_t high_watermark = 0;
  uint64_t log_start = 0;
  uint64_t log_end = 0;
  Epoch leader_epoch{0};
  uint64_t first = 0;   // offset of the first record in `records`
  uint32_t count = 0;   // records in `records`
  // Encoded as stored. A parsed answer's blocks view the answer's bytes (keep it while they
  // are used); a leader appends them straight into its answer (StartFetchBlock).
  std::string_view records;
  // The leader's epochs (Partition::epochs), for the follower's own record of them.
  std::vector<replication::EpochStart> epochs;
  // The leader's commit store, when the follower's mirror is not of this state (incarnation 0:
  // not sent).
  uint64_t commits_incarnation = 0;
  uint64_t commits_version = 0;
  std::string commits;
  // The producer state the leader inherited from the partition's parents, for a follower that
  // does not hold it (empty: not sent).
  std::string producers;
};

void AppendFetchBlock(const FetchBlock& b, std::string& out, int version = 3);
// The same in two steps, for a leader that appends the records to `out` itself in between (no
// copy of them): StartFetchBlock writes what comes before them; EndFetchBlock records `count`
// and the bytes appended since, and writes what follows them. b.records is not used.
struct FetchBlockMark {
  size_t counts_at = 0;   // where the record count and byte size are
  size_t records_at = 0;  // where the records begin
};
FetchBlockMark StartFetchBlock(const FetchBlock& b, std::string& out, int version);
void EndFetchBlock(const FetchBlock& b, std::string& out, int version, const FetchBlockMark& mark,
                   uint32_t count);
// The answer holding `blocks` already appended with AppendFetchBlock to `body` (after an empty
// 8-byte header that this fills in).
void FinishFetchAnswer(std::string& body, uint32_t blocks, int version = 3);
inline std::string StartFetchAnswer() { return std::string(8, '\0'); }
// Corruption for an answer cut short or with a block that does not fit. Reads SRF2 and SRF3.
Result<std::vector<FetchBlock>> ParseFetchAnswer(std::string_view body);

}  // namespace shoal::broker
