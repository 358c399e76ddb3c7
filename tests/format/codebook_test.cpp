// Codebooks and the nearest-level rule.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kbit/error.h"
#include "kbit/format.h"

namespace kbit {
namespace {

TEST(Codebook, BnfIsTheSpecTableMirrored) {
  const Codebook cb = Codebook::bnf(2);
  ASSERT_EQ(cb.levels(), 4);
  EXPECT_EQ(cb[0], -0.6642f);
  EXPECT_EQ(cb[1], -0.1964f);
  EXPECT_EQ(cb[2], 0.1964f);
  EXPECT_EQ(cb[3], 0.6642f);
  for (int k = 2; k <= 5; ++k) {
    const Codebook c = Codebook::bnf(k);
    for (int i = 0; i < c.levels(); ++i) {
      EXPECT_EQ(c[i], -c[c.levels() - 1 - i]);
      if (i) EXPECT_LT(c[i - 1], c[i]);
    }
  }
  EXPECT_EQ(Codebook::bnf(5)[31], 0.9920f);
  EXPECT_EQ(Codebook::bnf(4)[8], 0.0499f);
}

TEST(Codebook, NfIsNormalQuantilesScaledToUnit) {
  for (int k = 2; k <= 5; ++k) {
    const Codebook c = Codebook::nf(k);
    EXPECT_EQ(c[0], -1.0f);
    EXPECT_EQ(c[c.levels() - 1], 1.0f);
    for (int i = 0; i < c.levels(); ++i) {
      EXPECT_NEAR(c[i], -c[c.levels() - 1 - i], 1e-6);
      EXPECT_NE(c[i], 0.0f);  // no zero level
    }
  }
  // k = 2: Phi^-1(1/8) / Phi^-1(7/8) = 0.3186394 / 1.1503494
  EXPECT_NEAR(Codebook::nf(2)[2], 0.318639 / 1.150349, 1e-6);
}

TEST(Codebook, CustomValidation) {
  const float ok[4] = {0.3f, -1.0f, 0.3f, 1.0f};
  EXPECT_EQ(Codebook::custom(2, ok)[1], -1.0f);
  EXPECT_THROW(Codebook::custom(3, ok), Error);
  const float bad[4] = {0.0f, NAN, 1.0f, 2.0f};
  EXPECT_THROW(Codebook::custom(2, bad), Error);
  EXPECT_THROW(Codebook::bnf(6), Error);
  EXPECT_THROW(Codebook::nf(1), Error);
  EXPECT_THROW(Codebook::named("nf4", 4), Error);
  try {
    Codebook::bnf(7);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k=7"), std::string::npos);
  }
}

// The fast search must equal the definition (scan, ties to the lowest index) on
// any codebook: built-in, unsorted, with duplicates, with levels one ulp apart.
void expect_search_matches_scan(const Codebook& cb, uint64_t seed) {
  const NearestLevel table = cb.nearest_level();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> probes;
  for (int i = 0; i < 20000; ++i) probes.push_back(u(rng));
  for (int i = 0; i < cb.levels(); ++i) {
    for (int j = 0; j < cb.levels(); ++j) {
      const float mid = (cb[i] + cb[j]) / 2;
      probes.insert(probes.end(), {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)});
    }
    probes.insert(probes.end(), {cb[i], std::nextafter(cb[i], -2.0f), std::nextafter(cb[i], 2.0f)});
  }
  probes.insert(probes.end(), {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f});
  for (float p : probes)
    ASSERT_EQ(table(p), nearest_level_scan(cb.values().data(), cb.levels(), p)) << "u=" << p << " seed " << seed;
}

TEST(NearestLevel, MatchesTheDefinitionOnBuiltIns) {
  for (int k = 2; k <= 5; ++k) {
    expect_search_matches_scan(Codebook::bnf(k), uint64_t(k));
    expect_search_matches_scan(Codebook::nf(k), uint64_t(k + 10));
  }
}

TEST(NearestLevel, MatchesTheDefinitionOnAdversarialCodebooks) {
  std::mt19937_64 rng(99);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int trial = 0; trial < 300; ++trial) {
    const int k = 2 + trial % 4;
    std::vector<float> v(size_t(1) << k);
    for (auto& x : v) x = u(rng);
    if (trial % 3 == 0) v[1] = v[0];                          // duplicates
    if (trial % 5 == 0) v[2] = std::nextafter(v[3], 2.0f);    // one ulp apart
    if (trial % 7 == 0) v[0] = -v[1];                         // symmetric pair
    if (trial % 11 == 0) std::fill(v.begin(), v.end(), 0.25f);  // all the same
    expect_search_matches_scan(Codebook::custom(k, v), uint64_t(trial));
  }
}

