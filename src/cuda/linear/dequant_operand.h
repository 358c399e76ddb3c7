// Arguments and launch entry point of the operand dequantize (dequant_operand.cu): W in the
// mma16 layout -> the 16-bit W_hat[N, K] that the dequantize + cuBLASLt path multiplies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kbit/dtype.h"
#include "kbit/quantized_matrix.h"

namespace kbit::cuda::detail {

struct OperandDequantArgs {
  const uint2* words = nullptr;   // mma16 words, [stripe][supertile][plane][lane] 8-byte units
  const uint2* scales = nullptr;  // mma16 scales, [stripe][supertile][g] 8-byte units
  const DeviceMeta* meta = nullptr;
  void* out = nullptr;  // [rows, cols] of ld elements, fp16 or bf16
  int64_t ld = 0;
  int rows = 0, cols = 0;
  int stripes = 0, supertiles = 0;
  bool vec = false;  // out 16-byte aligned and ld % 8 == 0: 16-byte stores
  // The codebook in out's type (round to nearest even), as the fused kernels take it.
  uint16_t codebook16[32] = {};
};

// bits 2..5, t f16 or bf16 (checked by the caller).
void launch_dequantize_operand(int bits, const OperandDequantArgs& a, DType t, cudaStream_t stream);

}  // namespace kbit::cuda::detail
