#include "storage/record.h"

#include "shoal/common/hash.h"

namespace shoal::storage::record {

namespace {
template <typename T>
void Put(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T>
T Get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace

void Encode(const AppendEntry& e, uint64_t offset, std::string& out) {
  const size_t start = out.size();
  const size_t total = EncodedSize(e);
  out.resize(start + total);
  char* p = out.data() + start;
  const uint32_t payload_len = static_cast<uint32_t>(total - kFrameHeader);
  Put<uint32_t>(p, payload_len);
  char* pl = p + kFrameHeader;
  Put<uint64_t>(pl, offset);
  Put<int64_t>(pl + 8, e.timestamp_ms);
  Put<uint64_t>(pl + 16, e.seq.value_or(0));
  Put<uint16_t>(pl + 24, static_cast<uint16_t>(e.key.size()));
  Put<uint16_t>(pl + 26, static_cast<uint16_t>(e.producer.size()));
  Put<uint32_t>(pl + 28, static_cast<uint32_t>(e.value.size()));
  pl[32] = static_cast<char>((e.seq ? kHasSeq : 0) | (e.raw ? kRawValue : 0));
  pl[33] = pl[34] = pl[35] = 0;
  char* body = pl + kFixedPayload;
  std::memcpy(body, e.key.data(), e.key.size());
  body += e.key.size();
  std::memcpy(body, e.producer.data(), e.producer.size());
  body += e.producer.size();
  std::memcpy(body, e.value.data(), e.value.size());
  Put<uint32_t>(p + 4, Crc32(pl, payload_len));
}

DecodeResult Decode(const char* buf, size_t avail, RecordView* rec, size_t* size,
                    bool check_crc) {
  if (avail < kFrameHeader) return DecodeResult::kIncomplete;
  const uint32_t payload_len = Get<uint32_t>(buf);
  if (payload_len < kFixedPayload || payload_len > kMaxPayload) return DecodeResult::kCorrupt;
  if (avail < kFrameHeader + payload_len) return DecodeResult::kIncomplete;
  const char* pl = buf + kFrameHeader;
  if (check_crc && Get<uint32_t>(buf + 4) != Crc32(pl, payload_len)) return DecodeResult::kCorrupt;
  const uint16_t key_len = Get<uint16_t>(pl + 24);
  const uint16_t producer_len = Get<uint16_t>(pl + 26);
  const uint32_t value_len = Get<uint32_t>(pl + 28);
  if (size_t{key_len} + producer_len + value_len + kFixedPayload != payload_len) {
    return DecodeResult::kCorrupt;
  }
  rec->offset = Get<uint64_t>(pl);
  rec->timestamp_ms = Get<int64_t>(pl + 8);
  rec->raw = (pl[32] & kRawValue) != 0;
  if (pl[32] & kHasSeq) {
    rec->seq = Get<uint64_t>(pl + 16);
  } else {
    rec->seq.reset();
  }
  const char* body = pl + kFixedPayload;
  rec->key = std::string_view(body, key_len);
  rec->producer = std::string_view(body + key_len, producer_len);
  rec->value = std::string_view(body + key_len + producer_len, value_len);
  *size = kFrameHeader + payload_len;
  return DecodeResult::kOk;
}

}  // namespace shoal::storage::record
