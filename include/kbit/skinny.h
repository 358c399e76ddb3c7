// kbit::skinny_gemm: C[M, N] = A[M, K] @ W[N, K]^T (+ bias) (+ R[M, N]) for small M
// (the decode case; the Kimi-K3 latent projection is N = 7168, K = 3584), 16-bit A,
// W, R and C of one dtype (f16 or bf16), fp32 accumulation, on the caller's stream.
// Two kernels (loaders): a producer warp streams W (evict-first) and A through a ring of
// shared-memory slots with TMA copies (`tma`), or every warp loads its share of W straight
// into registers (`registers`, or `staged` through the warp's own shared-memory tile) or
// with cp.async into the warp's own ring of tiles (`async`);
// warps multiply 16 rows at a time with mma.sync (the tokens are the MMA's narrow side);
// the residual and bias are added in the epilogue. K is
// split among the consumer warps of a CTA and, where
// the grid would be too small, among the CTAs of a thread-block cluster, reduced in
// fixed order through (distributed) shared memory: no workspace, no atomics,
// bit-identical run to run.
//
// Requirements (each a clear kbit::Error): K a multiple of 8; W's rows 16-byte
// aligned; 1 <= M <= kMaxSkinnyM (32); all views on the device. Graph-capturable, no host
// synchronisation; with `pdl` the weight loads start before the previous kernel ends.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "kbit/tensor.h"

namespace kbit {

inline constexpr int64_t kMaxSkinnyM = 32;
// kbit::linear's automatic path on 16-bit weights takes the skinny kernel up to this M
// and cuBLASLt above: at M = 24 and 32 the ring kernel ran at 0.52-0.81x of cuBLAS bf16
// on every dense projection of shapes.json (H200, 2026-12-01), while up to M = 16 the
// streaming kernel beat cuBLAS on all of them.
inline constexpr int64_t kSkinnyPreferredMaxM = 16;

// How the kernel gets W on chip (src/cuda/skinny: skinny_kernel.cuh for tma,
// skinny_stream_kernel.cuh for the others). `automatic`: the tuned table or the heuristic.
enum class SkinnyLoader { automatic, tma, registers, staged, async };
const char* skinny_loader_name(SkinnyLoader l);  // "auto", "tma", "reg", "smem", "async"
SkinnyLoader parse_skinny_loader(const std::string& name);  // throws on an unknown name

// The kernel shape of one call (see src/cuda/skinny/skinny_args.h).
// tma: warps = consumer warps (2, 4, 8), stripes 1, 2, 4, stages = ring slots (2..8),
// kslice = columns per slot (128, 256, 512). registers / staged / async: warps 4 or 8,
// stripes 1 (async: 1, or 2 with 64-column batches), kslice = columns per batch (64 or
// 128), stages = batches in flight per warp (registers, staged: 2 or 3 at 64 columns, 2
// at 128 with M <= 8; async: 2..8 tiles).
struct SkinnyPlan {
  SkinnyLoader loader = SkinnyLoader::tma;
  int n_tiles = 1;   // tiles of 8 tokens: 1, 2 or 4 (from M)
  int warps = 4;     // (consumer) warps per CTA
  int stripes = 2;   // 16-row stripes per CTA
  int stages = 4;    // ring slots (tma) or batches in flight (registers, staged)
  int kslice = 256;  // columns per slot (tma) or per batch (64)
  int splits = 1;    // CTAs per cluster sharing K: 1, 2, 4 or 8
  const char* source = "heuristic";  // "table", "heuristic" or "forced"
  std::string describe() const;      // "w=4,r=2,p=4,c=256,s=1", "l=reg,w=4,r=1,p=2,c=64,s=1"
};

struct SkinnyOptions {
  TensorView residual{};       // [M, N]; data null for none (may equal C)
  const void* bias = nullptr;  // [N] or null
  // Kernel overrides (0 / automatic: the tuned table, else the heuristic).
  SkinnyLoader loader = SkinnyLoader::automatic;
  int warps = 0, stripes = 0, stages = 0, kslice = 0, splits = 0;
  // Programmatic dependent launch: the weight loads may start while the previous
  // kernel on the stream finishes (the kernel waits before touching A, R or C).
  bool pdl = false;
};

// The plan skinny_gemm would use; throws on an override that is not instantiated.
SkinnyPlan plan_skinny(int64_t m, int64_t n, int64_t k, const SkinnyOptions& o = {});

void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, cudaStream_t stream,
                 const SkinnyOptions& o = {});

}  // namespace kbit
