// kbit report speedups: how many (projection, M, k) cases of one kbit backend beat a
// baseline backend, from the JSON lines of one or more `kbit bench --json` runs. Host code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kbit::bench {

struct SpeedupCell {
  int faster = 0, cases = 0;
  std::vector<double> speedups;  // baseline time / backend time, one per case
};

// One M over every model: issue 4's per-M view (faster, at the parity bar, geomean, slowest case).
struct SpeedupRow {
  SpeedupCell cell;
  int at_bar = 0;       // cases at bar or better (baseline time / backend time >= bar)
  std::string slowest;  // "shape k=bits" of the lowest speedup
};

struct SpeedupSummary {
  std::map<std::pair<std::string, int64_t>, SpeedupCell> by_model_m;  // (model, M)
  std::map<int64_t, SpeedupRow> by_m;
  double bar = 0.9;
  int faster = 0, cases = 0;
  std::vector<std::string> notes;  // rows left out or counted as slower, and why
};

// Rows are keyed by (shape, M, bits, backend); a later line replaces an earlier one with
// the same key, so a re-run of part of a table read after the full run wins. Routed MoE
// rows (shape "model.proj@routed") and rows above max_m are left out. A case counts as
// faster when the backend's row is valid, has no error and a lower median than the
// baseline's row of the same shape and M (the baseline's bits are ignored: bf16 rows
// have none); a case without a baseline row is left out and noted.
// by_m counts a case at bar when its speedup is >= bar (issue 4: 0.9x at M = 512..4096).
SpeedupSummary summarize_speedups(const std::vector<std::string>& json_lines, const std::string& backend,
                                  const std::string& baseline, int64_t max_m, double bar = 0.9);

// Markdown tables: model, M, faster / cases, min / median / max speedup; then per M over all models,
// faster, at the bar, geomean and slowest case; then the total.
std::string format_speedup_summary(const SpeedupSummary& s, const std::string& backend, const std::string& baseline);

}  // namespace kbit::bench
