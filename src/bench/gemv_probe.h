// kbit bench gemv-probe: where one GEMV call spends its time. Runs the GEMV on a
// projection of data/shapes.json with cold L2 (a flush before each call) and the
// kernel's per-warp %globaltimer stamps on (GemvArgs::probe), then prints each phase's
// spread over the warps (from the first warp's entry) and the per-unit compute rate.
// Dense projections: M tokens (1..4). Expert projections: kbit::expert_linear on M tokens
// routed top-`active` (the grouped GEMV up to kGroupedGemvMaxRows rows).
#pragma once

#include <cstdint>
#include <string>

namespace kbit::bench {

struct GemvProbeOptions {
  std::string shape = "glm47.q";  // model.projection
  int bits = 4;
  int64_t m = 1;  // tokens
  int iterations = 7;
};

void run_gemv_probe(const GemvProbeOptions& o);

}  // namespace kbit::bench
