// kbit::skinny_gemm: checks, plan, and the launch of the fused kernel on dense weights.
#include "kbit/skinny.h"

#include <algorithm>

#include "core/checks.h"
#include "cuda/device_checks.h"
#include "cuda/linear/fused_args.h"
#include "dispatch/linear_configs.h"
#include "dispatch/linear_internal.h"

namespace kbit {
namespace {

constexpr int kDense = 16;
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_view(const TensorView& v, std::string_view what) {
  detail::check_float_view(v, what);
  KBIT_REQUIRE(v.dtype == DType::f16 || v.dtype == DType::bf16, what, ": dtype ", dtype_name(v.dtype),
               " is not supported (expected F16 or BF16)");
  cuda::detail::check_device_pointer(v.data, what);
}

void run(const TensorView& a, const TensorView& w, const MutableTensorView& c, LinearWorkspace* ws, cudaStream_t stream,
         const SkinnyOptions& o) {
  check_view(a, "skinny_gemm A");
  check_view(w, "skinny_gemm W");
  check_view(c, "skinny_gemm C");
  const int64_t m = a.rows, n = w.rows, k = w.cols;
  KBIT_REQUIRE(a.cols == k, "skinny_gemm: A has ", a.cols, " columns but W has K = ", k);
  KBIT_REQUIRE(c.rows == m && c.cols == n, "skinny_gemm: C is [", c.rows, ", ", c.cols, "], expected [", m, ", ", n, "]");
  KBIT_REQUIRE(w.dtype == a.dtype && c.dtype == a.dtype, "skinny_gemm: A, W and C must share one dtype, got ",
               dtype_name(a.dtype), ", ", dtype_name(w.dtype), ", ", dtype_name(c.dtype));
  KBIT_REQUIRE(k % 8 == 0, "skinny_gemm: K = ", k, " must be a multiple of 8");
  KBIT_REQUIRE(m >= 1 && m <= 64, "skinny_gemm: M = ", m, " is outside 1..64 (use cuBLAS for larger M)");
  KBIT_REQUIRE(reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.stride() % 8 == 0,
               "skinny_gemm: W's rows must be 16-byte aligned (pointer ", w.data, ", row stride ", w.stride(), ")");
  if (o.residual.data) {
    check_view(o.residual, "skinny_gemm residual");
    KBIT_REQUIRE(o.residual.rows == m && o.residual.cols == n && o.residual.dtype == a.dtype,
                 "skinny_gemm: residual must be [", m, ", ", n, "] ", dtype_name(a.dtype));
  }
  if (o.bias) cuda::detail::check_device_pointer(o.bias, "skinny_gemm bias");
  if (ws) {
    const auto& lim = ws->limits();
    KBIT_REQUIRE(m <= lim.max_m && n <= lim.max_n, "skinny_gemm: [M=", m, ", N=", n,
                 "] exceeds the workspace limits [", lim.max_m, ", ", lim.max_n, "]");
  }
  const LinearPlan plan = plan_skinny(m, n, k, ws != nullptr, o);
  cuda::detail::FusedArgs f;
  f.dense_w = static_cast<const uint16_t*>(w.data), f.ldw = w.stride();
  f.x = a.data, f.ldx = a.stride();
  f.y = c.data, f.ldy = c.stride();
  f.bias = o.bias;
  f.residual = o.residual.data, f.ldr = o.residual.data ? o.residual.stride() : 0;
  f.M = int(m), f.N = int(n), f.K = int(k);
  f.supertiles = int(ceil_div(k, 128)), f.stripes = int(ceil_div(n, 16));
  f.splits = plan.splits;
  f.supertiles_per_split = int(ceil_div(f.supertiles, f.splits));
  f.tiles = int(ceil_div(m, 8 * plan.n_tiles));
  f.x_vec = reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && a.stride() % 8 == 0;
  f.pdl = o.pdl;
  const bool cta = plan.items == LinearItems::cta;
  f.max_ctas = detail::linear_sm_count() * detail::linear_occupancy(kDense, plan.n_tiles, plan.warps, cta, a.dtype);
  if (plan.splits > 1) {
    auto& impl = ws->impl();
    f.partials = static_cast<float*>(impl.partials.data());
    f.counters = static_cast<unsigned*>(impl.counters.data());
  }
  cuda::detail::launch_fused_dense(f, {plan.n_tiles, plan.warps, cta}, a.dtype, stream);
}

}  // namespace

LinearPlan plan_skinny(int64_t m, int64_t n, int64_t k, bool with_workspace, const SkinnyOptions& o) {
  KBIT_REQUIRE(m > 0 && n > 0 && k > 0, "skinny_gemm: sizes must be positive, got M=", m, " N=", n, " K=", k);
  LinearPlan p;
  const bool forced = o.n_tiles || o.warps || o.splits || o.items != LinearItems::automatic;
  // The tuned table (bits 16 = dense weights); an entry that needs splits is used only with a workspace.
  const detail::LinearConfig* c = forced ? nullptr : detail::find_linear_config(kDense, n, k, m);
  if (c && c->splits > 1 && !with_workspace) c = nullptr;
  p.source = forced ? "forced" : c ? "table" : "heuristic";
  p.n_tiles = o.n_tiles ? o.n_tiles : c ? c->n_tiles : default_n_tiles(m);
  p.warps = o.warps ? o.warps : c ? c->warps : 8;
  p.items = o.items != LinearItems::automatic ? o.items : c ? c->items : LinearItems::cta;
  KBIT_REQUIRE(p.n_tiles == 1 || p.n_tiles == 2 || p.n_tiles == 4 || p.n_tiles == 8,
               "skinny_gemm: n_tiles must be 1, 2, 4 or 8, got ", p.n_tiles);
  KBIT_REQUIRE(p.warps == 4 || p.warps == 8, "skinny_gemm: warps must be 4 or 8, got ", p.warps);
  if (!with_workspace) {
    KBIT_REQUIRE(o.splits <= 1, "skinny_gemm: splits = ", o.splits, " needs a LinearWorkspace");
    KBIT_REQUIRE(p.items == LinearItems::cta, "skinny_gemm: warp items without splits leave K to one warp; pass a "
                                              "workspace or use CTA items");
    p.splits = 1;
    return p;
  }
  p.splits = o.splits ? o.splits
             : c      ? c->splits
                      : detail::linear_heuristic_splits(m, n, k, kDense, p.n_tiles, p.warps,
                                                        p.items == LinearItems::cta, DType::bf16);
  p.splits = detail::normalize_splits(p.splits, k, m, p.n_tiles);
  return p;
}

void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, cudaStream_t stream,
                 const SkinnyOptions& o) {
  run(a, w, c, nullptr, stream, o);
}

void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, LinearWorkspace& workspace,
                 cudaStream_t stream, const SkinnyOptions& o) {
  run(a, w, c, &workspace, stream, o);
}

}  // namespace kbit
