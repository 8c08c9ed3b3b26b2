// A real sidecar on a small volume (a tmpfs mounted for the test) that fills to the last byte:
// produce is refused with the reserve's error (507, no_space) before the volume is full, and
// then with the volume full to the last byte by another writer; known groups still commit, a new
// group still registers and reads, a restart on the full volume comes up ready, retention frees
// what every group consumed, produce resumes, and every acknowledged event was read by both
// groups, each key's events in order.
//
// Mounting a tmpfs needs CAP_SYS_ADMIN (the suite runs as root on the project's machines); the
// test fails, naming that, where it cannot.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"
#include "support/temp_dir.h"

namespace shoal::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kTopic[] = "orders";
const std::string kEvents = std::string("/v1/topics/") + kTopic + "/events";
const std::string kCommits = std::string("/v1/topics/") + kTopic + "/commits";
constexpr uint64_t kVolume = 12 << 20;
constexpr uint64_t kReserve = 1 << 20;
constexpr int kKeys = 8;

// A tmpfs of `bytes` mounted on a fresh directory for the test's lifetime.
class Tmpfs {
 public:
  explicit Tmpfs(uint64_t bytes) {
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir_.path().c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      error_ = std::string("mounting a tmpfs on ") + dir_.path() + ": " + std::strerror(errno) +
               " (the test needs CAP_SYS_ADMIN: run the suite as root)";
    }
  }
  ~Tmpfs() {
    if (error_.empty()) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  const std::string& error() const { return error_; }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_{"shoal-disk-full"};
  std::string error_;
};

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

// Writes `path` until the volume is full to the last byte (down to single bytes).
void FillToTheLastByte(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  std::vector<char> chunk(64 << 10, 'x');
  for (size_t n = chunk.size(); n > 0;) {
    const ssize_t w = ::write(fd, chunk.data(), n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      ASSERT_EQ(errno, ENOSPC) << std::strerror(errno);
      n /= 2;
    }
  }
  ::close(fd);
}

std::string ProduceBody(uint64_t first, int count) {
  const std::string pad(900, 'p');
  std::string out = "{\"events\":[";
  for (int i = 0; i < count; ++i) {
    const uint64_t n = first + i;
    if (i) out += ',';
    out += "{\"key\":\"k" + std::to_string(n % kKeys) + "\",\"value\":{\"n\":" +
           std::to_string(n) + ",\"pad\":\"" + pad + "\"}}";
  }
  out += "]}";
  return out;
}

uint64_t NumberOf(const wire::ConsumedEvent& e) {
  const auto at = e.value.find("\"n\":");
  return at == std::string::npos ? UINT64_MAX : std::stoull(e.value.substr(at + 4));
}

// What one group read: each key's numbers in the order they came.
struct Reader {
  std::string group;
  std::map<std::string, std::vector<uint64_t>> by_key;
  size_t total = 0;
};

// Reads and commits until nothing more comes within a wait; returns how many events it read.
size_t DrainAndCommit(HttpTestClient& client, Reader& reader) {
  size_t got_now = 0;
  for (;;) {
    HttpResponse r = client.Get(kEvents + "?group=" + reader.group + "&max=500&wait_ms=300");
    EXPECT_EQ(r.status, 200) << r.Describe();
    if (r.status != 200) return got_now;
    auto events = wire::ParseConsumeResponse(r.body);
    EXPECT_TRUE(events.ok()) << r.body;
    if (!events.ok() || events->empty()) return got_now;
    std::map<uint32_t, uint64_t> next;
    for (const auto& e : *events) {
      reader.by_key[e.key].push_back(NumberOf(e));
      next[e.partition] = std::max(next[e.partition], e.offset + 1);
    }
    reader.total += events->size();
    got_now += events->size();
    std::string body = "{\"group\":\"" + reader.group + "\",\"offsets\":[";
    bool first = true;
    for (const auto& [p, o] : next) {
      if (!first) body += ',';
      first = false;
      body += "{\"partition\":" + std::to_string(p) + ",\"offset\":" + std::to_string(o) + "}";
    }
    body += "]}";
    HttpResponse c = client.Post(kCommits, body);
    EXPECT_EQ(c.status, 200) << "a commit on a full volume: " << c.Describe();
    if (c.status != 200) return got_now;
  }
}

