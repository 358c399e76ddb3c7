// `kbit tune`: for each projection of the chosen models, bit width and M, time every
// kbit::linear plan worth trying on the present GPU (fused kernel n-tiles, warps per
// CTA and K splits, and dequantize + cuBLASLt from M = 32) with the benchmark's
// method, keep the fastest, and merge the winners into a data/linear_configs.json table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dispatch/linear_configs.h"

namespace kbit::bench {

// About 35 candidates per case after deduplication (69 on average before the split pruning
// of linear_tune.cu, which took 4-8 s per case on the H200 with the cold rotation).
struct LinearTuneOptions {
  std::vector<std::string> models{"glm47"};
  std::vector<std::string> projections;  // names within the models (q, kv, ...); empty: all
  std::vector<int64_t> ms{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> bits{4};
  int repeats = 5;
};

struct LinearTuneRow {
  detail::LinearConfig best;
  double heuristic_us = 0;     // the untuned plan's time in the same run
  std::string heuristic_plan;  // its description
  int candidates = 0;
};

// Throws without a GPU. Progress goes to stderr; on_row (if set) sees each case as it
// finishes (kbit tune writes its table there, so a run cut short keeps what it measured).
std::vector<LinearTuneRow> run_linear_tune(const LinearTuneOptions& o,
                                           const std::function<void(const LinearTuneRow&)>& on_row = {});

// `table` with the entries of `tuned` added, replacing those of the same device, bits, n, k, m.
std::vector<detail::LinearConfig> merge_linear_configs(std::vector<detail::LinearConfig> table,
                                                       const std::vector<detail::LinearConfig>& tuned);

}  // namespace kbit::bench
