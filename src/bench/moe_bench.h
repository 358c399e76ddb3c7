// kbit bench moe (issue 5): the grouped expert GEMM of each MoE projection of a
// model in data/shapes.json, for T decode/prefill tokens routed top-`active` of E
// experts by a seeded random routing. Backends, timed in the same run by CUDA-graph
// replay: cublas_grouped (bf16 weights, cublasGemmGroupedBatchedEx over the non-empty
// experts, the routing known on the host) and kbit_expert_linear (k-bit stacked
// weights, device offsets). Reports times, the speedup, the experts touched and the
// kbit effective bandwidth over their packed bytes. One weight set (E x N x K exceeds 3x
// L2); the calls of a graph rotate over several seeded routings, enough that the weights
// they touch together exceed 3x L2 (one routing let a small touched set stay in L2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit::bench {

struct MoeBenchOptions {
  std::string model = "glm47";
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 512, 4096};
  std::vector<int> bits{4};
  int repeats = 9;
  uint64_t seed = 1;
  std::string json_path;
};

void run_moe_bench(const MoeBenchOptions& o);

}  // namespace kbit::bench