TEST(NearestLevel, TiesGoToTheLowestIndex) {
  const float v[4] = {0.5f, -0.5f, 0.5f, -0.5f};
  const Codebook cb = Codebook::custom(2, v);
  EXPECT_EQ(cb.nearest_level()(0.0f), 0u);  // all four at distance 0.5
  EXPECT_EQ(cb.nearest_level()(-0.4f), 1u);
  EXPECT_EQ(cb.nearest_level()(0.4f), 0u);
}

}  // namespace
}  // namespace kbit

namespace kbit {
namespace {

// The quantizer's threshold path must return exactly what the definition does,
// for every E4M4 code, at and around every threshold, for several tensor scales.
void expect_fast_rule_matches_definition(const Codebook& cb, uint64_t seed) {
  const QuantizeTables& t = cb.quantize_tables();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.6f, 1.6f);
  for (float s : {1.0f, 0.0078125f, std::ldexp(1.0f, -126), 4.0f, std::ldexp(1.0f, 40)}) {
    const float inv_s = 1.0f / s;
    for (uint32_t code = 0; code < 256; ++code) {
      const float divisor = index_divisor(s, code);
      const float* row = t.thresholds.data() + code * uint32_t(t.rule.levels);
      std::vector<float> xs;
      for (int i = 0; i < 64; ++i) xs.push_back(u(rng) * decoded_block_amax(s, code));
      for (int d = 0; code && d < t.rule.levels - 1 && std::isfinite(row[d]); ++d) {
        const float x = row[d] * s;
        xs.insert(xs.end(), {x, std::nextafter(x, -INFINITY), std::nextafter(x, INFINITY)});
      }
      xs.insert(xs.end(), {0.0f, -0.0f, std::ldexp(1.0f, -149), -std::ldexp(1.0f, -140), 1e-39f});
      const float inv_dec = code ? 1.0f / e4m4_decode(code) : 1.0f;
      for (float x : xs) {
        if (e4m4_encode(std::fabs(x) / s) > code) continue;  // x cannot lie in a block with this code
        const uint32_t want = t.rule.nearest(detail::div_rn(x, divisor));
        ASSERT_EQ(quantize_index(t.rule, row, code, x, inv_s, s > 1.0f, divisor, inv_dec), want)
            << cb.name() << " k=" << cb.bits() << " s=" << s << " code=" << code << " x=" << x;
      }
    }
  }
}

TEST(QuantizeRule, ThresholdPathEqualsTheDefinition) {
  for (int k = 2; k <= 5; ++k) {
    EXPECT_TRUE(Codebook::bnf(k).quantize_tables().rule.fast);
    EXPECT_TRUE(Codebook::nf(k).quantize_tables().rule.fast);
    EXPECT_TRUE(Codebook::bnf(k).quantize_tables().rule.bucketed);
    EXPECT_TRUE(Codebook::nf(k).quantize_tables().rule.bucketed);
    EXPECT_TRUE(Codebook::bnf(k).quantize_tables().rule.identity);
    expect_fast_rule_matches_definition(Codebook::bnf(k), uint64_t(k));
    expect_fast_rule_matches_definition(Codebook::nf(k), uint64_t(k) + 50);
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int trial = 0; trial < 12; ++trial) {
    const int k = 2 + trial % 4;
    std::vector<float> v(size_t(1) << k);
    for (auto& x : v) x = u(rng);
    if (trial % 3 == 0) v[1] = v[0];                        // duplicate: still fast
    if (trial % 4 == 1) v[2] = std::nextafter(v[3], 2.0f);  // one ulp apart: definition path
    if (trial % 4 == 2)                                      // dense levels: binary search, no buckets
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.3f + 0.005f * float(i);
    const Codebook cb = Codebook::custom(k, v);
    EXPECT_EQ(cb.quantize_tables().rule.fast, trial % 4 == 1 ? 0 : 1) << trial;
    if (trial % 4 == 2) EXPECT_EQ(cb.quantize_tables().rule.bucketed, 0) << trial;
    expect_fast_rule_matches_definition(cb, uint64_t(trial));
  }
}

}  // namespace
}  // namespace kbit
