// The kbit weight format, version 1 (spec: ../shared/spec/kbit-format.md).
//
// Everything here is the single definition of the format's arithmetic: E4M4
// scale bytes, the power-of-two tensor scale, the nearest-level index rule and
// bit-plane packing. The functions marked KBIT_HD are compiled into both the CPU
// reference and the CUDA kernels, so the two cannot drift apart.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kbit/hd.h"

namespace kbit {

inline constexpr int kBlockSize = 32;  // elements per block; one E4M4 byte each
inline constexpr int kMinBits = 2;
inline constexpr int kMaxBits = 5;
inline constexpr int kMaxLevels = 1 << kMaxBits;
inline constexpr int kFormatVersion = 1;

inline bool is_supported_bits(int k) { return k >= kMinBits && k <= kMaxBits; }
void require_supported_bits(int k);  // throws kbit::Error naming k

// ---------------------------------------------------------------- E4M4 scales
// byte = (E << 4) | m, bias 11: 0 -> 0; E == 0 -> m * 2^-14; else 2^(E-11) * (1 + m/16).
inline constexpr float kE4M4Max = 31.0f;

KBIT_HD float e4m4_decode(uint32_t code) {
  const uint32_t e = (code >> 4) & 0xfu, m = code & 0xfu;
  if (e == 0) return float(m) * 6.103515625e-05f;  // m * 2^-14, exact
  return detail::bits_float(((e - 11u + 127u) << 23) | (m << 19));
}

// Nearest E4M4 value, ties to the even code; >= 31 (and +inf) saturate to 0xFF.
// Exact: works on the float's bits, never on a rounded intermediate.
KBIT_HD uint8_t e4m4_encode(float v) {
  if (!(v > 0.0f)) return 0;  // zero, negatives and NaN map to 0 (callers pass |x|)
  if (v >= kE4M4Max) return 0xff;
  const uint32_t x = detail::float_bits(v);
  const int exp = int(x >> 23) - 127;                       // float subnormals give -127: far below range
  const uint32_t mant = (x & 0x7fffffu) | (x >> 23 ? 0x800000u : 0u);  // 24 bits with the implicit one
  const int e4 = exp + 11;
  if (e4 >= 1) {
    // keep 1 + 4 mantissa bits: drop 19, round half to even
    uint32_t q = mant >> 19;
    const uint32_t rem = mant & 0x7ffffu;
    if (rem > 0x40000u || (rem == 0x40000u && (q & 1u))) ++q;
    uint32_t e = uint32_t(e4);
    if (q == 32u) { q = 16u; ++e; }  // mantissa carried into the exponent
    if (e > 15u) return 0xff;
    return uint8_t((e << 4) | (q - 16u));
  }
  // subnormal E4M4: m = v * 2^14 = mant * 2^(exp + 14 - 23); the result m == 16 is code 0x10.
  const int shift = 9 - exp;  // >= 20
  if (shift >= 25) return 0;  // v < 2^-15 * (something < 1): below half of the smallest step
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return uint8_t(q);
}

// s = 2^ceil(log2(max_amax / 31)): the smallest power of two with 31 * s >= max_amax,
// computed exactly. s = 1 for an all-zero matrix; s is kept a normal float (>= 2^-126).
KBIT_HD float tensor_scale_for_amax(float max_amax) {
  if (!(max_amax > 0.0f)) return 1.0f;
  const uint32_t x = detail::float_bits(max_amax);
  int exp = int(x >> 23) - 127;
  uint32_t mant = x & 0x7fffffu;
  if ((x >> 23) == 0) {  // float subnormal: normalise
    exp = -126;
    while (!(mant & 0x800000u)) { mant <<= 1; --exp; }
    mant &= 0x7fffffu;
  }
  // max_amax = (1 + mant/2^23) * 2^exp = f * 2^(exp+1) with f in [0.5, 1);
  // 31 * 2^t >= f * 2^(exp+1)  <=>  t >= exp + 1 + log2(f/31); ceil is exp-4 when f <= 31/32, else exp-3.
  // f <= 31/32  <=>  1 + mant/2^23 <= 31/16  <=>  mant <= 15/16 * 2^23.
  int t = (mant <= 0x780000u) ? exp - 4 : exp - 3;
  if (t < -126) t = -126;
  return detail::bits_float(uint32_t(t + 127) << 23);
}

// The block scale a block is quantized and dequantized against: s * decode(e).
KBIT_HD float decoded_block_amax(float tensor_scale, uint32_t code) {
  return detail::mul_rn(tensor_scale, e4m4_decode(code));
}

// The E4M4 byte of a block with absmax `amax` under tensor scale s, given 1/s.
// amax * (1/s) equals the spec's amax / s: s is a power of two, so both are exact
// except when the quotient is a float subnormal, far below 2^-15, where both encode to 0.
KBIT_HD uint8_t block_scale_code(float amax, float inv_tensor_scale) {
  return e4m4_encode(detail::mul_rn(amax, inv_tensor_scale));
}

// What a block's elements are divided by before the index search: the decoded
// scale, or 1 when it decodes to 0 (spec: "Indices").
KBIT_HD float index_divisor(float tensor_scale, uint32_t code) {
  const float a = decoded_block_amax(tensor_scale, code);
  return a == 0.0f ? 1.0f : a;
}

// ---------------------------------------------------------------- index rule
// idx = argmin_i |u - cb[i]| with ties to the lowest index, for any codebook
// (unsorted, duplicates). NearestLevel answers it with a binary search over the
// sorted distinct levels plus an exact check of the neighbours; the plain scan
// is the definition (and the fallback in the rare exact-tie cases).
KBIT_HD uint32_t nearest_level_scan(const float* cb, int levels, float u) {
  uint32_t best = 0;
  float best_d = fabsf(detail::sub_rn(u, cb[0]));
  for (int i = 1; i < levels; ++i) {
    const float d = fabsf(detail::sub_rn(u, cb[i]));
    if (d < best_d) { best_d = d; best = uint32_t(i); }
  }
  return best;
}

struct NearestLevel {
  float sorted[kMaxLevels];            // distinct levels ascending, padded with +inf to 2^bits
  uint8_t first_index[kMaxLevels];     // lowest codebook index holding sorted[d]
  float codebook[kMaxLevels];          // the codebook as given, for the fallback scan
  int levels;                          // 2^bits
  int distinct;

