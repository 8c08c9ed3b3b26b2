// The on-disk record format of a partition log (little-endian, as the host writes it):
//
//   u32 payload_len   bytes after this 8-byte frame header
//   u32 crc           zlib crc32 of the payload
//   payload:
//     u64 offset      the record's offset, checked on recovery and on read
//     i64 timestamp_ms
//     u64 seq         producer sequence number, meaningful when flags & kHasSeq
//                     (flags & kRawValue: the value is opaque bytes from a binary batch; without
//                     it the value is JSON text)
//     u16 key_len, u16 producer_len, u32 value_len, u8 flags, u8[3] reserved
//     key bytes, producer bytes, value bytes
//
// Functions only; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "shoal/common/status.h"
#include "storage/log.h"

namespace shoal::storage::record {

inline constexpr size_t kFrameHeader = 8;
inline constexpr size_t kFixedPayload = 36;
inline constexpr size_t kHeader = kFrameHeader + kFixedPayload;
inline constexpr uint8_t kHasSeq = 1;
inline constexpr uint8_t kRawValue = 2;
inline constexpr uint32_t kMaxPayload = 64u << 20;

inline size_t EncodedSize(const AppendEntry& e) {
  return kHeader + e.key.size() + e.producer.size() + e.value.size();
}

// Appends the encoded record to `out`.
void Encode(const AppendEntry& e, uint64_t offset, std::string& out);

enum class DecodeResult { kOk, kIncomplete, kCorrupt };

// Decodes the record at buf[0..avail). On kOk sets *size to the record's encoded size. Views in
// *rec point into buf. kIncomplete: need more bytes; kCorrupt: bad length or CRC. Without
// `check_crc` the CRC is not computed (for bytes whose reader checks it again: a follower's).
DecodeResult Decode(const char* buf, size_t avail, RecordView* rec, size_t* size,
                    bool check_crc = true);

}  // namespace shoal::storage::record
