// kill -9 of a real sidecar under --fsync always while four idempotent producers are sending, then
// a restart on the same data directory, three times over. What must hold (docs/design.md, "What it
// promises"):
//  - every acknowledged event is in the log exactly once, where its acknowledgement said;
//  - a batch that was in flight at the kill, resent with the same (producer, seq), is answered
//    `duplicate: true` for exactly the events that reached the log before the crash, and is
//    appended for the others;
//  - per (producer, key) a consumer sees the producer's counters in increasing order, with no gap
//    and no repeat.
#include <gtest/gtest.h>
#include <simdjson.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal/common/json.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/sidecar_process.h"
#include "support/topic_view.h"

namespace shoal::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr char kTopic[] = "orders";
const std::string kEvents = std::string("/v1/topics/") + kTopic + "/events";
const std::string kCommits = std::string("/v1/topics/") + kTopic + "/commits";
constexpr int kProducers = 4;
constexpr int kKeys = 64;
constexpr int kBatchSize = 50;
constexpr int kCycles = 3;
constexpr size_t kAcksPerCycle = 3000;

struct SentEvent {
  std::string key;
  uint64_t n = 0;  // the producer's counter for this key: 1, 2, 3, ...
  uint64_t seq = 0;
  std::string value;  // minified JSON, as the sidecar hands it back
};

struct Ack {
  uint32_t partition = 0;
  uint64_t offset = 0;
};

// One idempotent producer's whole history. Touched by its producer thread while a cycle runs and
// by the test's main thread between cycles (after the join), never by both at once.
struct Producer {
  std::string id;
  uint64_t next_seq = 0;
  std::array<uint64_t, kKeys> counters{};
  std::map<uint64_t, SentEvent> sent;              // by seq: everything ever put in a batch
  std::map<uint64_t, Ack> acked;                   // by seq: what the sidecar acknowledged
  std::optional<std::vector<uint64_t>> in_flight;  // seqs of a batch sent without an answer
  std::string stop_reason;

  std::vector<uint64_t> NextBatch() {
    std::vector<uint64_t> seqs;
    for (int i = 0; i < kBatchSize; ++i) {
      const uint64_t seq = next_seq++;
      // Keys cycle in a producer-specific order so that batches mix keys and partitions.
      const int k = static_cast<int>((seq * 7 + id.back() * 13) % kKeys);
      SentEvent e;
      e.key = "k" + std::to_string(k);
      e.n = ++counters[k];
      e.seq = seq;
      e.value = "{\"p\":";
      json::AppendString(e.value, id);
      e.value += ",\"k\":";
      json::AppendString(e.value, e.key);
      e.value += ",\"n\":" + std::to_string(e.n) + ",\"s\":" + std::to_string(seq) + "}";
      sent[seq] = std::move(e);
      seqs.push_back(seq);
    }
    return seqs;
  }

  std::string Body(const std::vector<uint64_t>& seqs) const {
    std::string out = "{\"events\":[";
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SentEvent& e = sent.at(seqs[i]);
      if (i) out += ',';
      out += "{\"key\":";
      json::AppendString(out, e.key);
      out += ",\"value\":" + e.value + ",\"producer\":";
      json::AppendString(out, id);
      out += ",\"seq\":" + std::to_string(e.seq) + "}";
    }
    return out + "]}";
  }
};

// Counts acknowledgements across producer threads so the main thread can wait on a number.
class AckCounter {
 public:
  void Add(size_t n) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      count_ += n;
    }
    cv_.notify_all();
  }
  // Waits until the count reaches `n` or a producer stopped; false past the deadline.
  bool WaitFor(size_t n, const std::atomic<int>& stopped, SteadyClock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [&] { return count_ >= n || stopped.load() > 0; }) &&
           count_ >= n;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }
  void Wake() { cv_.notify_all(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  size_t count_ = 0;
};

// Sends batches until the sidecar stops answering (the kill) or answers something unexpected.
void ProduceUntilError(Producer& p, const std::string& url, AckCounter& acks,
                       std::atomic<int>& stopped) {
  HttpTestClient client(url, std::chrono::seconds(15));
  while (true) {
    std::vector<uint64_t> seqs = p.NextBatch();
    p.in_flight = seqs;
    HttpResponse r = client.Post(kEvents, p.Body(seqs));
    if (r.status == 0) {
      p.stop_reason = r.error;  // the sidecar is gone: the batch's fate is unknown
      break;
    }
    if (r.status != 200) {
      ADD_FAILURE() << p.id << ": produce answered " << r.Describe();
      p.stop_reason = r.Describe();
      break;
    }
    auto results = wire::ParseProduceResponse(r.body);
    if (!results.ok() || results->size() != seqs.size()) {
      ADD_FAILURE() << p.id << ": bad produce answer " << r.Describe();
      p.stop_reason = "bad answer";
      break;
    }
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto& res = (*results)[i];
      EXPECT_FALSE(res.duplicate) << p.id << " seq " << seqs[i] << " is new, not a duplicate";
      p.acked[seqs[i]] = {res.partition, res.offset};
    }
    p.in_flight.reset();
    acks.Add(seqs.size());
  }
  stopped.fetch_add(1);
  acks.Wake();
}