  // |u - level| rounded as in the definition; +inf outside the table.
  KBIT_HD float distance(int d, float u) const {
    return (d < 0 || d >= distinct) ? detail::bits_float(0x7f800000u) : fabsf(detail::sub_rn(u, sorted[d]));
  }

  KBIT_HD uint32_t operator()(float u) const {
    // hi = number of levels < u (padding is +inf, never < a finite u)
    int hi = 0;
    for (int step = levels >> 1; step >= 1; step >>= 1)
      if (sorted[hi + step - 1] < u) hi += step;
    const int lo = hi - 1;
    const float d_lo = distance(lo, u), d_hi = distance(hi, u);
    const float d = d_lo < d_hi ? d_lo : d_hi;
    // The fl-distance is monotone on each side of u, so ties can only extend
    // outwards from lo and hi; a tie there is resolved by the definition itself.
    if (distance(lo - 1, u) == d || distance(hi + 1, u) == d) return nearest_level_scan(codebook, levels, u);
    if (d_lo == d_hi) return first_index[lo] < first_index[hi] ? first_index[lo] : first_index[hi];
    return d_lo < d_hi ? first_index[lo] : first_index[hi];
  }
};

// The fast form of the index rule used by both quantizers. For a block with
// E4M4 code c != 0 the spec's u = x / (s * e4m4(c)) satisfies |u| <= 1.5, and
// fl(x / (s*e4m4(c))) == fl((x/s) / e4m4(c)) because s is a power of two. For
// codebooks whose distinct levels are far apart compared with float rounding
// (all built-ins), the nearest level is then the count of per-code thresholds
// below y = x/s: thresholds[c][d] is the largest float y that the definition
// maps to sorted level <= d. They are found on the host by bisection with the
// same float arithmetic, so this path returns exactly what the definition does;
// everything else (code 0, codebooks with near-equal levels, x/s underflowing)
// takes the definition itself.
struct QuantizeRule {
  NearestLevel nearest;                // the definition, for the slow cases
  uint8_t first_index[kMaxLevels];     // codebook index of sorted distinct level d
  uint8_t bucket[128];                 // bucket b of u: sorted levels certainly below it (see below)
  int levels;                          // 2^k: row length of the threshold table
  int fast;                            // 1 when the threshold path is exact for this codebook
  int bucketed;                        // 1 when every bucket holds at most one uncertain threshold
  int identity;                        // 1 when first_index[d] == d (sorted, distinct codebooks)
};

// Bucket of an approximate u = y / e4m4(c), |u| <= 1.5: round(u * 32) + 64, as the low
// bits of a float whose magic offset (1.5 * 2^23 + 64) puts the rounded integer in the
// mantissa. 128 one-byte buckets fill exactly the 32 shared-memory banks, so a warp's
// lookups never conflict.
inline constexpr int kBuckets = 128;
inline constexpr float kBucketWidth = 1.0f / 32.0f;
KBIT_HD uint32_t u_bucket(float u_approx) {
  return detail::float_bits(fmaf(u_approx, 32.0f, 12582976.0f)) & uint32_t(kBuckets - 1);
}

// Fast path, for a block with code != 0 of a `fast` codebook and y = x / s exact.
// Bucketed: the approximate u picks a bucket whose start count is certain; one exact
// compare with the code's y-threshold settles the only threshold that may lie near u.
KBIT_HD uint32_t bucketed_position(const uint8_t* bucket, const float* code_thresholds, float y, float inv_dec) {
  const uint32_t pos = bucket[u_bucket(y * inv_dec)];
  return pos + (code_thresholds[pos] < y ? 1u : 0u);
}

template <int kLevels = 0>
KBIT_HD uint32_t quantize_index_fast(const QuantizeRule& rule, const float* code_thresholds, float y, float inv_dec) {
  int pos;
  if (rule.bucketed) {
    pos = int(bucketed_position(rule.bucket, code_thresholds, y, inv_dec));
  } else {
    pos = 0;
    const int levels = kLevels ? kLevels : rule.levels;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int step = levels >> 1; step >= 1; step >>= 1)
      if (code_thresholds[pos + step - 1] < y) pos += step;
  }
  return rule.identity ? uint32_t(pos) : rule.first_index[pos];
}

