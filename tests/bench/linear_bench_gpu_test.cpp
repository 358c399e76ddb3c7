// The harness on a GPU: real backends validate, the deliberately wrong fixture does not.
#include <gtest/gtest.h>

#include "bench/linear_bench.h"
#include "support/test_support.h"

namespace kbit::bench {
namespace {

TEST(GpuBench, WrongBackendIsFlaggedInvalidAndRealOnesAreValid) {
  KBIT_SKIP_WITHOUT_GPU();
  LinearBenchOptions o;
  ModelShapes toy;
  toy.key = "toy";
  toy.projections = {{"awkward", 96, 100, 1, 1, 1, false}, {"residual", 5120 + 32, 256, 1, 1, 1, true}};
  o.shape_set = {toy};
  o.ms = {1, 5, 33};
  o.bits = {2, 5};
  o.repeats = 3;
  o.backends = {"cublas_bf16", "cublas_bf16_best", "cublas_fp16", "kbit_dequant_cublas", "fixture_wrong"};
  RunInfo info;
  const std::vector<Row> rows = run_linear_bench(o, info);
  ASSERT_EQ(rows.size(), 2u * 3u * (1 + 1 + 1 + 2 + 1));
  EXPECT_GT(info.read_tbps, 0.0);  // measured (its value is no test: sanitizers slow it 15x)
  EXPECT_GT(info.launch_floor_us, 0.0);
  for (const Row& r : rows) {
    ASSERT_TRUE(r.error.empty()) << r.backend << ": " << r.error;
    EXPECT_GT(r.t.median_us, 0.0);
    EXPECT_GE(r.num_buffers, 1);
    if (r.backend == "cublas_bf16_best") EXPECT_NE(r.config.find("fastest of"), std::string::npos) << r.config;
    if (r.backend == "fixture_wrong")
      EXPECT_FALSE(r.valid) << r.c.shape() << " m=" << r.c.m << " cosine " << r.cosine;
    else
      EXPECT_TRUE(r.valid) << r.backend << " " << r.c.shape() << " m=" << r.c.m << " k=" << r.c.bits << " cosine "
                           << r.cosine << " max_abs " << r.max_abs_error;
  }
}

TEST(GpuBench, MoeProjectionsAlsoRunAsTheirRoutedGroupedGemm) {
  KBIT_SKIP_WITHOUT_GPU();
  LinearBenchOptions o;
  ModelShapes toy;
  toy.key = "toy";
  toy.projections = {{"moe", 256, 128, 1, 8, 2, false}};  // K, N, per_block, experts, active
  o.shape_set = {toy};
  o.ms = {1, 4};
  o.bits = {2, 4};
  o.repeats = 3;
  o.backends = {"cublas_bf16", "kbit_linear"};
  RunInfo info;
  const std::vector<Row> rows = run_linear_bench(o, info);
  // per M: the per-expert rows (cuBLAS, kbit x 2 bits), then the routed rows (cuBLAS once, kbit x 2 bits)
  ASSERT_EQ(rows.size(), 2u * (3 + 3));
  int routed = 0;
  for (const Row& r : rows) {
    ASSERT_TRUE(r.error.empty()) << r.backend << " " << r.c.shape() << ": " << r.error;
    EXPECT_GT(r.t.median_us, 0.0);
    EXPECT_TRUE(r.valid);
    if (r.c.projection == std::string("moe") + kRoutedSuffix) {
      ++routed;
      EXPECT_EQ(r.c.calls_per_block(), 1);
      EXPECT_GT(r.bytes, 0.0);
    }
  }
  EXPECT_EQ(routed, 2 * 3);
  o.routed_moe = false;
  EXPECT_EQ(run_linear_bench(o, info).size(), 2u * 3);
}

}  // namespace
}  // namespace kbit::bench
