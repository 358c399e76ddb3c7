// Results of `kbit bench` and how they are shown: per-M tables with TOTAL rows,
// JSON lines, and an SVG plot of time against M. Host code only.
#pragma once

#include <string>
#include <vector>

#include "bench/timing.h"

namespace kbit::bench {

// Suffix of the rows that time a MoE projection as its routed grouped GEMM.
inline constexpr const char* kRoutedSuffix = "@routed";

struct LinearCase {
  std::string model, projection;
  int64_t m = 1, n = 0, k = 0;
  int bits = 0;  // 0 for backends that read bf16/fp16 weights
  int experts = 1, active = 1, per_block = 1;
  bool residual = false;
  std::string shape() const { return model + "." + projection; }
  // Calls of this projection in one transformer block (MoE: its active experts).
  int calls_per_block() const { return experts > 1 ? active : per_block; }
};

struct Row {
  LinearCase c;
  std::string backend, config, error;
  bool is_kbit = false;
  int num_buffers = 0;
  Timing t;
  double bytes = 0;          // minimum bytes per call: weights + x + y (+ r)
  double roofline_us = 0;    // max(bytes / measured read bandwidth, launch floor)
  bool valid = false;
  double cosine = 0, max_abs_error = 0, max_scaled_error = 0;
};

struct RunInfo {
  DeviceInfo device;
  double read_tbps = 0, launch_floor_us = 0;
  std::string commit, date;
  std::string user_tables;  // $KBIT_LINEAR_CONFIGS when set: plans may come from these tables
};

// One table per M: a row per (projection, bits), a column per backend, the best
// kbit time and its speedup over cuBLAS bf16, and a TOTAL row per bit width.
std::string format_tables(const std::vector<Row>& rows, const RunInfo& info);
std::string row_json(const Row& r, const RunInfo& info);
// Time against M (log-log) for one shape, one line per backend (kbit rows at `bits`).
std::string render_svg(const std::vector<Row>& rows, const std::string& shape, int bits);

}  // namespace kbit::bench
