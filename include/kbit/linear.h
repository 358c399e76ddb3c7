// kbit::linear: y[M, N] = x[M, K] @ W^T (+ bias) (+ residual) with W a kbit matrix
// on the GPU, on the caller's stream. x and y are f16 or bf16 (y in x's dtype),
// accumulation is fp32. Calls never synchronize the host, never allocate device
// memory (a LinearWorkspace is sized once), can be captured in a CUDA graph, and
// give bit-identical results run to run.
//
// Paths (LinearPath), chosen by M, shape, bit width and GPU (see plan_linear):
//   gemv            CUDA-core GEMV for M = 1..4 (W in the mma16 layout): one
//                   packed-fp16 lookup and one HFMA2 per pair of weights and token;
//   fused_mma       dequantize + mma.sync in one kernel (W in the mma16 layout);
//                   every M, best for small batches;
//   dequant_cublas  dequantize W into the workspace, then cuBLASLt (prefill).
// When W carries a Hadamard rotation, x is rotated first (a separate kernel into
// the workspace).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit {

enum class LinearPath : uint8_t { automatic, fused_mma, dequant_cublas, gemv };
std::string_view linear_path_name(LinearPath p);
LinearPath parse_linear_path(std::string_view name);  // "auto", "gemv", "fused_mma", "dequant_cublas"

// How the fused kernel hands out its work items (16-row stripe, K split, token tile):
// to whole CTAs whose warps share each item (cta), to single warps (warp), or to whole
// CTAs as one adjacent stripe per warp, the warps sharing the activations through
// shared memory (stripes: x read once per CTA instead of once per warp, for M >= 9), or
// as stripes items of one warpgroup (4 warps, n_tiles 4 or 8: M >= 17) that multiply with
// Hopper's wgmma.mma_async, the tensor cores reading x from shared memory (wgmma; sm_90a).
// cta_shuffle: cta items whose decode takes each weight's level by warp shuffle instead of
// from a shared-memory pair table (k >= 3; the same as cta at k = 2): no table to build,
// for CTAs with only a few supertiles of work (small K); n_tiles 1 or 2.
// wgmma_tile: a separate tile kernel (sm_90a) for M from 64 up: CTA tiles of `warps`
// stripes x 64 or 128 tokens (n_tiles 8 or 16), W decoded into shared memory and both
// wgmma.mma_async operands read from there; n_tiles 32: 8 stripes x 256 tokens with the
// decode in warps of its own (warp-specialised, no K splits); no grouped (expert_linear) mode.
// wgmma_stream: the tile kernel (n_tiles 8, 16, or 32: the warp-specialised one) with
// stream-K work: the tiles' whole K work cut evenly over the persistent CTAs (so a CTA may
// finish one tile's K and start the next's), the cut tiles' fp32 partials summed in K order;
// no splits, no grouped mode. n_tiles 32 needs a workspace with max_m > 64. With n_tiles 8 or 16
// and 16 warps, a warp-specialised kernel: 8 warps decode (one stripe each) and two warpgroups
// only issue wgmma (8 warps: all of them decode, then multiply).
enum class LinearItems : uint8_t { automatic, cta, warp, stripes, wgmma, cta_shuffle, wgmma_tile, wgmma_stream };
std::string_view linear_items_name(LinearItems i);
// "auto", "cta", "warp", "stripes", "wgmma", "cta_shuffle", "wgmma_tile", "wgmma_stream"
LinearItems parse_linear_items(std::string_view name);

// What runs for one call. n_tiles, warps, splits and items describe the fused kernel.
struct LinearPlan {
  LinearPath path = LinearPath::fused_mma;
  int n_tiles = 1;  // tokens per item / 8: 1, 2, 4 or 8 (wgmma_tile: 8, 16 or 32)
  int warps = 4;    // warps per CTA: 4 or 8; wgmma_stream n_tiles 8, 16 also 16 (8 decode + 8 MMA warps)
  int splits = 1;   // items per 16-row stripe along K
  LinearItems items = LinearItems::cta;
  // dequant_cublas: which of cuBLASLt's heuristic candidates runs the GEMM (0: its first choice;
  // kbit tune times them and the table keeps the fastest).
  int gemm_algo = 0;
  std::string source;  // "table", "heuristic" or "forced"
  std::string describe() const;
};

