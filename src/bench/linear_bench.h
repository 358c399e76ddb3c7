// `kbit bench`: y = x W^T (+ r) on real model shapes, every backend against the
// same inputs, timed by the timing core and validated against an fp64 reference.
#pragma once

#include <string>
#include <vector>

#include "bench/report.h"
#include "kbit/shapes.h"

namespace kbit::bench {

struct LinearBenchOptions {
  std::vector<std::string> models{"all"};  // keys of the shape set, or "all"
  std::vector<ModelShapes> shape_set;       // the models `models` names; empty: data/shapes.json's
  std::vector<int64_t> ms{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> bits{2, 3, 4, 5};
  std::vector<std::string> backends;  // empty: every registered backend except test fixtures
  int repeats = 15;
  // MoE projections also as their routed grouped GEMM (`<projection>@routed` rows: cuBLAS
  // grouped bf16 as cublas_bf16, kbit::expert_linear as kbit_linear, over M tokens routed
  // top-k by seeded routings), which then replace the per-expert rows in the TOTAL.
  // Needs the cublas_bf16 and kbit_linear backends.
  bool routed_moe = true;
  std::string json_path, svg_path, svg_shape = "glm47.q";
  int svg_bits = 4;
};

// Registered backends: cublas_bf16, cublas_bf16_best (the fastest cuBLASLt heuristic candidate), cublas_fp16, kbit::linear (kbit_linear, with PDL
// kbit_linear_pdl, or one path forced: kbit_gemv, kbit_fused_mma, kbit_wgmma*,
// kbit_dequant_cublas), the skinny GEMM (kbit_skinny*), and the test fixture fixture_wrong
// (a deliberately wrong result, for the validator).
std::vector<std::string> backend_names();

// Runs every (shape, M, bits, backend) case; throws without a GPU.
std::vector<Row> run_linear_bench(const LinearBenchOptions& o, RunInfo& info);

}  // namespace kbit::bench
