// The mapped-file source's host copy: every byte lands, the reported prefix only
// grows and ends at the last range's end, and a failing callback leaves the pool
// reusable (no worker still writing).
#include "streaming/parallel_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace kbit::detail {
namespace {

struct Case {
  std::vector<uint8_t> src, dst;
  std::vector<CopyRange> ranges;
  size_t end = 0;
};

// Ranges of random sizes (some empty-sized gaps, some tiny) at ascending offsets.
Case make_case(uint32_t seed, int ranges) {
  std::mt19937 rng(seed);
  Case c;
  std::vector<std::pair<size_t, size_t>> layout;  // (dst offset, bytes)
  size_t off = 0;
  for (int i = 0; i < ranges; ++i) {
    const size_t bytes = 1 + rng() % (3u << 20);
    layout.push_back({off, bytes});
    off += bytes + (rng() % 4 == 0 ? rng() % 300 : 0);
  }
  c.src.resize(off);
  c.dst.assign(off, 0xAB);
  for (auto& b : c.src) b = uint8_t(rng());
  for (auto [o, n] : layout) c.ranges.push_back({c.dst.data() + o, c.src.data() + o, n});
  c.end = layout.back().first + layout.back().second;
  return c;
}

void expect_copied(const Case& c) {
  for (const auto& r : c.ranges) {
    const size_t o = size_t(static_cast<uint8_t*>(r.dst) - c.dst.data());
    ASSERT_EQ(0, std::memcmp(r.dst, c.src.data() + o, r.bytes)) << "range at " << o;
  }
}

TEST(ParallelCopy, CopiesEveryRangeAndReportsAGrowingPrefix) {
  for (int workers : {0, 1, 3, 8}) {
    ParallelCopy pool(workers, size_t(64) << 10, size_t(256) << 10);
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      Case c = make_case(seed, int(1 + seed * 5));
      std::vector<size_t> reports;
      pool.copy(c.ranges, [&](size_t n) {
        // everything reported complete must already be there
        for (const auto& r : c.ranges) {
          const size_t o = size_t(static_cast<uint8_t*>(r.dst) - c.dst.data());
          if (o + r.bytes <= n) ASSERT_EQ(0, std::memcmp(r.dst, c.src.data() + o, r.bytes));
        }
        reports.push_back(n);
      });
      expect_copied(c);
      ASSERT_FALSE(reports.empty());
      EXPECT_TRUE(std::is_sorted(reports.begin(), reports.end()));
      EXPECT_EQ(std::adjacent_find(reports.begin(), reports.end()), reports.end()) << "a prefix reported twice";
      EXPECT_EQ(reports.back(), c.end) << "workers " << workers << " seed " << seed;
    }
  }
}

TEST(ParallelCopy, AFailingCallbackLeavesThePoolReusable) {
  ParallelCopy pool(4, size_t(64) << 10, size_t(64) << 10);
  Case first = make_case(7, 20);
  EXPECT_THROW(pool.copy(first.ranges, [](size_t) { throw std::runtime_error("upload failed"); }), std::runtime_error);
  Case second = make_case(8, 20);
  size_t last = 0;
  pool.copy(second.ranges, [&](size_t n) { last = n; });
  expect_copied(second);
  EXPECT_EQ(last, second.end);
}

TEST(ParallelCopy, DefaultWorkersIsBounded) {
  EXPECT_GE(ParallelCopy::default_workers(), 0);
  EXPECT_LE(ParallelCopy::default_workers(), 12);
}

}  // namespace
}  // namespace kbit::detail
