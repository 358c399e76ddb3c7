// E4M4 scale bytes: all 256 codes, their rounding boundaries, carry, saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kbit/format.h"

namespace kbit {
namespace {

double decode_spec(int code) {  // the spec's definition, in double
  const int e = code >> 4, m = code & 15;
  if (code == 0) return 0;
  if (e == 0) return m * std::ldexp(1.0, -14);
  return std::ldexp(1.0, e - 11) * (1 + m / 16.0);
}

// Nearest code by exhaustive search, ties to the even code, >= 31 saturates.
int encode_reference(double v) {
  if (!(v > 0)) return 0;
  if (v >= 31) return 255;
  int best = 0;
  double best_d = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double d = std::fabs(v - decode_spec(c));
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c, best_d = d;
  }
  return best;
}

TEST(E4M4, DecodesEveryCodeExactlyAndIncreasing) {
  for (int c = 0; c < 256; ++c) {
    EXPECT_EQ(double(e4m4_decode(uint32_t(c))), decode_spec(c)) << c;
    if (c) EXPECT_GT(e4m4_decode(uint32_t(c)), e4m4_decode(uint32_t(c - 1))) << c;
    EXPECT_EQ(e4m4_encode(e4m4_decode(uint32_t(c))), c) << c;
  }
  EXPECT_EQ(e4m4_decode(0xff), 31.0f);
  EXPECT_EQ(e4m4_decode(0x01), std::ldexp(1.0f, -14));
  EXPECT_EQ(e4m4_decode(0x10), std::ldexp(1.0f, -10));
}

TEST(E4M4, RoundsToNearestWithTiesToEvenAtEveryBoundary) {
  for (int c = 0; c < 255; ++c) {
    const double a = decode_spec(c), b = decode_spec(c + 1);
    const float mid = float((a + b) / 2);  // exact in float
    ASSERT_EQ(double(mid), (a + b) / 2);
    const int even = (c % 2 == 0) ? c : c + 1;
    EXPECT_EQ(e4m4_encode(mid), even) << "tie between " << c << " and " << c + 1;
    EXPECT_EQ(e4m4_encode(std::nextafter(mid, 0.0f)), c);
    EXPECT_EQ(e4m4_encode(std::nextafter(mid, 100.0f)), c + 1);
  }
}

TEST(E4M4, MatchesExhaustiveReferenceOnRandomValues) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> exp(-20.0f, 6.0f);
  for (int i = 0; i < 200000; ++i) {
    const float v = std::exp2(exp(rng));
    ASSERT_EQ(e4m4_encode(v), encode_reference(v)) << v;
  }
}

TEST(E4M4, CarryAndSaturation) {
  // mantissa rounds up to 16: carries into the exponent
  EXPECT_EQ(e4m4_encode(1.999f), 0xc0);            // 2^(12-11) = 2.0
  EXPECT_EQ(e4m4_encode(15.75f), 0xf0);            // tie between 15.5 (0xef) and 16 (0xf0): even code
  EXPECT_EQ(e4m4_encode(31.0f), 0xff);
  EXPECT_EQ(e4m4_encode(30.5f), 0xfe);             // tie between 30 (0xfe) and 31 (0xff): even
  EXPECT_EQ(e4m4_encode(std::nextafter(30.5f, 31.0f)), 0xff);
  for (float v : {31.0001f, 31.5f, 32.0f, 33.0f, 64.0f, 1e30f, INFINITY}) {
    EXPECT_EQ(e4m4_encode(v), 0xff) << v;  // never wraps: the old bug decoded 32 as 16
    EXPECT_EQ(e4m4_decode(e4m4_encode(v)), 31.0f) << v;
  }
}

TEST(E4M4, SubnormalsAndZero) {
  const float step = std::ldexp(1.0f, -14);
  EXPECT_EQ(e4m4_encode(0.0f), 0);
  EXPECT_EQ(e4m4_encode(-1.0f), 0);
  EXPECT_EQ(e4m4_encode(NAN), 0);
  EXPECT_EQ(e4m4_encode(step / 2), 0);                        // tie between 0 and 1: even
  EXPECT_EQ(e4m4_encode(std::nextafter(step / 2, 1.0f)), 1);
  EXPECT_EQ(e4m4_encode(step * 1.5f), 2);                     // tie 1|2 -> 2
  EXPECT_EQ(e4m4_encode(step * 2.5f), 2);                     // tie 2|3 -> 2
  EXPECT_EQ(e4m4_encode(step * 15.5f), 0x10);                 // tie 15|16 -> 16 = 2^-10 (code 0x10)
  EXPECT_EQ(e4m4_encode(std::ldexp(1.0f, -149)), 0);          // float subnormal
}

TEST(TensorScale, SmallestPowerOfTwoCovering) {
  EXPECT_EQ(tensor_scale_for_amax(0.0f), 1.0f);
  EXPECT_EQ(tensor_scale_for_amax(31.0f), 1.0f);
  EXPECT_EQ(tensor_scale_for_amax(std::nextafter(31.0f, 99.0f)), 2.0f);
  EXPECT_EQ(tensor_scale_for_amax(15.5f), 0.5f);
  EXPECT_EQ(tensor_scale_for_amax(16.0f), 1.0f);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exp(-60.0f, 60.0f);
  for (int i = 0; i < 100000; ++i) {
    const float m = std::exp2(exp(rng));
    const float s = tensor_scale_for_amax(m);
    int e;
    ASSERT_EQ(std::frexp(s, &e), 0.5f);
    ASSERT_GE(31.0 * s, double(m)) << m;
    ASSERT_LT(31.0 * s / 2, double(m)) << m;
  }
  EXPECT_EQ(tensor_scale_for_amax(1e-40f), std::ldexp(1.0f, -126));  // clamped to a normal float
}

}  // namespace
}  // namespace kbit

namespace kbit {
namespace {
TEST(E4M4, BlockScaleCodeEqualsTheSpecsDivision) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> e(-150.0f, 130.0f);
  for (int i = 0; i < 300000; ++i) {
    const float amax = std::exp2(e(rng));
    for (float s : {1.0f, std::ldexp(1.0f, -126), std::ldexp(1.0f, -40), std::ldexp(1.0f, 60), tensor_scale_for_amax(amax)})
      ASSERT_EQ(block_scale_code(amax, 1.0f / s), e4m4_encode(amax / s)) << amax << " " << s;
  }
}
}  // namespace
}  // namespace kbit