TEST(DiskFullTest, AFullVolumeRefusesProduceOnlyAndRecoversWhenRetentionFreesSpace) {
  Tmpfs volume(kVolume);
  ASSERT_TRUE(volume.error().empty()) << volume.error();
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = kTopic;
  o.partitions = 2;
  o.fsync = "always";
  o.data_dir = volume.path() + "/data";
  // Retention holds whatever the groups committed, so the volume fills only while it keeps more
  // than the volume holds: here 64 MiB per partition on a 12 MiB volume.
  o.extra_args = {"--disk-reserve-bytes", std::to_string(kReserve), "--segment-bytes", "262144",
                  "--retention-bytes",    std::to_string(64 << 20)};
  std::filesystem::create_directories(o.data_dir);
  SidecarProcess sidecar(o);
  const Status started = sidecar.Start();
  ASSERT_TRUE(started.ok()) << started.ToString() << "\n" << sidecar.Describe();
  auto client = sidecar.DataClient();

  // A group that is known before the volume fills.
  Reader known;
  known.group = "known";
  DrainAndCommit(*client, known);

  // Produce until the reserve refuses it; everything before the refusal was acknowledged.
  uint64_t acked = 0;
  HttpResponse refused;
  for (int i = 0; i < 100000 && refused.status == 0; ++i) {
    HttpResponse r = client->Post(kEvents, ProduceBody(acked, 50));
    if (r.status == 200) {
      acked += 50;
    } else {
      refused = r;
    }
  }
  ASSERT_EQ(refused.status, 507) << refused.Describe();
  EXPECT_NE(refused.body.find("\"no_space\""), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("reserve of 1048576 bytes"), std::string::npos) << refused.body;
  EXPECT_GT(acked, 5000u) << "the volume held too few events";

  // Another writer takes the rest of the volume, to the last byte.
  FillToTheLastByte(volume.path() + "/filler");
  EXPECT_EQ(FreeBytes(volume.path()), 0u);
  HttpResponse again = client->Post(kEvents, ProduceBody(acked, 1));
  EXPECT_EQ(again.status, 507) << again.Describe();

  // A known group reads and commits; a new group registers and reads.
  DrainAndCommit(*client, known);
  EXPECT_EQ(known.total, acked);
  Reader late;
  late.group = "late";
  HttpResponse first_read = client->Get(kEvents + "?group=late&max=100&wait_ms=0");
  ASSERT_EQ(first_read.status, 200) << "a new group on a full volume: " << first_read.Describe();
  auto first_events = wire::ParseConsumeResponse(first_read.body);
  ASSERT_TRUE(first_events.ok());
  for (const auto& e : *first_events) late.by_key[e.key].push_back(NumberOf(e));
  late.total = first_events->size();
  // Nothing committed for these: they come again after the restart, and a commit at offset 0 of
  // each partition (nothing processed yet) goes in on the full volume.
  late.by_key.clear();
  late.total = 0;
  HttpResponse zero = client->Post(
      kCommits, "{\"group\":\"late\",\"offsets\":[{\"partition\":0,\"offset\":0},"
                "{\"partition\":1,\"offset\":0}]}");
  EXPECT_EQ(zero.status, 200) << "a commit on a full volume: " << zero.Describe();

  HttpResponse metrics = HttpTestClient(sidecar.metrics_url()).Get("/metrics");
  EXPECT_NE(metrics.body.find("shoal_disk_reserve_in_use{topic=\"orders\"} 1"), std::string::npos)
      << metrics.body.substr(0, 2000);

  // A restart on the full volume comes up.
  auto code = sidecar.Terminate();
  ASSERT_TRUE(code.ok()) << code.status().ToString() << sidecar.Describe();
  ASSERT_TRUE(sidecar.Restart().ok()) << "a restart on a full volume\n" << sidecar.Describe();
  client = sidecar.DataClient();
  DrainAndCommit(*client, late);
  EXPECT_EQ(late.total, acked);

  // Every group consumed everything. The operator lowers retention (a restart with the new
  // setting, on the full volume again): it frees old segments, the reserve is taken back and
  // produce resumes, with the filler still in place.
  code = sidecar.Terminate();
  ASSERT_TRUE(code.ok()) << code.status().ToString() << sidecar.Describe();
  sidecar.set_extra_args({"--disk-reserve-bytes", std::to_string(kReserve), "--segment-bytes",
                          "262144", "--retention-bytes", "262144"});
  ASSERT_TRUE(sidecar.Restart().ok()) << "a restart with lower retention\n" << sidecar.Describe();
  client = sidecar.DataClient();
  const auto deadline = SteadyClock::now() + std::chrono::seconds(30);
  HttpResponse resumed;
  while (SteadyClock::now() < deadline) {
    resumed = client->Post(kEvents, ProduceBody(acked, 50));
    if (resumed.status == 200) break;
    ASSERT_EQ(resumed.status, 507) << resumed.Describe();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // polling a condition
  }
  ASSERT_EQ(resumed.status, 200) << "produce did not resume: " << resumed.Describe() << "\nfree "
                                 << FreeBytes(volume.path()) << "\n" << sidecar.Describe();
  acked += 50;
  DrainAndCommit(*client, known);
  DrainAndCommit(*client, late);

  // Nothing acknowledged was lost, and each key's events came in order, to both groups.
  for (const Reader* r : {&known, &late}) {
    EXPECT_EQ(r->total, acked) << r->group;
    size_t seen = 0;
    for (const auto& [key, ns] : r->by_key) {
      seen += ns.size();
      for (size_t i = 1; i < ns.size(); ++i) {
        ASSERT_LT(ns[i - 1], ns[i]) << r->group << " read " << key << " out of order";
      }
    }
    EXPECT_EQ(seen, r->total);
  }
  EXPECT_EQ(known.by_key.size(), static_cast<size_t>(kKeys));
}

}  // namespace
}  // namespace shoal::testing
