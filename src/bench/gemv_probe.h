// kbit bench gemv-probe: where one GEMV call spends its time. Runs the GEMV on a
// projection of data/shapes.json with cold L2 (a flush before each call; with hot_x,
// x read back into L2 after the flush, as in a decode step whose previous kernel has
// just written it) and the
// kernel's per-warp %globaltimer stamps on (GemvArgs::probe), then prints each phase's
// spread over the warps (from the first warp's entry) and the per-unit compute rate.
// Dense projections: M tokens (1..4). Expert projections: kbit::expert_linear on M tokens
// routed top-`active` (the grouped GEMV up to kGroupedGemvMaxRows rows). warm_code: the
// same with the code warm (GemvProbeOptions::warm_code).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit::bench {

struct GemvProbeOptions {
  std::string shape = "glm47.q";  // model.projection
  int bits = 4;
  int64_t m = 1;  // tokens
  int iterations = 7;
  bool hot_x = false;  // x in L2 at the call (the weights stay cold)
  // One unprobed call after the flush on other weights (dense: a second copy; experts:
  // another routing), so that the kernel's code and x are warm as in a decode step,
  // while the probed call's weights stay cold.
  bool warm_code = false;
  int tile_rows = 0;     // experts: ExpertLinearOptions::tile_rows (0: automatic; kTileRowsByExpert)
  bool per_cta = false;  // also print each CTA's exit, staging and units (the mixed kernel's class split)
};

void run_gemv_probe(const GemvProbeOptions& o);

// One call's stamps summarised per CTA (its warps share one SM): for each CTA with units,
// when its last and median warps exit, the gap (what balancing inside the CTA could
// remove), when x was staged, and per warp index in the CTA its exit against the CTA's
// median and how often it is the CTA's last. Times in us from t0 (globaltimer ns).
struct GemvCtaSummary {
  std::vector<double> last_exit, median_exit, tail, x_staged, loop, units;  // one per CTA with units
  std::vector<int> cta, smid;                                             // its blockIdx.x and SM
  int latest = -1;  // which of them ends last
  std::vector<std::vector<double>> exit_vs_median;  // [warp index in the CTA] over the CTAs
  std::vector<int> last_count;                      // [warp index in the CTA]
};
// stamps: kGemvProbeSlots per warp, CTAs of kGemvWarps consecutive warps; a warp without
// an entry, units or exit stamp (not launched, no units) is left out. Host only.
GemvCtaSummary summarize_gemv_ctas(const unsigned long long* stamps, int64_t warps, unsigned long long t0);

}  // namespace kbit::bench
