// Tests of the on-disk record format (sidecar/src/storage/record.{h,cc}).
#include "storage/record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace shoal::storage::record {
namespace {

std::string EncodeOne(const AppendEntry& e, uint64_t offset) {
  std::string out;
  Encode(e, offset, out);
  return out;
}

void ExpectRoundTrip(const AppendEntry& e, uint64_t offset) {
  const std::string bytes = EncodeOne(e, offset);
  ASSERT_EQ(bytes.size(), EncodedSize(e));
  RecordView rec;
  size_t size = 0;
  ASSERT_EQ(Decode(bytes.data(), bytes.size(), &rec, &size), DecodeResult::kOk);
  EXPECT_EQ(size, bytes.size());
  EXPECT_EQ(rec.offset, offset);
  EXPECT_EQ(rec.timestamp_ms, e.timestamp_ms);
  EXPECT_EQ(rec.key, e.key);
  EXPECT_EQ(rec.value, e.value);
  EXPECT_EQ(rec.producer, e.producer);
  EXPECT_EQ(rec.seq, e.seq);
}

TEST(RecordTest, RoundTripWithProducerAndSeq) {
  ExpectRoundTrip({"user_1", R"({"a":1})", "p1", 7, 1'700'000'000'123}, 42);
}

TEST(RecordTest, RoundTripEmptyProducerNoSeq) {
  ExpectRoundTrip({"k", "null", "", std::nullopt, 5}, 0);
}

TEST(RecordTest, RoundTripSeqZeroIsNotNoSeq) {
  // seq 0 is a real sequence number; only the flag tells it from "no seq".
  ExpectRoundTrip({"k", "v", "p", 0, 0}, 1);
  const std::string bytes = EncodeOne({"k", "v", "p", std::nullopt, 0}, 1);
  RecordView rec;
  size_t size = 0;
  ASSERT_EQ(Decode(bytes.data(), bytes.size(), &rec, &size), DecodeResult::kOk);
  EXPECT_FALSE(rec.seq.has_value());
}

TEST(RecordTest, RoundTripEmptyKeyAndValueAndExtremes) {
  ExpectRoundTrip({"", "", "", std::nullopt, -1}, UINT64_MAX);
  ExpectRoundTrip({"k", "v", "p", UINT64_MAX, INT64_MIN}, UINT64_MAX - 1);
}

TEST(RecordTest, RoundTripLargeValues) {
  const std::string key(65535, 'k');
  const std::string producer(1000, 'p');
  const std::string value(5u << 20, 'v');
  ExpectRoundTrip({key, value, producer, 123456789, 99}, 1ull << 40);
}

TEST(RecordTest, DecodesConsecutiveRecords) {
  std::string buf;
  Encode({"a", "1", "", std::nullopt, 1}, 10, buf);
  Encode({"bb", "22", "p", 3, 2}, 11, buf);
  RecordView rec;
  size_t size = 0;
  ASSERT_EQ(Decode(buf.data(), buf.size(), &rec, &size), DecodeResult::kOk);
  EXPECT_EQ(rec.key, "a");
  ASSERT_EQ(Decode(buf.data() + size, buf.size() - size, &rec, &size), DecodeResult::kOk);
  EXPECT_EQ(rec.key, "bb");
  EXPECT_EQ(rec.offset, 11u);
  EXPECT_EQ(rec.seq, std::optional<uint64_t>(3));
}

TEST(RecordTest, EveryTruncatedPrefixIsIncomplete) {
  const std::string bytes = EncodeOne({"user_123", "some value bytes", "prod", 9, 77}, 3);
  for (size_t len = 0; len < bytes.size(); ++len) {
    RecordView rec;
    size_t size = 0;
    EXPECT_EQ(Decode(bytes.data(), len, &rec, &size), DecodeResult::kIncomplete) << "len " << len;
  }
}

TEST(RecordTest, FlippedByteAnywhereIsCorrupt) {
  const std::string good = EncodeOne({"user_123", "some value bytes", "prod", 9, 77}, 3);
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string bad = good;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      RecordView rec;
      size_t size = 0;
      const DecodeResult r = Decode(bad.data(), bad.size(), &rec, &size);
      if (i < 4) {
        // A damaged length may claim more bytes than there are (kIncomplete, and nothing is read
        // past the buffer); once those bytes are there, the CRC must catch it.
        EXPECT_NE(r, DecodeResult::kOk) << "byte " << i << " mask " << int{mask};
        uint32_t claimed = 0;
        std::memcpy(&claimed, bad.data(), 4);
        if (claimed >= kFixedPayload && claimed <= kMaxPayload &&
            kFrameHeader + claimed > bad.size()) {
          bad.resize(kFrameHeader + claimed, '\0');
        }
        EXPECT_EQ(Decode(bad.data(), bad.size(), &rec, &size), DecodeResult::kCorrupt)
            << "byte " << i << " mask " << int{mask};
      } else {
        EXPECT_EQ(r, DecodeResult::kCorrupt) << "byte " << i << " mask " << int{mask};
      }
    }
  }
}

TEST(RecordTest, LengthOutOfBoundsIsCorrupt) {
  std::string bytes = EncodeOne({"k", "v", "", std::nullopt, 0}, 0);
  RecordView rec;
  size_t size = 0;
  uint32_t len = kFixedPayload - 1;
  std::memcpy(bytes.data(), &len, 4);
  EXPECT_EQ(Decode(bytes.data(), bytes.size(), &rec, &size), DecodeResult::kCorrupt);
  len = kMaxPayload + 1;
  std::memcpy(bytes.data(), &len, 4);
  EXPECT_EQ(Decode(bytes.data(), bytes.size(), &rec, &size), DecodeResult::kCorrupt);
}

TEST(RecordTest, ZeroFilledTailIsCorruptNotOk) {
  // A preallocated or zero-extended file tail must never decode as a record.
  const std::string zeros(kHeader * 2, '\0');
  RecordView rec;
  size_t size = 0;
  EXPECT_EQ(Decode(zeros.data(), zeros.size(), &rec, &size), DecodeResult::kCorrupt);
}

}  // namespace
}  // namespace shoal::storage::record
