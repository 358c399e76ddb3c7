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
#include <memory>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "kbit/moe.h"
#include "kbit/shapes.h"

namespace kbit::bench {

struct MoeBenchOptions {
  std::string model = "glm47";
  std::vector<ModelShapes> shape_set;  // the models `model` names; empty: data/shapes.json's
  std::vector<int64_t> tokens{1, 2, 4, 8, 16, 512, 4096};
  std::vector<int> bits{4};
  int repeats = 9;
  uint64_t seed = 1;
  std::string json_path;
  // kbit::expert_linear's options for the projection rows (e.g. items = stripes to time
  // the fused kernel's stripe groups against its automatic plan).
  ExpertLinearOptions kbit;
};

void run_moe_bench(const MoeBenchOptions& o);

// One MoE projection's routed grouped GEMM, both backends on the same seeded routings
// (rotated across the calls of a graph): a row of `kbit bench moe`, and the MoE rows of
// `kbit bench`'s routed TOTAL. Holds the bf16 expert stack and its k-bit stacks.
struct RoutedMoeTiming {
  Timing cublas, kbit;    // cublas_grouped (bf16) and kbit::expert_linear
  double touched = 0;     // mean experts touched per call
  size_t routings = 0;    // routings the calls rotate over
  double kbit_tbps = 0;   // packed bytes of the experts touched / kbit median
};

class RoutedMoeBench {
 public:
  RoutedMoeBench(const Projection& p, uint64_t seed);
  ~RoutedMoeBench();
  RoutedMoeBench(const RoutedMoeBench&) = delete;
  RoutedMoeBench& operator=(const RoutedMoeBench&) = delete;
  // `tokens` decode/prefill tokens routed top-p.active of p.experts.
  RoutedMoeTiming time(int64_t tokens, int bits, int repeats, const ExpertLinearOptions& kbit_options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kbit::bench
