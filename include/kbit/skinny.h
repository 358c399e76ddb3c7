// kbit::skinny_gemm: C[M, N] = A[M, K] @ W[N, K]^T (+ R[M, N]) for small M (the
// decode case; the Kimi-K3 latent projection is N = 7168, K = 3584), 16-bit A, W,
// R and C of one dtype (f16 or bf16), fp32 accumulation, on the caller's stream.
// W is read once, streamed with evict-first loads, 16 rows x 128 columns per warp
// step through mma.sync (the tokens are the MMA's narrow side); the residual is
// added in the epilogue. It is kbit::linear's fused kernel with dense weights.
//
// Requirements (each a clear kbit::Error): K a multiple of 8; W's rows 16-byte
// aligned; 1 <= M <= 64; all views on the device. Graph-capturable, no host
// synchronisation, bit-identical run to run. Without a workspace the K dimension
// is split only among the warps of a CTA; with one, also across CTAs.
#pragma once

#include <cuda_runtime_api.h>

#include "kbit/linear.h"
#include "kbit/tensor.h"

namespace kbit {

struct SkinnyOptions {
  TensorView residual{};  // [M, N]; data null for none (may equal C)
  const void* bias = nullptr;  // [N] or null
  // Kernel overrides (0 / automatic: the heuristic).
  int n_tiles = 0, warps = 0, splits = 0;
  LinearItems items = LinearItems::automatic;
  // Programmatic dependent launch: the weight prefetch may start while the previous
  // kernel on the stream finishes (it waits before touching A, R or C).
  bool pdl = false;
};

// The plan skinny_gemm would use (path is always fused_mma).
LinearPlan plan_skinny(int64_t m, int64_t n, int64_t k, bool with_workspace, const SkinnyOptions& o = {});

void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, cudaStream_t stream,
                 const SkinnyOptions& o = {});
void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, LinearWorkspace& workspace,
                 cudaStream_t stream, const SkinnyOptions& o = {});

}  // namespace kbit
