// The operands shared by kbit::linear's kernels (the fused mma.sync kernel and the
// GEMV): W in the mma16 layout, x, y and the optional epilogue terms.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kbit/quantized_matrix.h"

namespace kbit::cuda::detail {

struct LinearOperands {
  const uint2* words = nullptr;   // mma16 words, as [stripe][supertile][plane][lane] 8-byte units
  const uint2* scales = nullptr;  // mma16 scales, as [stripe][supertile][g] 8-byte units
  const DeviceMeta* meta = nullptr;
  const void* x = nullptr;  // [M, K] rows of ldx elements (f16 or bf16)
  int64_t ldx = 0;
  void* y = nullptr;  // [M, N] rows of ldy elements, x's dtype
  int64_t ldy = 0;
  const void* bias = nullptr;      // [N] or null
  const void* residual = nullptr;  // [M, N] rows of ldr elements, or null (may alias y)
  int64_t ldr = 0;
};

}  // namespace kbit::cuda::detail
