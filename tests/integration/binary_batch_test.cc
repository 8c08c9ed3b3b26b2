// The binary batch format (docs/data-plane.md "Binary batches") on real sidecar processes: opaque
// and JSON values produced in binary and in JSON, forwarded between two pods, read through a
// split's ranges from the other pod, and consumed by a binary group and a JSON group, each of
// which must see every event once, in order per key, with the value it was produced with. And
// every malformed batch refused with a reason, storing nothing.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "shoal/client/shoal_client.h"
#include "shoal/common/hash.h"
#include "shoal/common/wire.h"
#include "support/http_test_client.h"
#include "support/sidecar_cluster.h"
#include "support/test_events.h"
#include "support/wait_for.h"

namespace shoal::testing {
namespace {

using namespace std::chrono_literals;

const std::string kTopic = "orders";
const std::string kEvents = "/v1/topics/orders/events";

SidecarClusterOptions TwoPods() {
  SidecarClusterOptions o;
  o.binary = SidecarBinaryUnderTest(SHOAL_SIDECAR_BIN);
  o.pods = 2;
  o.partitions_per_pod = 2;
  o.topic = kTopic;
  o.fsync = "never";
  return o;
}

// Event i of key k: an opaque value with a zero byte and bytes that are not UTF-8 when i is
// even, a JSON object otherwise; the JSON text is what the sidecar keeps (minified when it came
// as JSON, as sent when it came flagged JSON in binary).
std::string ValueOf(const std::string& key, int i) {
  if (i % 2 == 0) return std::string("raw\0\xff\xfe", 6) + key + "#" + std::to_string(i);
  return "{\"k\":\"" + key + "\",\"i\":" + std::to_string(i) + "}";
}

struct Seen {
  std::map<std::string, std::vector<int>> by_key;  // the i of each event, in arrival order
};

// Reads `group` from every pod in `format` until `want` events arrived (or the deadline),
// committing each batch; checks each event's value against what was produced.
Seen ConsumeAll(SidecarCluster& c, const std::string& group, wire::Format format, size_t want) {
  Seen seen;
  size_t n = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::vector<std::unique_ptr<client::ShoalClient>> clients;
  for (size_t p = 0; p < c.size(); ++p) {
    clients.push_back(std::make_unique<client::ShoalClient>(c.pod(p).data_url(), kTopic));
    clients.back()->set_format(format);
  }
  while (n < want && std::chrono::steady_clock::now() < deadline) {
    for (auto& cl : clients) {
      auto events = cl->Consume(group, 50, 100);
      if (!events.ok()) {
        ADD_FAILURE() << events.status().ToString();
        return seen;
      }
      std::map<uint32_t, uint64_t> next;
      for (const auto& e : *events) {
        // The value names its key and index: check it is the one produced for them.
        std::string key = e.key;
        int i = -1;
        if (e.raw) {
          EXPECT_EQ(e.value.substr(0, 6), std::string("raw\0\xff\xfe", 6)) << e.key;
          i = std::stoi(e.value.substr(e.value.rfind('#') + 1));
        } else {
          const size_t at = e.value.find("\"i\":");
          if (at == std::string::npos) {
            ADD_FAILURE() << "not a value this test produced: " << e.value;
            return seen;
          }
          i = std::stoi(e.value.substr(at + 4));
        }
        EXPECT_EQ(e.value, ValueOf(key, i)) << "group " << group;
        EXPECT_EQ(e.raw, i % 2 == 0) << e.key << " " << i;
        seen.by_key[key].push_back(i);
        next[e.partition] = std::max(next[e.partition], e.offset + 1);
        ++n;
      }
      if (next.empty()) continue;
      std::vector<wire::CommitOffset> offsets;
      for (auto [p, o] : next) offsets.push_back({PartitionId(p), Offset(o)});
      auto st = cl->Commit(group, offsets);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
  }
  return seen;
}

TEST(BinaryBatchTest, OpaqueAndJsonValuesCrossBothFormatsTwoPodsAndASplitInOrder) {
  SidecarCluster c(TwoPods());
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  std::vector<std::string> keys;
  for (uint32_t p = 0; p < 4; ++p) {
    for (auto& k : KeysOf(c.current(), PartitionId(p), 3, "k" + std::to_string(p))) {
      keys.push_back(k);
    }
  }
  // Produced to pod-0 only: half the keys are pod-1's, forwarded (as binary: opaque values).
  client::ShoalClient binary(c.pod(0).data_url(), kTopic);
  binary.set_format(wire::Format::kBinary);
  client::ShoalClient json(c.pod(0).data_url(), kTopic);
  int next_i = 0;
  uint64_t seq = 0;
  size_t produced = 0;
  auto round = [&](int rounds) {
    for (int r = 0; r < rounds; ++r, ++next_i) {
      std::vector<client::OutgoingEvent> batch;
      for (const auto& k : keys) {
        client::OutgoingEvent e;
        e.key = k;
        e.value_json = ValueOf(k, next_i);
        e.raw = next_i % 2 == 0;
        e.producer = "bin-producer";
        e.seq = ++seq;
        batch.push_back(e);
      }
      // Opaque values go in binary (ShoalClient chooses so); JSON ones alternate between a
      // binary batch flagged JSON and a JSON batch.
      auto& cl = next_i % 4 == 1 ? json : binary;
      auto results = cl.Produce(batch);
      ASSERT_TRUE(results.ok()) << results.status().ToString() << "\n" << c.Describe();
      ASSERT_EQ(results->size(), batch.size());
      for (size_t k = 0; k < batch.size(); ++k) {
        EXPECT_FALSE((*results)[k].duplicate);
        EXPECT_EQ((*results)[k].partition, c.current().Route(KeyHash(batch[k].key)).id.value());
      }
      // The same batch again: every event a duplicate, at the same place (idempotence holds in
      // binary, and across the forward).
      auto again = cl.Produce(batch);
      ASSERT_TRUE(again.ok()) << again.status().ToString();
      for (size_t k = 0; k < batch.size(); ++k) {
        EXPECT_TRUE((*again)[k].duplicate) << batch[k].key;
        EXPECT_EQ((*again)[k].offset, (*results)[k].offset);
      }
      produced += batch.size();
    }
  };
  round(4);
  // A split of pod-1's partition 1, and one successor moved to pod-0: the consumers of pod-0
  // then read their range of p1 and of the sealed successor from pod-1 (range reads travel as
  // JSON between pods; a binary consumer gets them converted).
  const PartitionInfo p1 = *c.current().Find(PartitionId(1));
  auto split = c.current().Split(p1.id, p1.range.lo + p1.range.Width() / 2);
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_TRUE(c.Apply(*split).ok()) << c.Describe();
  round(2);
  std::optional<PartitionId> successor;
  for (const auto& p : c.current().partitions()) {
    if (p.active() && p.parents.size() == 1 && p.parents[0] == p1.id) successor = p.id;
  }
  ASSERT_TRUE(successor.has_value());
  auto moved = c.current().Move(*successor, SidecarCluster::Pod(0));
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  ASSERT_TRUE(c.Apply(*moved).ok()) << c.Describe();
  round(2);

  for (auto [group, format] :
       {std::pair{"bin", wire::Format::kBinary}, std::pair{"json", wire::Format::kJson}}) {
    SCOPED_TRACE(group);
    Seen seen = ConsumeAll(c, group, format, produced);
    size_t total = 0;
    for (const auto& k : keys) {
      const auto& got = seen.by_key[k];
      total += got.size();
      std::vector<int> want;
      for (int i = 0; i < next_i; ++i) want.push_back(i);
      EXPECT_EQ(got, want) << "key " << k << ": every event once, in the order produced";
    }
    EXPECT_EQ(total, produced);
  }
}

// A binary produce body by hand: events of (flags, key, producer, value, seq).
struct RawEvent {
  uint8_t flags;
  std::string key, producer, value;
  uint64_t seq = 0;
};
std::string Batch(const std::vector<RawEvent>& events, int64_t count = -1) {
  std::string out = "SHP1";
  auto put = [&out](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(static_cast<uint32_t>(count < 0 ? events.size() : static_cast<size_t>(count)));
  for (const auto& e : events) {
    put(e.flags);
    put(static_cast<uint16_t>(e.key.size()));
    put(static_cast<uint16_t>(e.producer.size()));
    put(static_cast<uint32_t>(e.value.size()));
    put(e.seq);
    out += e.key + e.producer + e.value;
  }
  return out;
}

TEST(BinaryBatchTest, MalformedBatchesAreRefusedWithAReasonAndStoreNothing) {
  SidecarClusterOptions o = TwoPods();
  o.pods = 1;
  SidecarCluster c(o);
  ASSERT_TRUE(c.Start().ok()) << c.Describe();
  auto http = c.pod(0).DataClient();
  HttpRequestOptions binary;
  binary.content_type = std::string(wire::kBinaryType);
  const RawEvent good{0, "k", "", "v"};
  std::string truncated = Batch({good, good});
  truncated.pop_back();
  std::string huge_count = Batch({good});
  const uint32_t billions = 4000000000u;
  std::memcpy(huge_count.data() + 4, &billions, 4);
  const std::vector<std::tuple<std::string, std::string, int, std::string>> cases = {
      {"no magic", "SHX1\x01\x00\x00\x00", 400, "SHP1"},
      {"empty", Batch({}), 400, "empty"},
      {"a count its bytes cannot hold", Batch({good}, 1000), 400, "cannot hold"},
      {"a count past the limit", huge_count, 413, "at most"},
      {"cut short", truncated, 400, "cut short"},
      {"bytes after the last event", Batch({good}) + "x", 400, "after its last event"},
      {"unknown flags", Batch({{8, "k", "", "v"}}), 400, "unknown flags"},
      {"an empty key", Batch({{0, "", "", "v"}}), 400, "empty key"},
      {"a key that is not UTF-8", Batch({good, {0, "\xff\xfe", "", "v"}}), 400, "event 1's key"},
      {"a producer without the seq flag", Batch({{0, "k", "p", "v"}}), 400, "seq flag"},
      {"the seq flag without a producer", Batch({{1, "k", "", "v", 3}}), 400, "seq flag"},
      {"JSON flag on what is not JSON", Batch({{2, "k", "", "{not json"}}), 400, "JSON"},
      {"JSON flag on two values", Batch({{2, "k", "", "1 2"}}), 400, "JSON"},
      {"a value over the limit", Batch({{0, "k", "", std::string((1 << 20) + 1, 'x')}}), 413,
       "limit"},
  };
  for (const auto& [what, body, code, reason] : cases) {
    SCOPED_TRACE(what);
    auto r = http->Post(kEvents, body, binary);
    EXPECT_EQ(r.status, code) << r.Describe();
    EXPECT_NE(r.body.find("\"error\""), std::string::npos) << r.Describe();
    EXPECT_NE(r.body.find(reason), std::string::npos) << r.Describe();
  }
  // Nothing of them stored: the first good batch takes offset 0, and a group reads only it.
  auto ok = http->Post(kEvents, Batch({good}), binary);
  ASSERT_TRUE(ok.ok()) << ok.Describe();
  EXPECT_NE(ok.body.find("\"offset\":0"), std::string::npos) << ok.body;
  auto read = http->Get(kEvents + "?group=g&max=100");
  ASSERT_TRUE(read.ok()) << read.Describe();
  auto events = wire::ParseConsumeResponse(read.body);
  ASSERT_TRUE(events.ok()) << read.body;
  ASSERT_EQ(events->size(), 1u) << read.body;
  EXPECT_TRUE((*events)[0].raw);
  EXPECT_EQ((*events)[0].value, "v");
  EXPECT_NE(read.body.find("\"value_b64\":\"dg==\""), std::string::npos) << read.body;
  // A binary answer, asked for by Accept, with the binary content type.
  HttpRequestOptions accept;
  accept.headers["Accept"] = "application/json, application/vnd.shoal.batch";
  HttpRequestOptions both = binary;
  both.headers = accept.headers;
  auto again = http->Post(kEvents, Batch({good}), both);
  ASSERT_TRUE(again.ok()) << again.Describe();
  auto results = wire::ParseBinaryProduceResponse(again.body);
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  ASSERT_EQ(results->size(), 1u);
  EXPECT_EQ((*results)[0].offset, 1u);
  EXPECT_NE(again.headers["Content-Type"].find("application/vnd.shoal.batch"), std::string::npos);
  auto bin = http->Get(kEvents + "?group=h&max=100", accept);
  ASSERT_TRUE(bin.ok()) << bin.Describe();
  auto decoded = wire::ParseBinaryConsumeResponse(bin.body);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  ASSERT_EQ(decoded->size(), 2u);
  EXPECT_EQ((*decoded)[1].offset, 1u);
  EXPECT_EQ((*decoded)[1].value, "v");
  // An empty binary answer is the magic alone, after its wait.
  auto empty = http->Get(kEvents + "?group=h&max=100&wait_ms=50", accept);
  ASSERT_TRUE(empty.ok()) << empty.Describe();
  EXPECT_EQ(empty.body, "SHC1");
}

// A consume that carries the commit of the batch before it (commit=P:O,...): one request per
// batch reads everything once and in order, also with three copies under acks quorum (the
// consume waits for the commit's quorum); a carried commit that is refused is the answer, and
// consumes nothing.
TEST(CarriedCommitTest, OneRequestPerBatchReadsEverythingOnceAndARefusedCommitConsumesNothing) {
  for (uint32_t copies : {1u, 3u}) {
    SCOPED_TRACE("copies " + std::to_string(copies));
    SidecarClusterOptions o = TwoPods();
    o.pods = copies == 3 ? 3 : 1;
    o.partitions_per_pod = 1;
    o.replication = copies;
    SidecarCluster c(o);
    ASSERT_TRUE(c.Start().ok()) << c.Describe();
    // Keys of pod-0's partition only: one sidecar serves them all.
    const auto keys = KeysOf(c.current(), PartitionId(0), 5, "c");
    client::ShoalClient cl(c.pod(0).data_url(), kTopic);
    std::vector<client::OutgoingEvent> batch;
    for (int i = 0; i < 60; ++i)
      batch.push_back({keys[i % 5], std::to_string(i), "", std::nullopt});
    ASSERT_TRUE(cl.Produce(batch).ok());

    auto http = c.pod(0).DataClient();
    // Refused carried commits: malformed, past the end; nothing consumed by either.
    for (const char* bad : {"x", "0:", "0:1,", "0:99999", "0:18446744073709551616"}) {
      auto r = http->Get(kEvents + "?group=g&max=10&commit=" + bad);
      EXPECT_EQ(r.status, 400) << bad << ": " << r.Describe();
      EXPECT_NE(r.body.find("\"reason\""), std::string::npos) << r.Describe();
    }
    std::vector<wire::CommitOffset> carried;
    std::vector<int> seen;
    int requests = 0;
    while (seen.size() < batch.size() && requests < 50) {
      auto events = cl.Consume("g", 7, 200, carried);
      ++requests;
      ASSERT_TRUE(events.ok()) << events.status().ToString();
      carried.clear();
      for (const auto& e : *events) {
        seen.push_back(std::stoi(e.value));
        carried = {{PartitionId(e.partition), Offset(e.offset + 1)}};
      }
    }
    std::vector<int> want;
    for (int i = 0; i < 60; ++i) want.push_back(i);
    EXPECT_EQ(seen, want)
        << "once each, in order, from offset 0 (the refused commits moved nothing)";
    EXPECT_LE(requests, 10) << "one request per batch of 7";
    // The last batch committed by a consume that finds nothing more.
    auto last = cl.Consume("g", 7, 0, carried);
    ASSERT_TRUE(last.ok()) << last.status().ToString();
    EXPECT_TRUE(last->empty());
    auto view = http->Get("/v1/topics/orders");
    ASSERT_TRUE(view.ok());
    EXPECT_NE(view.body.find("\"committed\":60"), std::string::npos) << view.body;
  }
}

}  // namespace
}  // namespace shoal::testing
