// Element types kbit reads and writes, with their safetensors names, and exact
// host-side fp16 / bf16 conversions (round to nearest even, like the CUDA
// intrinsics __float2half_rn and __float2bfloat16_rn).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kbit/hd.h"

namespace kbit {

enum class DType : uint8_t { f64, f32, f16, bf16, f8_e4m3, f8_e5m2, i64, i32, i16, i8, u64, u32, u16, u8, boolean };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);  // the safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);
// The dtypes kbit quantizes from and dequantizes to.
inline bool is_weight_float(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

KBIT_HD float half_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return detail::bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return detail::bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return detail::bits_float(sign);
  // subnormal half: mant * 2^-24, exact in float
  float v = float(mant) * 5.9604644775390625e-08f;
  return sign ? -v : v;
}

KBIT_HD uint16_t float_to_half_bits(float f) {
  uint32_t x = detail::float_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return uint16_t(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {                                      // below 2^-14: subnormal or zero
    if (x <= 0x33000000u) return sign;                        // <= 2^-25 rounds to zero (tie to even)
    const uint32_t e = x >> 23;
    const uint32_t m = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return uint16_t(sign | q);
  }
  uint32_t h = ((x >> 23) - 112u) << 10 | ((x & 0x7fffffu) >> 13);
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

KBIT_HD float bf16_bits_to_float(uint16_t b) { return detail::bits_float(uint32_t(b) << 16); }

KBIT_HD uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = detail::float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace kbit
