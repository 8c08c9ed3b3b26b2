#include "shoal/common/hash.h"

#include <immintrin.h>
#include <zlib.h>

namespace shoal {
namespace {

// CRC-32 by carry-less multiplication ("Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction", Intel 2009; the same scheme as Linux's crc32-pclmul and Chromium's
// zlib). Record checksums are stored on disk, so the result must equal zlib's crc32_z bit for bit;
// the unit test compares the two over many lengths, alignments and seeds.
//
// Everything is in zlib's bit-reflected domain of P = 0x104C11DB7 (0xEDB88320 reflected). The
// fold constants are x^n mod P for the n named, bit-reflected and shifted left by one, as the
// paper's reflected variant needs; P and mu are bit-reflected as 33-bit values.
constexpr uint64_t kFold512Lo = 0x154442bd4;  // x^(4*128+32) mod P: folds 64 bytes ahead
constexpr uint64_t kFold512Hi = 0x1c6e41596;  // x^(4*128-32) mod P
constexpr uint64_t kFold128Lo = 0x1751997d0;  // x^(128+32) mod P: folds 16 bytes ahead
constexpr uint64_t kFold128Hi = 0x0ccaa009e;  // x^(128-32) mod P
constexpr uint64_t kFold64 = 0x163cd6124;     // x^64 mod P: folds 96 bits down to 64
constexpr uint64_t kPoly = 0x1db710641;       // P
constexpr uint64_t kBarrettMu = 0x1f7011641;  // mu = floor(x^64 / P), for Barrett reduction

// pshufb indices for the last, partial block (FoldTail): 16 bytes from here + r move a register
// up by 16 - r bytes (an index with the top bit set gives a zero byte); with the top bits flipped
// they move it down by r bytes instead.
alignas(16) constexpr uint8_t kShiftTable[32] = {
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};

inline __m128i Load(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }

inline __m128i Constants(uint64_t lo, uint64_t hi) {
  return _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
}

// a.lo*k.lo XOR a.hi*k.hi: moves the 128 bits of `a` forward by the distance the constants in `k`
// encode, ready to be XORed into the data found there.
__attribute__((target("pclmul,sse4.1"))) inline __m128i Fold(__m128i a, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

// Takes in the last r (1..15) bytes of the input, which end at `end`, where at least 16 bytes of
// input precede `end`. The register `x` stands for the 16 bytes before those r; the 16 + r bytes
// are split as the first r bytes of x (folded 16 bytes ahead) and the last 16: the rest of x and
// the new bytes, which a load of the input's final 16 bytes holds.
__attribute__((target("pclmul,sse4.1"))) inline __m128i FoldTail(__m128i x,
                                                                 const unsigned char* end, size_t r,
                                                                 __m128i k128) {
  const __m128i up = Load(kShiftTable + r);
  const __m128i down = _mm_xor_si128(up, _mm_set1_epi8(static_cast<char>(0x80)));
  const __m128i head = _mm_shuffle_epi8(x, up);
  // Bytes where `down` has its top bit set (the last r) come from the input.
  const __m128i last = _mm_blendv_epi8(_mm_shuffle_epi8(x, down), Load(end - 16), down);
  return _mm_xor_si128(Fold(head, k128), last);
}

// The CRC of `size` (at least 16) bytes in zlib's internal form: `crc` and the result are the
// register itself, i.e. the complements of what crc32_z takes and returns.
__attribute__((target("pclmul,sse4.1"))) uint32_t Crc32Pclmul(const unsigned char* p, size_t size,
                                                              uint32_t crc) {
  const unsigned char* const end = p + size;
  const __m128i k128 = Constants(kFold128Lo, kFold128Hi);
  // The running CRC is XORed into the first bytes, which is what feeding it through the register
  // bit by bit does.
  const __m128i first = _mm_xor_si128(Load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x;
  if (size >= 64) {
    // Four independent accumulators hide the multiplier's latency, then fold into one.
    __m128i x0 = first;
    __m128i x1 = Load(p + 16);
    __m128i x2 = Load(p + 32);
    __m128i x3 = Load(p + 48);
    const __m128i k512 = Constants(kFold512Lo, kFold512Hi);
    for (p += 64, size -= 64; size >= 64; p += 64, size -= 64) {
      x0 = _mm_xor_si128(Fold(x0, k512), Load(p));
      x1 = _mm_xor_si128(Fold(x1, k512), Load(p + 16));
      x2 = _mm_xor_si128(Fold(x2, k512), Load(p + 32));
      x3 = _mm_xor_si128(Fold(x3, k512), Load(p + 48));
    }
    x = _mm_xor_si128(Fold(x0, k128), x1);
    x = _mm_xor_si128(Fold(x, k128), x2);
    x = _mm_xor_si128(Fold(x, k128), x3);
  } else {
    x = first;
    p += 16;
    size -= 16;
  }
  for (; size >= 16; p += 16, size -= 16) x = _mm_xor_si128(Fold(x, k128), Load(p));
  if (size > 0) x = FoldTail(x, end, size, k128);

  // 128 bits to 96: the low half times x^(128-32), XORed into the high half; then 96 to 64: the
  // low 32 bits times x^64, XORed into the rest. This keeps the bit alignment Barrett expects.
  const __m128i mask32 = _mm_setr_epi32(-1, 0, -1, 0);
  x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k128, 0x10));
  const __m128i k64 = Constants(kFold64, 0);
  x = _mm_xor_si128(_mm_srli_si128(x, 4),
                    _mm_clmulepi64_si128(_mm_and_si128(x, mask32), k64, 0x00));

  // Barrett reduction of the remaining 64 bits modulo P gives the 32-bit register.
  const __m128i poly = Constants(kPoly, kBarrettMu);
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), poly, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly, 0x00);
  return static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(x, t), 1));
}

// Below this zlib's byte-at-a-time loop is used: the folding needs one whole 16-byte block.
constexpr size_t kPclmulMinSize = 16;

bool HavePclmul() {
  static const bool have = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  }();
  return have;
}

}  // namespace

uint32_t KeyHash(std::string_view key) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(key.data()), static_cast<uInt>(key.size())));
}

uint32_t Crc32(const void* data, size_t size, uint32_t crc) {
  if (size >= kPclmulMinSize && HavePclmul()) {
    return ~Crc32Pclmul(static_cast<const unsigned char*>(data), size, ~crc);
  }
  return static_cast<uint32_t>(
      crc32_z(crc, static_cast<const Bytef*>(data), static_cast<z_size_t>(size)));
}

}  // namespace shoal