struct PartitionEnds {
  std::map<uint32_t, uint64_t> end;
};

PartitionEnds Ends(HttpTestClient& client) {
  PartitionEnds out;
  HttpResponse r = client.Get(std::string("/v1/topics/") + kTopic);
  EXPECT_EQ(r.status, 200) << r.Describe();
  auto view = ParseTopicView(r.body);
  if (!view.ok()) {
    ADD_FAILURE() << "topic view: " << view.status().ToString();
    return out;
  }
  for (const auto& [id, p] : view->partitions) out.end[id] = p.end_offset;
  return out;
}

// Reads every partition to `ends` with a fresh group, committing after each answer. Checks that
// each partition comes in offset order with no gap and no repeat.
std::vector<wire::ConsumedEvent> ConsumeAll(HttpTestClient& client, const std::string& group,
                                            const PartitionEnds& ends) {
  std::vector<wire::ConsumedEvent> all;
  std::map<uint32_t, uint64_t> next;
  for (const auto& [p, e] : ends.end) next[p] = 0;
  auto done = [&] {
    for (const auto& [p, e] : ends.end) {
      if (next[p] < e) return false;
    }
    return true;
  };
  const auto deadline = SteadyClock::now() + std::chrono::seconds(40);
  while (!done()) {
    if (SteadyClock::now() > deadline) {
      ADD_FAILURE() << "consuming did not reach the end offsets in time; have " << all.size();
      break;
    }
    HttpResponse r = client.Get(kEvents + "?group=" + group + "&max=2000&wait_ms=200");
    if (r.status != 200) {
      ADD_FAILURE() << "consume: " << r.Describe();
      break;
    }
    auto got = wire::ParseConsumeResponse(r.body);
    if (!got.ok()) {
      ADD_FAILURE() << got.status().ToString();
      break;
    }
    if (got->empty()) continue;
    for (auto& e : *got) {
      EXPECT_EQ(e.offset, next[e.partition])
          << "partition " << e.partition << " handed out out of order, twice or with a gap";
      next[e.partition] = e.offset + 1;
      all.push_back(std::move(e));
    }
    std::string commit = "{\"group\":\"" + group + "\",\"offsets\":[";
    bool first = true;
    for (const auto& [p, o] : next) {
      if (o == 0) continue;
      commit += (first ? "" : ",") + std::string("{\"partition\":") + std::to_string(p) +
                ",\"offset\":" + std::to_string(o) + "}";
      first = false;
    }
    commit += "]}";
    HttpResponse c = client.Post(kCommits, commit);
    EXPECT_EQ(c.status, 200) << c.Describe();
  }
  return all;
}

class Kill9Test : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure() && sidecar_) std::fprintf(stderr, "%s\n", sidecar_->Describe(60).c_str());
  }
  std::unique_ptr<SidecarProcess> sidecar_;
};

