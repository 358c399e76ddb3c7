#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kbit/dtype.h"

namespace kbit {
namespace {

uint16_t reference_half(float f) {  // the compiler's IEEE conversion (round to nearest even)
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// bf16 by double arithmetic: keep 8 significant bits, ties to even.
uint16_t reference_bf16(float f) {
  if (f == 0.0f || std::isinf(f)) return uint16_t(detail::float_bits(f) >> 16);
  int e;
  const double m = std::frexp(double(f), &e);  // |m| in [0.5, 1)
  const double q = std::nearbyint(std::ldexp(m, 8));  // default rounding: to nearest even
  return uint16_t(detail::float_bits(float(std::ldexp(q, e - 8))) >> 16);
}

TEST(DType, Names) {
  EXPECT_EQ(dtype_name(DType::bf16), "BF16");
  EXPECT_EQ(dtype_from_name("F16"), DType::f16);
  EXPECT_EQ(dtype_size(DType::f64), 8u);
  EXPECT_FALSE(dtype_from_name("F17").has_value());
}

TEST(DType, HalfRoundTripsEveryCode) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half_bits(f), h) << std::hex << h;
    EXPECT_EQ(reference_half(f), h);
  }
}

TEST(DType, FloatToHalfMatchesIeee) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    float f = detail::bits_float(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), reference_half(f)) << f;
  }
  // Midpoints between neighbouring halves (ties) and just beside them.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double a = half_bits_to_float(uint16_t(h)), b = half_bits_to_float(uint16_t(h + 1));
    const float mid = float((a + b) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)})
      ASSERT_EQ(float_to_half_bits(f), reference_half(f)) << std::hex << h;
  }
}

TEST(DType, FloatToBf16MatchesReference) {
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) {
    const float f = detail::bits_float(rng());
    if (std::isnan(f) || std::fabs(f) > 3.38e38f || std::fabs(f) < 1.2e-38f) continue;  // reference: normals only
    ASSERT_EQ(float_to_bf16_bits(f), reference_bf16(f)) << f;
  }
  EXPECT_EQ(float_to_bf16_bits(1.0f + 1.0f / 256), 0x3f80);  // tie to even (down)
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3.0f / 256), 0x3f82);  // tie to even (up)
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
}

}  // namespace
}  // namespace kbit
