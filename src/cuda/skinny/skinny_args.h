// Host-side interface of the skinny GEMM kernel (kbit::skinny_gemm): arguments,
// kernel shape and launch. Kept free of CUDA device code so that dispatch code
// compiles with the host compiler.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "kbit/dtype.h"
#include "kbit/skinny.h"

namespace kbit::cuda::detail {

struct SkinnyArgs {
  // TMA descriptors (filled by launch_skinny): W as boxes of 16 * stripes rows x
  // min(kslice, 256) columns; A (when x_vec) as boxes of M rows x the same columns.
  CUtensorMap w_map;
  CUtensorMap x_map;
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
  bool x_vec = false;  // A's rows 16-byte aligned: TMA copies of A (else the consumers read A from global memory)
  bool pdl = false;    // launched with programmatic stream serialization
  // PDL: every CTA of the grid is resident at once (set by launch_skinny_grid), so the CTAs
  // trigger the next kernel at entry; otherwise after their main loop, since early-launched
  // CTAs of the next kernel would take SM room from this grid's later waves. (One-wave grids
  // also get room for their even share of CTAs per SM only: launch_skinny_stream_nt.)
  bool pdl_trigger_at_entry = false;
  int stages = 4;      // SkinnyShape::stages
  int kslice = 256;    // SkinnyShape::kslice
  // Diagnostics (kbit bench skinny-probe; the stream kernel of a KBIT_SKINNY_PROBE build
  // only): when set, lane 0 of every warp writes kSkinnyProbeSlots values at
  // probe[(cta * warps + warp) * kSkinnyProbeSlots] (cta = blockIdx.y * gridDim.x +
  // blockIdx.x): %globaltimer (ns) at its phases, its SM and its batch count (SkinnyProbe).
  unsigned long long* probe = nullptr;
};

inline constexpr int kSkinnyProbeSlots = 8;
// Whether the kernel stamps at all: only in builds configured with -DKBIT_SKINNY_PROBE=ON.
#ifdef KBIT_SKINNY_PROBE
inline constexpr bool kSkinnyProbeBuilt = true;
#else
inline constexpr bool kSkinnyProbeBuilt = false;
#endif
enum SkinnyProbe : int {
  kSkinnyProbeEntry = 0,      // first instruction
  kSkinnyProbeFirstBatch = 1,  // the warp's first batch landed (async loader)
  kSkinnyProbeLoopDone = 2,   // the warp's last MMA issued
  kSkinnyProbeStored = 3,     // out of the reduction; warp 0: C stored (its store instructions issued)
  kSkinnyProbeSm = 4,         // value: %smid
  kSkinnyProbeBatches = 5,    // value: batches of this warp
  kSkinnyProbeWarps = 6,      // value: warps per CTA
};

// Whether a launch of the stream kernel's async loader refills each tile as soon as its
// batch is in registers (EARLY_REFILL, skinny_stream_kernel.cuh): only under PDL, for one
// wave of at least 2 CTAs per SM without a cluster, where the H200 measured it faster
// (Kimi-K3 chained M = 1-8 13.7-13.9 -> 13.0-13.2 us). Isolated calls lost 0.5-0.7 us with it,
// PDL chains of smaller grids 2-10% (Qwen3, 128-256 CTAs) and of clusters up to 20%.
inline bool skinny_early_refill(bool pdl, int splits, int64_t row_groups, int max_ctas_per_sm, int64_t sms) {
  return pdl && splits == 1 && row_groups >= 2 * sms && row_groups <= int64_t(max_ctas_per_sm) * sms;
}

// Kernel shape. n_tiles: tiles of 8 tokens (1, 2, 4; from M). splits: CTAs of one
// thread-block cluster that share a row group's K range (1, 2, 4, 8). The rest per loader:
// tma: warps = consumer warps per CTA (2, 4, 8; one producer warp more), stripes = 16-row
// stripes per CTA (1, 2, 4), stages = shared-memory ring slots (2..8), kslice = columns
// per slot (128, 256, 512). registers / staged / async: warps 4 or 8, stripes 1 (async:
// also 2 with kslice 64), kslice = columns per batch (64 or 128), stages = batches in
// flight per warp (2 or 3 at 64, 2 at 128; async: 2..8 tiles of the warp's ring).
struct SkinnyShape {
  int n_tiles = 1;
  int warps = 4;
  int stripes = 2;
  int stages = 4;
  int kslice = 256;
  int splits = 1;
  SkinnyLoader loader = SkinnyLoader::tma;
};

inline SkinnyShape skinny_shape_of(const SkinnyPlan& p) {
  return {p.n_tiles, p.warps, p.stripes, p.stages, p.kslice, p.splits, p.loader};
}

// Dynamic shared memory of one CTA at M tokens (ring, barriers, reduction); a shape
// needing more than kMaxSkinnySharedBytes (sm_90's 227 KB opt-in limit) is an error.
size_t skinny_shared_bytes(const SkinnyShape& s, int m);
inline constexpr size_t kMaxSkinnySharedBytes = 227 * 1024;

// The streaming kernel's register limit: 16 warps per SM (at most 128 registers per thread).
inline constexpr int kSkinnyStreamWarpsPerSm = 16;
// CTAs of a streaming-kernel shape (not tma) that an SM holds at once: the register limit, and
// the CTAs whose shared memory fits the SM's.
int skinny_stream_resident_ctas(const SkinnyShape& s, int m);

// Throws kbit::Error naming the field when the shape has no instantiation.
void check_skinny_shape(const SkinnyShape& s);
void launch_skinny(const SkinnyArgs& a, const SkinnyShape& s, DType t, cudaStream_t stream);

struct SkinnyKernelInfo {
  int registers = 0;
  int local_bytes = 0;  // spill / stack bytes per thread
  size_t shared_bytes = 0;  // dynamic shared memory per CTA at the queried M
};
// The kernel a launch of shape s at M tokens runs; for the stream kernel also N and pdl,
// which pick its early-refill instance (skinny_early_refill) for some PDL launches.
SkinnyKernelInfo skinny_kernel_info(const SkinnyShape& s, DType t, int m, int64_t n = 0, bool pdl = false);

}  // namespace kbit::cuda::detail
