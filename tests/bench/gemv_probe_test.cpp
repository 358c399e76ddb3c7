// kbit bench gemv-probe's per-CTA summary of the kernel's stamps (host only).
#include <gtest/gtest.h>

#include <vector>

#include "bench/gemv_probe.h"
#include "cuda/linear/gemv_args.h"

namespace kbit::bench {
namespace {

namespace d = cuda::detail;

// Three CTAs: the first exits at 10..25 us (warp w at 10 + w), the second at 20 us except
// warp 3 at 30 us, the third has no units (not counted).
TEST(GemvProbeSummary, PerCtaTailLatestCtaAndSlowWarpIndex) {
  const int64_t warps = 3 * d::kGemvWarps;
  const unsigned long long t0 = 5000;  // ns
  std::vector<unsigned long long> stamps(size_t(warps * d::kGemvProbeSlots), 0);
  auto set = [&](int64_t wi, double exit_us, double staged_us, unsigned long long units) {
    unsigned long long* s = stamps.data() + wi * d::kGemvProbeSlots;
    s[d::kProbeEntry] = t0;
    s[d::kProbeXStaged] = t0 + (unsigned long long)(staged_us * 1000);
    s[d::kProbeExit] = t0 + (unsigned long long)(exit_us * 1000);
    s[d::kProbeUnits] = units;
  };
  for (int w = 0; w < d::kGemvWarps; ++w) set(w, 10.0 + w, 4.0, 15);
  for (int w = 0; w < d::kGemvWarps; ++w) set(d::kGemvWarps + w, w == 3 ? 30.0 : 20.0, 5.0, 16);
  for (int w = 0; w < d::kGemvWarps; ++w) stamps[size_t((2 * d::kGemvWarps + w) * d::kGemvProbeSlots)] = t0;

  const GemvCtaSummary s = summarize_gemv_ctas(stamps.data(), warps, t0);
  ASSERT_EQ(s.last_exit.size(), 2u);
  EXPECT_DOUBLE_EQ(s.last_exit[0], 25.0);
  EXPECT_DOUBLE_EQ(s.median_exit[0], 18.0);  // the upper median of 10..25
  EXPECT_DOUBLE_EQ(s.tail[0], 7.0);
  EXPECT_DOUBLE_EQ(s.x_staged[0], 4.0);
  EXPECT_DOUBLE_EQ(s.loop[0], 21.0);
  EXPECT_DOUBLE_EQ(s.units[0], 15.0 * d::kGemvWarps);
  EXPECT_DOUBLE_EQ(s.last_exit[1], 30.0);
  EXPECT_DOUBLE_EQ(s.median_exit[1], 20.0);
  EXPECT_DOUBLE_EQ(s.tail[1], 10.0);
  EXPECT_EQ(s.latest, 1);
  ASSERT_EQ(s.exit_vs_median.size(), size_t(d::kGemvWarps));
  ASSERT_EQ(s.exit_vs_median[3].size(), 2u);
  EXPECT_DOUBLE_EQ(s.exit_vs_median[3][0], 13.0 - 18.0);
  EXPECT_DOUBLE_EQ(s.exit_vs_median[3][1], 10.0);
  EXPECT_EQ(s.last_count[d::kGemvWarps - 1], 1);
  EXPECT_EQ(s.last_count[3], 1);
  int total = 0;
  for (int c : s.last_count) total += c;
  EXPECT_EQ(total, 2);
}

TEST(GemvProbeSummary, NoStampsGiveNoCtas) {
  const int64_t warps = d::kGemvWarps;
  std::vector<unsigned long long> stamps(size_t(warps * d::kGemvProbeSlots), 0);
  const GemvCtaSummary s = summarize_gemv_ctas(stamps.data(), warps, 0);
  EXPECT_TRUE(s.last_exit.empty());
  EXPECT_EQ(s.latest, -1);
}

}  // namespace
}  // namespace kbit::bench
