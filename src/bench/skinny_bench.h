// `kbit tune skinny`: the reference benchmark of the skinny GEMM C = A W^T + R
// (issue 6). Both backends (cublas_addmm: cuBLASLt with beta = 1; kbit_skinny)
// are captured in CUDA graphs and replayed, with W and R rotated across enough
// buffers to exceed cache_multiplier x L2, and every result checked against fp64.
// Modes: baseline (one fixed kbit configuration), sweep (every candidate, shardable
// with --shard i/n), selected (the tuned table's entry, or --config).
#pragma once

#include <string>
#include <vector>

#include "bench/clock_monitor.h"
#include "dispatch/linear_configs.h"
#include "kbit/skinny.h"

namespace kbit::bench {

struct SkinnyBenchOptions {
  int64_t n = 7168, k = 3584;
  std::vector<int64_t> ms{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  bool residual = true;
  std::string mode = "selected";  // baseline, sweep, selected
  std::string config;             // selected: "w=4,r=2,p=3,c=256,s=1" instead of the table
  std::string loader = "auto";    // sweep: only this loader's candidates (tma, reg, smem; auto: all)
  double cache_multiplier = 3.0;
  int max_buffers = 256;
  int repeats = 15;
  int replays = 0;  // 0: about 2 ms of work per sample
  int shard = 0, shards = 1;
  bool include_cublas = true;
  bool pdl = false;  // also kbit_skinny_pdl rows: the same configurations chained with PDL
};

struct SkinnyBenchRow {
  int64_t m = 0, n = 0, k = 0;
  std::string backend, mode, config;
  int num_buffers = 0;
  double cache_multiplier = 0;
  double median_us = 0, p10_us = 0, p90_us = 0, mean_us = 0, cv_pct = 0;
  std::vector<double> samples_us;
  ClockStats clocks;
  bool valid = false;
  double cosine = 0, max_abs_error = 0, max_scaled_error = 0;
  int registers_per_thread = 0, spill_bytes = 0;
  std::string error;
  detail::LinearConfig plan;  // kbit rows: the configuration as a table entry
};

// "w=8,r=1,u=4,s=2" <-> a table entry (bits 16).
detail::LinearConfig parse_skinny_config(const std::string& text);
// The kernel shapes `--mode sweep` times at M (every one instantiated and fitting).
std::vector<detail::LinearConfig> skinny_sweep_candidates(int64_t m);
std::string skinny_config_name(const detail::LinearConfig& c);
// The skinny_gemm overrides that force a table entry's kernel shape.
SkinnyOptions skinny_options_of(const detail::LinearConfig& c);

std::vector<SkinnyBenchRow> run_skinny_bench(const SkinnyBenchOptions& o);
// One JSON object per row, with the device fields.
std::string skinny_row_json(const SkinnyBenchRow& r);
// The fastest valid kbit row per M, as table entries (bits 16), for merge_linear_configs;
// the kbit_skinny_pdl rows (--pdl) give entries marked pdl, used by PDL launches.
std::vector<detail::LinearConfig> best_skinny_configs(const std::vector<SkinnyBenchRow>& rows);

}  // namespace kbit::bench
