// Mixture-of-experts routing (issue 5): from router logits [T, E] pick top_k experts
// per token, weight them, and lay the (token, slot) pairs out in expert order so that
// a grouped GEMM can run every expert's rows at once.
//
// Conventions, shared by the CPU reference and the GPU kernels so that selections,
// offsets and permutations agree exactly:
// - pair p = t * top_k + slot; slots in order of decreasing logit, ties to the lower
//   expert id; NaN and +inf logits are errors, -inf masks an expert (each token needs
//   one finite logit).
// - weights: RoutingMode::topk_softmax (Qwen3-MoE "norm_topk_prob"): softmax over the
//   top_k selected logits, summing to 1; RoutingMode::softmax_topk: softmax over all E
//   logits, the selected probabilities not renormalised.
// - expert order: expert e's rows are [offsets[e], offsets[e + 1]); inside an expert,
//   pairs in increasing p (a stable counting sort). sorted_pair[row] = p, pair_row[p] = row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kbit/linear.h"
#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit {

enum class RoutingMode : uint8_t { topk_softmax, softmax_topk };
std::string_view routing_mode_name(RoutingMode m);

inline constexpr int kMaxTopK = 32;
inline constexpr int64_t kMaxExperts = 1024;  // the GPU selection keeps E / 32 logits per lane

struct Routing {
  int64_t tokens = 0, experts = 0;
  int top_k = 0;
  std::vector<int32_t> expert;       // [T * top_k] selected expert of pair p
  std::vector<float> weight;         // [T * top_k] its weight
  std::vector<int32_t> offsets;      // [E + 1]
  std::vector<int32_t> sorted_pair;  // [T * top_k] pair of each expert-ordered row
  std::vector<int32_t> pair_row;     // [T * top_k] row of each pair
};

// Throws kbit::Error naming the problem (T < 0, E outside 1..kMaxExperts, top_k outside
// 1..min(E, kMaxTopK)).
void check_routing_shape(int64_t tokens, int64_t experts, int top_k);

namespace cpu {

// The reference routing of fp32 logits [T, E] (row-major); fp64 softmax.
Routing route(const float* logits, int64_t tokens, int64_t experts, int top_k, RoutingMode mode);

// Offsets and the stable expert-order permutation of given selections (expert[p] for
// p < pairs), the second half of route(); exposed for tests and fixed routings.
void order_by_expert(Routing& r);

}  // namespace cpu

// A routing on the device: caller-owned int32 / fp32 buffers of the sizes in Routing.
struct DeviceRouting {
  int32_t* expert = nullptr;       // [T * top_k]
  float* weight = nullptr;         // [T * top_k]
  int32_t* offsets = nullptr;      // [E + 1]
  int32_t* sorted_pair = nullptr;  // [T * top_k]
  int32_t* pair_row = nullptr;     // [T * top_k]
};

namespace cuda {

// route(): the same selection, offsets and permutation as cpu::route, bit for bit;
// weights in fp32 (within a few ulps of the reference). Two launches (one warp per
// token selects; one CTA counts and orders, deterministically, no atomics on global
// memory), no host synchronisation, graph-capturable. The GPU cannot throw on bad
// logits: NaN counts as -inf, and a token whose logits are all -inf gets weight 0.
void route(const float* logits, int64_t tokens, int64_t experts, int top_k, RoutingMode mode,
           const DeviceRouting& out, cudaStream_t stream);

// x_sorted[row] = x[sorted_pair[row] / top_k] for rows of x (f16/bf16/f32, same dtype).
void gather_rows(const TensorView& x, const int32_t* sorted_pair, int top_k, const MutableTensorView& x_sorted,
                 cudaStream_t stream);

// y[t] (+)= sum over slots s in order of weight[t, s] * expert_out[pair_row[t * top_k + s]],
// fp32 accumulation; y and expert_out of one dtype; accumulate adds to y's contents.
void combine(const TensorView& expert_out, const DeviceRouting& r, int top_k, const MutableTensorView& y,
             bool accumulate, cudaStream_t stream);

// h[r, i] = silu(gu[r, i]) * gu[r, I + i] for gu [R, 2I] (gate columns, then up), f16/bf16.
void swiglu(const TensorView& gate_up, const MutableTensorView& h, cudaStream_t stream);

}  // namespace cuda

// ExpertLinearOptions::tile_rows: tiles sized per expert (1 row for experts with one, 2 for
// two, 4 for three or more), so that no expert is read twice for a few rows and none runs
// a tile larger than it needs.
inline constexpr int kTileRowsByExpert = -1;

