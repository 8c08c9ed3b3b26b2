// Write path of a partition log: DiskLog::Append of batches of 1000 records with 100-byte values
// into a temporary directory (page cache; no fsync unless the benchmark says so), and
// record::Encode alone. Bytes are encoded record bytes, what reaches the segment file.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "storage/log.h"
#include "storage/record.h"

namespace shoal::storage {
namespace {

constexpr size_t kBatch = 1000;
constexpr size_t kValueBytes = 100;

// 1000 entries keyed like user_123456, with a 100-byte JSON string value; with_seq adds an
// idempotent-producer id and sequence number.
struct Batch {
  explicit Batch(bool with_seq) {
    keys.reserve(kBatch);
    for (size_t i = 0; i < kBatch; ++i) keys.push_back("user_" + std::to_string(100000 + i * 7));
    value = "\"" + std::string(kValueBytes - 2, 'x') + "\"";
    for (size_t i = 0; i < kBatch; ++i) {
      entries.push_back({keys[i], value, with_seq ? "producer-1" : "",
                         with_seq ? std::optional<uint64_t>(i) : std::nullopt, 1'700'000'000'000});
      bytes += record::EncodedSize(entries.back());
    }
  }
  std::vector<std::string> keys;
  std::string value;
  std::vector<AppendEntry> entries;
  size_t bytes = 0;
};

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/shoal-bench-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// state.range(0): 1 to fdatasync after every batch (fsync=always with one batch per ack).
void BM_DiskLogAppend(benchmark::State& state) {
  const bool sync = state.range(0) != 0;
  const Batch batch(false);
  TempDir dir;
  LogOptions options;
  options.dir = dir.path() + "/p0";
  auto log = OpenDiskLog(options);
  if (!log.ok()) {
    state.SkipWithError(log.status().ToString().c_str());
    return;
  }
  for (auto _ : state) {
    auto r = (*log)->Append(batch.entries);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    if (sync && !(*log)->Sync().ok()) {
      state.SkipWithError("sync failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch.bytes));
  state.counters["segments"] = static_cast<double>((*log)->segment_count());
}
BENCHMARK(BM_DiskLogAppend)->ArgName("fsync")->Arg(0)->Arg(1)->UseRealTime();

void BM_RecordEncode(benchmark::State& state) {
  const Batch batch(state.range(0) != 0);
  std::string out;
  out.reserve(batch.bytes);
  uint64_t offset = 0;
  for (auto _ : state) {
    out.clear();
    for (const auto& e : batch.entries) record::Encode(e, offset++, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(batch.bytes));
}
BENCHMARK(BM_RecordEncode)->ArgName("seq")->Arg(0)->Arg(1);

}  // namespace
}  // namespace shoal::storage

BENCHMARK_MAIN();
