// kbit bench skinny-probe: where one skinny GEMM call spends its time. Runs kbit::skinny_gemm
// (bf16, with residual) with cold L2 (a flush before each group of calls) and the stream
// kernel's per-warp %globaltimer stamps on (SkinnyArgs::probe), `chain` calls back to back
// on rotated weights (the gap between one call's last store and the next call's first
// entry is the launch cost a CUDA graph pays too), and prints each phase's spread over the
// warps, the per-SM view (CTAs per SM against when the SM's last CTA stored) and the span.
#pragma once

#include <cstdint>
#include <string>

namespace kbit::bench {

struct SkinnyProbeOptions {
  int64_t n = 7168, k = 3584, m = 1;
  std::string config;  // "l=async,w=4,r=1,p=2,c=128,s=1"; empty: the tuned table's entry
  int iterations = 9;
  int chain = 2;     // calls per iteration, back to back
  bool pdl = false;  // chain them with programmatic dependent launch
  bool residual = true;
};

void run_skinny_probe(const SkinnyProbeOptions& o);

}  // namespace kbit::bench
