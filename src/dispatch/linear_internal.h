// kbit::linear's internals shared inside src/dispatch (workspace, plan helpers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "cuda/linear/dequant_operand.h"
#include "cuda/linear/fused_args.h"
#include "cuda/linear/gemv_args.h"
#include "dispatch/cublas_gemm.h"
#include "kbit/linear.h"

namespace kbit {

struct LinearWorkspace::Impl {
  Buffer partials, counters, rotated, dequant, lt_workspace;
  int64_t partial_floats = 0, counter_count = 0;
  Buffer tile_partials;  // the 256-token tile kernel's split tail tiles (max_m > 64 on Hopper)
  int64_t tile_partial_slots = 0;
  Buffer gemv_pieces, gemv_counters;  // the GEMV's split-stripe partial sums and per-stripe counters
  int64_t gemv_piece_floats = 0, gemv_counter_count = 0;
  // (M, N, K, dtype, residual, bias, cuBLASLt candidate)
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool, bool, int>, std::unique_ptr<detail::LtGemm>> gemms;
};

namespace detail {

inline constexpr int64_t kMaxPartialRows = 256;  // splits * padded tokens, bounds the partials workspace

cuda::detail::FusedItems fused_items(LinearItems items);  // automatic -> cta
int linear_occupancy(int bits, int n_tiles, int warps, LinearItems items, DType t);
int linear_sm_count();
// A 16-bit (F16/BF16) activation view on the device; throws naming `what`.
void check_activation(const TensorView& v, std::string_view what);
// The optional epilogue operands of an [m, n] output of dtype t: residual [m, n] of t,
// bias a 2-byte-aligned device pointer. `who` prefixes the messages.
void check_epilogue(const TensorView& residual, const void* bias, int64_t m, int64_t n, DType t, std::string_view who);
// x rotated by W's rotation into the workspace (x itself when W has none).
TensorView rotated_activations(const TensorView& x, const QuantizedMatrix& w, LinearWorkspace& ws, cudaStream_t stream);
// y = x W^T (+ residual) (+ bias) by cuBLASLt on contiguous 16-bit operands, the plan
// cached in the workspace per shape; needs the workspace's cuBLASLt scratch. algo: cuBLASLt's
// heuristic candidate (LinearPlan::gemm_algo); one it does not offer is an error if forced, else 0.
void run_lt_gemm(LinearWorkspace& ws, const TensorView& x, const void* w, const MutableTensorView& y,
                 const void* residual, const void* bias, cudaStream_t stream, int algo = 0, bool algo_forced = false);
// W (mma16, on the device) dequantized into out ([N, K], F16 or BF16, 16-byte aligned rows
// where possible) as the GEMM operand of the dequant_cublas path: the fused kernels' decoded
// values (codebook and block scale in out's type, one rounding of their product).
void dequantize_operand(const QuantizedMatrix& w, const MutableTensorView& out, cudaStream_t stream);
// The GEMV's arguments for W (mma16) and x, y: pointers, sizes, geometry, the normalised
// codebook and the workspace's split-stripe buffers.
cuda::detail::GemvArgs gemv_args(const QuantizedMatrix& w, const TensorView& x, const MutableTensorView& y,
                                 LinearWorkspace& ws);
// Diagnostics (kbit bench gemv-probe): while set, every GemvArgs that gemv_args builds
// carries this buffer as its probe ([SMs x kGemvWarps][kGemvProbeSlots] values); null: off.
// Process-wide and not synchronised: for a single-threaded diagnostic tool only.
void set_gemv_probe(unsigned long long* probe);
// Diagnostics (kbit bench skinny-probe): while set, every skinny_gemm call on the stream
// kernel carries this buffer as SkinnyArgs::probe (kSkinnyProbeSlots per warp of the grid);
// null: off. Process-wide and not synchronised, like set_gemv_probe.
void set_skinny_probe(unsigned long long* probe);
// Whether the skinny stream kernel was built with its stamps (-DKBIT_SKINNY_PROBE=ON).
bool skinny_probe_built();
// The grouped GEMV's sizes for these arguments (a.expert_offsets, experts, tile_rows set).
cuda::detail::GemvGroupedPlan plan_grouped_gemv(int bits, const cuda::detail::GemvArgs& a);
// How a GEMV stages x from a source other than its own rows (kbit::moe_forward's
// fusions): row r from source row gather[r] / gather_div; with swiglu the source holds
// [gate | up] halves of K columns and the GEMV reads silu(gate) * up, as cuda::swiglu.
struct GemvInput {
  const int32_t* gather = nullptr;
  int gather_div = 1;
  bool swiglu = false;
};
// gemv_args for y.rows rows of x staged from `source` by `in` (checks that the source's
// shape gives those rows).
cuda::detail::GemvArgs staged_gemv_args(const QuantizedMatrix& w, const TensorView& source, const GemvInput& in,
                                        const MutableTensorView& y, LinearWorkspace& ws);
// expert_linear by the grouped GEMV (y.rows rows), x staged from `source` by `in`;
// tile_rows 0 picks it from the rows per expert. False, nothing launched, when its
// bounds do not fit the workspace or shared memory, or W carries a rotation and `in`
// transforms x (the rotation would have to apply after the transform).
bool try_grouped_gemv(const TensorView& source, const GemvInput& in, const QuantizedMatrix& w, int64_t experts,
                      const int32_t* expert_offsets, const MutableTensorView& y, LinearWorkspace& ws,
                      cudaStream_t stream, int tile_rows = 0, bool pdl = false);
// kbit::linear without bias or residual by the dense GEMV, x staged from `source` by
// `in`, when plan_linear takes the GEMV for these sizes (force: whenever the GEMV
// supports them); false, nothing launched, otherwise.
bool try_dense_gemv(const TensorView& source, const GemvInput& in, const QuantizedMatrix& w,
                    const MutableTensorView& y, LinearWorkspace& ws, cudaStream_t stream, bool force = false);
// The fused kernel's arguments for W (mma16) and x, y: pointers, sizes, geometry.
cuda::detail::FusedArgs fused_args(const QuantizedMatrix& w, const TensorView& x, const MutableTensorView& y);

// Whether the CUDA-core GEMV takes (M, K) at this bit width (M <= 4, x fits in shared memory).
bool gemv_supports(int64_t m, int64_t k, int bits);
// Whether the automatic plan takes the GEMV for (M, N, K, k): supported and measured faster.
bool gemv_preferred(int64_t m, int64_t n, int64_t k, int bits);
// The GEMV's instantiation for a bit width (2..5).
void launch_gemv(int bits, const cuda::detail::GemvArgs& a, DType t, cudaStream_t stream);

// The fused kernel's instantiation for a bit width (2..5).
void launch_fused(int bits, const cuda::detail::FusedArgs& a, const cuda::detail::FusedShape& s, DType t,
                  cudaStream_t stream);
// `requested` splits made valid: 1..supertiles, none empty, and no more partial rows
// (splits x padded tokens) than the workspace holds.
int normalize_splits(int requested, int64_t k, int64_t m, int n_tiles);
// The fused kernel's output items: 16-row stripes x token tiles of 8 * n_tiles tokens.
int64_t fused_output_items(int64_t m, int64_t n, int n_tiles);
int linear_heuristic_splits(int64_t m, int64_t n, int64_t k, int bits, int n_tiles, int warps, LinearItems items, DType t);

}  // namespace detail
}  // namespace kbit
