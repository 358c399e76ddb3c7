// Host-side interface of the skinny GEMM kernel (kbit::skinny_gemm): arguments,
// kernel shape and launch. Kept free of CUDA device code so that dispatch code
// compiles with the host compiler.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kbit/dtype.h"

namespace kbit::cuda::detail {

struct SkinnyArgs {
  const uint16_t* w = nullptr;  // W[N, K], 16-bit, rows of ldw elements, 16-byte aligned
  int64_t ldw = 0;
  const void* x = nullptr;  // A[M, K], M <= 32
  int64_t ldx = 0;
  void* y = nullptr;  // C[M, N]
  int64_t ldy = 0;
  const void* residual = nullptr;  // R[M, N] or null (may alias C)
  int64_t ldr = 0;
  const void* bias = nullptr;  // [N] or null
  int M = 0, N = 0, K = 0;
  bool x_vec = false;  // A's rows 16-byte aligned: 16-byte activation loads
  bool pdl = false;    // launched with programmatic stream serialization
};

// Kernel shape. n_tiles: tiles of 8 tokens (1, 2, 4; from M). warps: per CTA (4, 8).
// stripes: stripes of 16 rows per warp (1, 2). unroll: 32-column steps per batch of
// loads (stripes * unroll in {4, 8} at n_tiles <= 2, {2, 4} at 4). splits: CTAs of
// one thread-block cluster that share a row group's K range (1, 2, 4, 8).
struct SkinnyShape {
  int n_tiles = 1;
  int warps = 8;
  int stripes = 2;
  int unroll = 2;
  int splits = 1;
};

// Throws kbit::Error naming the field when the shape has no instantiation.
void check_skinny_shape(const SkinnyShape& s);
void launch_skinny(const SkinnyArgs& a, const SkinnyShape& s, DType t, cudaStream_t stream);

struct SkinnyKernelInfo {
  int registers = 0;
  int local_bytes = 0;  // spill / stack bytes per thread
};
SkinnyKernelInfo skinny_kernel_info(const SkinnyShape& s, DType t);

}  // namespace kbit::cuda::detail