struct ExpertLinearOptions {
  // automatic: the grouped GEMV for decode-sized inputs (at most kGroupedGemvMaxRows rows,
  // when its bounds fit the workspace and shared memory), the fused kernel otherwise, and
  // on Hopper the tile kernels (wgmma_tile items) for prefill-sized experts;
  // gemv or fused_mma force one (gemv fails clearly when it does not fit).
  LinearPath path = LinearPath::automatic;
  // Grouped GEMV: rows per tile, 1, 2 or 4, or kTileRowsByExpert (each expert's rows in tiles
  // of 1, 2 or 4 by its row count); 0: from the rows per expert.
  int tile_rows = 0;
  // Fused and tile kernel overrides (0: from the rows per expert): n_tiles 1, 2, 4 or 8
  // (wgmma_tile 8, 16 or 32 token tiles of 8 rows), warps 4 or 8.
  int n_tiles = 0, warps = 0;
  LinearItems items = LinearItems::automatic;
  bool pdl = false;  // programmatic dependent launch (the kernel waits before reading the offsets)
};

// Every expert's y_e = x_e W_e^T in one launch (up to kGroupedGemvMaxRows rows the
// CUDA-core GEMV in grouped mode, above that kbit::linear's fused kernel, grouped):
// x_sorted [P, K] and y_sorted [P, N] hold the rows in expert order, expert e owning
// rows [expert_offsets[e], expert_offsets[e + 1]) (device int32 [experts + 1], e.g.
// from cuda::route). w_stacked is the experts' weights as one quantized matrix
// [experts * N, K] in the mma16 layout (N a multiple of 16; one codebook and tensor
// scale for all experts); a rotation it carries is applied to x first (P <= the
// workspace's max_m then). Work is scheduled only for the token tiles of non-empty
// experts; no host synchronisation; graph-capturable; bit-identical run to run.
// Checked against the CPU reference on the H200 (tests/cuda/moe_gpu_test.cpp); speed in
// BENCHMARKS.md (GLM-4.7 decode, k = 4: 2.5-3.6x cuBLAS's grouped bf16 GEMM).
inline constexpr int64_t kGroupedGemvMaxRows = 256;  // T = 32 decode tokens at top-8, 25 at top-10
void expert_linear(const TensorView& x_sorted, const QuantizedMatrix& w_stacked, int64_t experts,
                   const int32_t* expert_offsets, const MutableTensorView& y_sorted, LinearWorkspace& ws,
                   cudaStream_t stream, const ExpertLinearOptions& o = {});

// A MoE feed-forward block's weights (device, mma16): per expert, gate_up holds the
// gate rows [0, I) then the up rows [I, 2I) of a [2I, H] projection, all experts
// stacked into [E 2I, H]; down is [E H, I]. The shared expert (optional) is one
// [2Is, H] gate_up and one [H, Is] down projection.
struct MoeWeights {
  const QuantizedMatrix* gate_up = nullptr;
  const QuantizedMatrix* down = nullptr;
  int64_t experts = 0;
  const QuantizedMatrix* shared_gate_up = nullptr;
  const QuantizedMatrix* shared_down = nullptr;
};

struct MoeOptions {
  int top_k = 8;
  RoutingMode routing = RoutingMode::topk_softmax;
};

// Device scratch of moe_forward for up to max_tokens tokens: the routing, the
// expert-ordered rows at every stage, and a LinearWorkspace. Allocated once.
class MoeWorkspace {
 public:
  struct Limits {
    int64_t max_tokens = 16;
    int64_t hidden = 0;              // H
    int64_t intermediate = 0;        // I (per expert)
    int64_t experts = 0;
    int top_k = 8;
    int64_t shared_intermediate = 0;  // Is, 0 without a shared expert
  };
  explicit MoeWorkspace(const Limits& limits);
  ~MoeWorkspace();
  MoeWorkspace(const MoeWorkspace&) = delete;
  MoeWorkspace& operator=(const MoeWorkspace&) = delete;
  const Limits& limits() const { return limits_; }
  DeviceRouting routing();  // of the last call (for tests and inspection)

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  Limits limits_;
  std::unique_ptr<Impl> impl_;
};

// y[T, H] = sum over the top_k experts e of token t of weight * down_e(swiglu(gate_up_e(x_t)))
// (+ the shared expert's down(swiglu(gate_up(x_t))) when given), from router logits
// [T, E] (fp32, device). Launches: route, gather, grouped gate+up, SwiGLU, grouped
// down, combine (+ shared expert: gate+up, SwiGLU, down before the combine); at decode
// sizes (T x top_k <= kGroupedGemvMaxRows) the gather and SwiGLU fold into the GEMVs'
// activation staging (4 launches, 6 with the shared expert). No host synchronisation,
// graph-capturable. H200, GLM-4.7, k = 4, one decode token: 56.5 us, 1.30x its two
// grouped GEMMs (1.16x with the shared expert; BENCHMARKS.md).
void moe_forward(const TensorView& x, const float* router_logits, const MoeWeights& w, const MutableTensorView& y,
                 MoeWorkspace& ws, cudaStream_t stream, const MoeOptions& o = {});

}  // namespace kbit
