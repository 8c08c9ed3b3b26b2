// The replication fetch's codecs (broker/replica_fetch.h): an answer read back as written, with
// the producer state a follower lacks; a follower of an earlier release (no "seeded" in its
// request) gets an SRF2 answer, which both releases read; bad answers are Corruption.
#include "broker/replica_fetch.h"

#include <gtest/gtest.h>

#include <string>

namespace shoal::broker {
namespace {

FetchBlock Block() {
  FetchBlock b;
  b.id = PartitionId(7);
  b.high_watermark = 40;
  b.log_end = 42;
  b.leader_epoch = Epoch(3);
  b.first = 40;
  b.count = 1;
  b.records = "rec";
  b.epochs = {{3, 0}};
  b.commits_incarnation = 9;
  b.commits_version = 2;
  b.commits = "commits";
  b.producers = "producers";
  return b;
}

std::string Answer(const FetchBlock& b, int version) {
  std::string body = StartFetchAnswer();
  AppendFetchBlock(b, body, version);
  FinishFetchAnswer(body, 1, version);
  return body;
}

TEST(ReplicaFetchTest, AnAnswerReadsBackWithTheInheritedProducerState) {
  auto blocks = ParseFetchAnswer(Answer(Block(), 3));
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 1u);
  const FetchBlock& b = blocks->front();
  EXPECT_EQ(b.id, PartitionId(7));
  EXPECT_EQ(b.records, "rec");
  EXPECT_EQ(b.commits, "commits");
  EXPECT_EQ(b.producers, "producers");
  EXPECT_EQ(b.epochs.size(), 1u);
}

TEST(ReplicaFetchTest, AFollowerOfAnEarlierReleaseGetsAnSrf2AnswerWithoutProducerState) {
  FetchRequest old_follower;
  old_follower.follower = "pod-1";
  old_follower.partitions.push_back({PartitionId(7), Epoch(3), 40, 3, 9, 2, false});
  std::string json = EncodeFetchRequest(old_follower);
  const std::string seeded = ",\"seeded\":false";
  json.erase(json.find(seeded), seeded.size());  // what an earlier release sends
  auto parsed = ParseFetchRequest(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->version, 2);
  EXPECT_EQ(ParseFetchRequest(EncodeFetchRequest(old_follower))->version, 3);

  const std::string body = Answer(Block(), 2);
  EXPECT_EQ(body.substr(0, 4), "SRF2");
  auto blocks = ParseFetchAnswer(body);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  EXPECT_EQ(blocks->front().commits, "commits");
  EXPECT_TRUE(blocks->front().producers.empty());
}

TEST(ReplicaFetchTest, AnAnswerCutShortOrWithAnUnknownHeaderIsCorruption) {
  const std::string body = Answer(Block(), 3);
  for (size_t cut : {size_t{3}, size_t{9}, body.size() - 1}) {
    EXPECT_EQ(ParseFetchAnswer(body.substr(0, cut)).status().code(), Status::Code::kCorruption)
        << cut;
  }
  std::string other = body;
  other[3] = '9';
  EXPECT_EQ(ParseFetchAnswer(other).status().code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace shoal::broker
