// `kbit tune`: for each projection of the chosen models, bit width and M, time every
// kbit::linear plan worth trying on the present GPU (fused kernel n-tiles, warps per
// CTA and K splits, and dequantize + cuBLASLt from M = 32) with the benchmark's
// method, keep the fastest, and merge the winners into a data/linear_configs.json table.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "dispatch/linear_configs.h"
#include "kbit/shapes.h"

namespace kbit::bench {

// About 35 candidates per case after deduplication at M <= 16, ~75 at M = 32, 64 (wgmma
// items and dequantize + cuBLAS join), each screened with one sample before the finalists
// are timed in full.
struct LinearTuneOptions {
  std::vector<std::string> models{"glm47"};  // keys of the shape set, or "all"
  std::vector<ModelShapes> shape_set;         // the models `models` names; empty: data/shapes.json's
  std::vector<std::string> projections;  // names within the models (q, kv, ...); empty: all
  std::vector<int64_t> ms{1, 2, 4, 8, 16, 32, 64};
  std::vector<int> bits{4};
  int repeats = 5;
  // Screening: every candidate is first timed with one sample (one warm-up replay), and
  // only the `finalists` fastest of those within `finalist_margin` of the fastest are
  // timed again with `repeats` samples; 0 times every candidate with `repeats`.
  int finalists = 6;
  double finalist_margin = 0.10;
};

// Indices of the screened times (us) worth timing in full: the fastest, then the next
// fastest while within `margin` (relative) of it, at most `max_count`, at least 2 where
// there are 2. Ties keep the candidates' order.
std::vector<size_t> tune_finalists(const std::vector<double>& screened_us, int max_count, double margin);

struct LinearTuneRow {
  detail::LinearConfig best;
  double heuristic_us = 0;     // the untuned plan's time in the same run
  std::string heuristic_plan;  // its description
  int candidates = 0;          // plans that ran (screened)
  int finalists = 0;           // of them, timed in full
};

// Throws without a GPU. Progress goes to stderr; on_row (if set) sees each case as it
// finishes (kbit tune writes its table there, so a run cut short keeps what it measured).
std::vector<LinearTuneRow> run_linear_tune(const LinearTuneOptions& o,
                                           const std::function<void(const LinearTuneRow&)>& on_row = {});

// `table` with the entries of `tuned` added, replacing those of the same device, bits, n, k, m.
std::vector<detail::LinearConfig> merge_linear_configs(std::vector<detail::LinearConfig> table,
                                                       const std::vector<detail::LinearConfig>& tuned);

}  // namespace kbit::bench
