// Arguments and launch entry points of the CUDA-core GEMV for M = 1..4 (gemv.cuh).
// Host code (src/dispatch) fills GemvArgs; the kernels are instantiated per bit
// width in gemv_k{2,3,4,5}.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kbit/dtype.h"
#include "kbit/quantized_matrix.h"

namespace kbit::cuda::detail {

inline constexpr int kGemvMaxM = 4;       // tokens per call
inline constexpr int kGemvWarps = 16;     // warps per CTA
inline constexpr int kGemvMinUnits = 2;   // (stripe, supertile) units per warp at least
// Shared memory of one CTA that the GEMV may use (the H200's 227 KB per block).
inline constexpr int64_t kGemvMaxSmem = 227 * 1024;

struct GemvArgs {
  const uint2* words = nullptr;   // mma16 words, [stripe][supertile][plane][lane] 8-byte units
  const uint2* scales = nullptr;  // mma16 scales, [stripe][supertile][g] 8-byte units
  const DeviceMeta* meta = nullptr;
  const void* x = nullptr;  // [M, K] rows of ldx elements (f16 or bf16)
  int64_t ldx = 0;
  void* y = nullptr;  // [M, N] rows of ldy elements, x's dtype
  int64_t ldy = 0;
  const void* bias = nullptr;      // [N] or null
  const void* residual = nullptr;  // [M, N] rows of ldr elements, or null (may alias y)
  int64_t ldr = 0;
  float* pieces = nullptr;         // [2 * warps of the grid][16][M] partial sums of split stripes
  int64_t piece_floats = 0;        // capacity of pieces
  unsigned* counters = nullptr;    // [stripes], zero between calls
  int64_t counter_count = 0;
  int M = 0, N = 0, K = 0;
  int supertiles = 0;  // per row (K / 128 rounded up)
  int stripes = 0;     // N / 16 rounded up
  bool x_vec = false;  // x rows 16-byte aligned and ldx % 8 == 0: 16-byte activation loads
  bool pdl = false;    // launch with programmatic stream serialization
  int max_ctas = 0;    // 0: one wave of resident CTAs on the current GPU
  // The codebook as fp16 divided by its largest |level| (entries 2^k.. unused), and
  // that level times the fp16 block-scale factor 16 (the tensor scale comes from meta).
  uint16_t codebook16[32] = {};
  float out_factor = 1.0f;
};

// Where dynamic shared memory starts in a CTA's shared window on the current GPU
// (probed once per device with a synchronous copy: call it outside graph capture first).
int dynamic_smem_base();

// Shared memory the GEMV needs for (bits, M, K); 0 when it does not fit in one CTA.
int64_t gemv_smem_bytes(int bits, int64_t m, int64_t k);

void launch_gemv_k2(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k3(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k4(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k5(const GemvArgs& a, DType t, cudaStream_t stream);

}  // namespace kbit::cuda::detail
