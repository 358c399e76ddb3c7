// Builds QuantizeTables (see format.h): per-code thresholds that make the index
// rule a short binary search, exact by construction, cached per codebook.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "kbit/format.h"

namespace kbit {
namespace {

// Floats in order as unsigned keys (-inf < ... < -0 < +0 < ... < +inf).
uint32_t order_key(float f) {
  const uint32_t b = detail::float_bits(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
float from_order_key(uint32_t k) { return detail::bits_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// Largest float f in [lo, hi] with pred(f) true, for pred true at lo and monotone (true then false).
template <typename Pred>
float last_true(float lo, float hi, Pred pred) {
  uint32_t a = order_key(lo), b = order_key(hi);
  while (a < b) {
    const uint32_t mid = a + (b - a + 1) / 2;
    if (pred(from_order_key(mid))) a = mid;
    else b = mid - 1;
  }
  return from_order_key(a);
}

QuantizeTables build(const Codebook& cb) {
  QuantizeTables t{};
  QuantizeRule& r = t.rule;
  r.nearest = cb.nearest_level();
  r.levels = cb.levels();
  const NearestLevel& nl = r.nearest;
  for (int d = 0; d < kMaxLevels; ++d) r.first_index[d] = nl.first_index[d];

  // Exactness of the two-neighbour rule for |u| <= 2: distances to adjacent levels
  // differ by at least the smallest gap, which must exceed one ulp of the largest distance.
  float max_abs = 0.0f, min_gap = INFINITY;
  for (int d = 0; d < nl.distinct; ++d) max_abs = std::max(max_abs, std::fabs(nl.sorted[d]));
  for (int d = 1; d < nl.distinct; ++d) min_gap = std::min(min_gap, nl.sorted[d] - nl.sorted[d - 1]);
  int e;
  std::frexp(2.0f + max_abs, &e);
  const float ulp = std::ldexp(1.0f, e - 24);
  r.fast = (min_gap > 2 * ulp) ? 1 : 0;

  // u-space thresholds: T[d] = largest u in [v_d, v_{d+1}] that the definition maps to level d.
  std::vector<float> u_threshold;
  for (int d = 0; d + 1 < nl.distinct; ++d) {
    const float lo = nl.sorted[d], hi = nl.sorted[d + 1];
    const bool lower_wins_ties = nl.first_index[d] < nl.first_index[d + 1];
    u_threshold.push_back(last_true(lo, hi, [&](float u) {
      const float a = std::fabs(detail::sub_rn(u, lo)), b = std::fabs(detail::sub_rn(u, hi));
      return a < b || (a == b && lower_wins_ties);
    }));
  }
  // Buckets of u (width 1/32, bucket b centred on (b - 64) / 32): the count of
  // thresholds certainly below the bucket, widened by a margin far above the error of
  // the approximate u; usable when no bucket's widened range holds two thresholds.
  r.identity = nl.distinct == r.levels ? 1 : 0;
  for (int d = 0; d < nl.distinct; ++d)
    if (nl.first_index[d] != d) r.identity = 0;
  r.bucketed = r.fast;
  const double margin = 1.0 / 4096;
  for (int b = 0; b < kBuckets; ++b) {
    const double lo = (b - kBuckets / 2 - 0.5) * double(kBucketWidth) - margin, hi = lo + double(kBucketWidth) + 2 * margin;
    int below = 0, inside = 0;
    for (float t : u_threshold) {
      if (double(t) < lo) ++below;
      else if (double(t) <= hi) ++inside;
    }
    r.bucket[b] = uint8_t(below);
    if (inside > 1) r.bucketed = 0;
  }

  // y-space rows: largest y with fl(y / e4m4(c)) <= T[d] (monotone in y).
  t.thresholds.assign(size_t(256) * size_t(r.levels), INFINITY);
  for (int c = 1; c < 256; ++c) {
    const float dec = e4m4_decode(uint32_t(c));
    for (size_t d = 0; d < u_threshold.size(); ++d)
      t.thresholds[size_t(c) * size_t(r.levels) + d] =
          last_true(-FLT_MAX, FLT_MAX, [&](float y) { return detail::div_rn(y, dec) <= u_threshold[d]; });
  }
  return t;
}

}  // namespace

const QuantizeTables& Codebook::quantize_tables() const {
  static std::mutex m;
  static std::map<std::pair<int, std::array<float, kMaxLevels>>, std::unique_ptr<QuantizeTables>> cache;
  std::lock_guard<std::mutex> lock(m);
  auto& slot = cache[{bits_, values_}];
  if (!slot) slot = std::make_unique<QuantizeTables>(build(*this));
  return *slot;
}

}  // namespace kbit