// The index of x in a block with E4M4 code `code` (divisor = index_divisor(s, code)).
// Precondition, true inside the quantizer: |x| <= the block's absmax, which encoded to `code`.
template <int kLevels = 0>
KBIT_HD uint32_t quantize_index(const QuantizeRule& rule, const float* code_thresholds, uint32_t code, float x,
                                float inv_tensor_scale, bool y_may_underflow, float divisor, float inv_dec) {
  if (rule.fast && code != 0) {
    const float y = detail::mul_rn(x, inv_tensor_scale);  // exact unless it underflows
    if (!(y_may_underflow && fabsf(y) < 1.17549435e-38f && x != 0.0f))
      return quantize_index_fast<kLevels>(rule, code_thresholds, y, inv_dec);
  }
  return rule.nearest(detail::div_rn(x, divisor));
}

// ---------------------------------------------------------------- codebooks
enum class CodebookKind : uint8_t { bnf, nf, custom };
struct QuantizeTables;

class Codebook {
 public:
  static Codebook bnf(int bits);                                  // Lloyd-Max for absmax-normalised Gaussian blocks
  static Codebook nf(int bits);                                   // Phi^-1((i + 0.5) / 2^k) / max|v|
  static Codebook custom(int bits, std::span<const float> values);  // exactly 2^bits finite values
  static Codebook named(const std::string& name, int bits);       // "bnf" or "nf"

  int bits() const { return bits_; }
  int levels() const { return 1 << bits_; }
  CodebookKind kind() const { return kind_; }
  std::string name() const;
  std::span<const float> values() const { return {values_.data(), size_t(levels())}; }
  float operator[](int i) const { return values_[size_t(i)]; }
  NearestLevel nearest_level() const;
  // The quantizer's tables for this codebook (built once per distinct codebook, cached).
  const QuantizeTables& quantize_tables() const;

  friend bool operator==(const Codebook& a, const Codebook& b) {
    return a.bits_ == b.bits_ && a.values_ == b.values_;
  }

 private:
  Codebook(int bits, CodebookKind kind) : bits_(bits), kind_(kind) { values_.fill(0.0f); }
  int bits_;
  CodebookKind kind_;
  std::array<float, kMaxLevels> values_;
};

// ---------------------------------------------------------------- bit planes
// A block's 32 indices become `bits` words: bit j of word t is bit t of idx_j.
KBIT_HD void pack_block(const uint8_t* idx, int bits, uint32_t* words) {
  for (int t = 0; t < bits; ++t) {
    uint32_t w = 0;
    for (int j = 0; j < kBlockSize; ++j) w |= uint32_t((idx[j] >> t) & 1u) << j;
    words[t] = w;
  }
}

KBIT_HD void unpack_block(const uint32_t* words, int bits, uint8_t* idx) {
  for (int j = 0; j < kBlockSize; ++j) {
    uint32_t v = 0;
    for (int t = 0; t < bits; ++t) v |= ((words[t] >> j) & 1u) << t;
    idx[j] = uint8_t(v);
  }
}

struct QuantizeTables {
  QuantizeRule rule;
  std::vector<float> thresholds;  // [256][levels]: row c holds the y thresholds of E4M4 code c
};

}  // namespace kbit