TEST_F(Kill9Test, AcknowledgedEventsSurviveKill9ExactlyOnceAndInOrder) {
  SidecarOptions o;
  o.binary = SHOAL_SIDECAR_BIN;
  o.topic = kTopic;
  o.partitions = 4;
  o.fsync = "always";
  sidecar_ = std::make_unique<SidecarProcess>(o);
  ASSERT_TRUE(sidecar_->Start().ok()) << sidecar_->Describe();

  std::vector<Producer> producers(kProducers);
  for (int i = 0; i < kProducers; ++i) producers[i].id = "p" + std::to_string(i);

  for (int cycle = 1; cycle <= kCycles; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    // Produce until a few thousand acknowledgements, then kill -9 in the middle of the sending.
    AckCounter acks;
    std::atomic<int> stopped{0};
    std::vector<std::thread> threads;
    for (auto& p : producers) {
      threads.emplace_back(ProduceUntilError, std::ref(p), sidecar_->data_url(), std::ref(acks),
                           std::ref(stopped));
    }
    const bool reached =
        acks.WaitFor(kAcksPerCycle, stopped, SteadyClock::now() + std::chrono::seconds(45));
    const size_t acked_before_kill = acks.count();
    sidecar_->Kill9();  // producers notice it as a connection error and stop
    for (auto& t : threads) t.join();
    ASSERT_TRUE(reached) << "only " << acked_before_kill << " acks before the deadline or a "
                         << "producer stopped early";
    const size_t acked_this_cycle = acks.count();

    ASSERT_TRUE(sidecar_->Restart().ok()) << sidecar_->Describe();
    auto client = sidecar_->DataClient();
    const PartitionEnds at_restart = Ends(*client);

    // (a) Resend each producer's unanswered batch with the same (producer, seq).
    struct Resent {
      Producer* producer;
      uint64_t seq;
      bool duplicate;
    };
    std::vector<Resent> resent;
    size_t in_flight_batches = 0;
    for (auto& p : producers) {
      if (!p.in_flight) continue;
      ++in_flight_batches;
      const auto seqs = *p.in_flight;
      HttpResponse r = client->Post(kEvents, p.Body(seqs));
      ASSERT_EQ(r.status, 200) << p.id << " resend: " << r.Describe();
      auto results = wire::ParseProduceResponse(r.body);
      ASSERT_TRUE(results.ok() && results->size() == seqs.size()) << r.Describe();
      for (size_t i = 0; i < seqs.size(); ++i) {
        const auto& res = (*results)[i];
        // A duplicate points below the end the restart found; a fresh append at or past it.
        if (res.duplicate) {
          EXPECT_LT(res.offset, at_restart.end.at(res.partition)) << p.id << " seq " << seqs[i];
        } else {
          EXPECT_GE(res.offset, at_restart.end.at(res.partition)) << p.id << " seq " << seqs[i];
        }
        p.acked[seqs[i]] = {res.partition, res.offset};
        resent.push_back({&p, seqs[i], res.duplicate});
      }
      p.in_flight.reset();
    }

    // (b) Everything, from the start, with a fresh group.
    const PartitionEnds ends = Ends(*client);
    const auto consumed = ConsumeAll(*client, "verify-" + std::to_string(cycle), ends);
    size_t in_log = 0;
    for (const auto& [p, e] : ends.end) in_log += e;
    EXPECT_EQ(consumed.size(), in_log);

    std::map<std::string, Producer*> by_id;
    for (auto& p : producers) by_id[p.id] = &p;
    std::set<std::pair<std::string, uint64_t>> seen;  // (producer, seq)
    std::map<std::pair<std::string, uint64_t>, Ack> where;
    std::map<std::pair<std::string, std::string>, uint64_t> last_n;  // (producer, key) -> n
    size_t reordered = 0, gaps = 0, duplicated = 0, unknown = 0;
    for (const auto& e : consumed) {
      auto it = by_id.find(e.producer);
      if (it == by_id.end() || !e.seq || !it->second->sent.count(*e.seq)) {
        ++unknown;
        ADD_FAILURE() << "an event nobody sent: " << e.producer << " " << e.key;
        continue;
      }
      const SentEvent& s = it->second->sent.at(*e.seq);
      EXPECT_EQ(e.key, s.key);
      EXPECT_EQ(e.value, s.value);
      if (!seen.insert({e.producer, *e.seq}).second) {
        ++duplicated;
        ADD_FAILURE() << "appended twice: " << e.producer << " seq " << *e.seq;
      }
      where[{e.producer, *e.seq}] = {e.partition, e.offset};
      uint64_t& last = last_n[{e.producer, s.key}];
      if (s.n <= last) ++reordered;
      if (s.n > last + 1) ++gaps;
      last = std::max(last, s.n);
    }
    EXPECT_EQ(unknown, 0u);
    EXPECT_EQ(duplicated, 0u);
    EXPECT_EQ(reordered, 0u) << "per (producer, key) counters went backwards";
    EXPECT_EQ(gaps, 0u) << "per (producer, key) counters skipped a value";

    // Every acknowledged event is there, where its acknowledgement said; nothing else is.
    size_t acked_total = 0, missing = 0, misplaced = 0;
    for (const auto& p : producers) {
      acked_total += p.acked.size();
      for (const auto& [seq, ack] : p.acked) {
        auto w = where.find({p.id, seq});
        if (w == where.end()) {
          ++missing;
        } else if (w->second.partition != ack.partition || w->second.offset != ack.offset) {
          ++misplaced;
        }
      }
    }
    EXPECT_EQ(missing, 0u) << "acknowledged events lost";
    EXPECT_EQ(misplaced, 0u) << "acknowledged events not where the acknowledgement said";
    EXPECT_EQ(consumed.size(), acked_total) << "the log holds events nobody acknowledged";

    // (a), checked against the log: an in-flight event that reached the log before the crash
    // (below the end found at restart) was answered duplicate, and only those.
    size_t resent_dup = 0, resent_new = 0;
    for (const auto& r : resent) {
      auto w = where.find({r.producer->id, r.seq});
      if (w == where.end()) continue;  // already counted as missing
      const bool before_crash = w->second.offset < at_restart.end.at(w->second.partition);
      EXPECT_EQ(r.duplicate, before_crash) << r.producer->id << " seq " << r.seq;
      (r.duplicate ? resent_dup : resent_new)++;
    }

    std::printf(
        "cycle %d: acked %zu before kill -9 (%zu when it was sent); %zu batches in flight, "
        "resent: %zu duplicate (appended before the crash), %zu appended now; "
        "consumed %zu = acked %zu; lost %zu, duplicated %zu, reordered %zu\n",
        cycle, acked_this_cycle, acked_before_kill, in_flight_batches, resent_dup, resent_new,
        consumed.size(), acked_total, missing, duplicated, reordered);
    std::fflush(stdout);
    if (HasFailure()) return;
  }
  auto code = sidecar_->Terminate();
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace shoal::testing