struct LinearOptions {
  const void* bias = nullptr;  // [N], x's dtype, device; null for none
  TensorView residual{};       // [M, N], x's dtype, device; data null for none (may equal y)
  LinearPath path = LinearPath::automatic;
  // Fused-kernel overrides (0 / automatic: from the tuned table or the heuristic).
  int n_tiles = 0, warps = 0, splits = 0;
  LinearItems items = LinearItems::automatic;
  // dequant_cublas: the cuBLASLt heuristic candidate to run (0..7; -1: the tuned table's, else 0). A forced
  // index that cuBLASLt does not offer for the problem is an error; a table's falls back to 0.
  int gemm_algo = -1;
  // Programmatic dependent launch of the GEMV and fused kernels: they load weights (and
  // build their tables) before waiting for the previous kernel. Safe after any kernel.
  bool pdl = false;
  // false: plan as if no tuned table had an entry (the heuristic's plan), to see what tuning buys
  // (kbit bench's kbit_linear_untuned backend).
  bool tuned = true;
};

// Device scratch for kbit::linear: split-K partials and counters, the rotated
// activations, (on Hopper) the tile kernels' partial tiles (max_m > 64: two waves of the
// 256-token kernel's 128 KB tiles, 34 MB on an H200; max_m 17..64: two stream-K slots of up
// to 64 KB per SM, 17 MB), and (for the dequant_cublas path) a
// 16-bit copy of the largest W plus cuBLASLt's workspace. Allocated once here; one
// workspace per stream.
class LinearWorkspace {
 public:
  struct Limits {
    int64_t max_m = 64;
    int64_t max_n = 0;
    int64_t max_k = 0;
    bool dequant_path = true;  // reserve max_n * max_k 16-bit elements for large M
  };
  explicit LinearWorkspace(const Limits& limits);
  ~LinearWorkspace();
  LinearWorkspace(const LinearWorkspace&) = delete;
  LinearWorkspace& operator=(const LinearWorkspace&) = delete;

  const Limits& limits() const { return limits_; }
  size_t device_bytes() const;

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Limits limits_;
  std::unique_ptr<Impl> impl_;
};

// The fused kernel's default token tile for M: n_tiles = 1, 2, 4 or 8 (8 tokens each).
int default_n_tiles(int64_t m);
// wgmma items (one warpgroup) take 32 or 64 tokens per tile: default_n_tiles, at least 4.
int wgmma_n_tiles(int64_t m);

// The plan kbit::linear uses for these sizes on the current GPU (no GPU work).
LinearPlan plan_linear(int64_t m, int64_t n, int64_t k, int bits, const LinearOptions& options = {});

// W must be a device matrix in the mma16 layout (cuda::repack(q, Layout::mma16)),
// except that the dequant_cublas path also takes flat and tiled_k64.
void linear(const TensorView& x, const QuantizedMatrix& w, const MutableTensorView& y, LinearWorkspace& workspace,
            cudaStream_t stream, const LinearOptions& options = {});

// The same for an unquantized 16-bit W[N, K] (x's dtype): kbit::skinny_gemm's kernel
// for M <= kSkinnyPreferredMaxM (16) with path automatic, and up to kMaxSkinnyM (32) where
// cuBLASLt cannot run (no dequant_path scratch, strided operands) or with path
// fused_mma; cuBLASLt above (or with path
// dequant_cublas, which then needs a workspace created with dequant_path for
// cuBLASLt's scratch). Bias, residual and pdl as above; n_tiles, splits and items
// do not apply.
void linear(const TensorView& x, const TensorView& w, const MutableTensorView& y, LinearWorkspace& workspace,
            cudaStream_t stream, const LinearOptions& options = {});

}  // namespace kbit
