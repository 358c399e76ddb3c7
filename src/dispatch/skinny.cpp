// kbit::skinny_gemm: checks, plan (tuned table or heuristic) and launch of the
// skinny kernel (src/cuda/skinny).
#include "kbit/skinny.h"

#include <algorithm>

#include "core/checks.h"
#include "core/enum_names.h"
#include "kbit/cuda.h"
#include "cuda/device_checks.h"
#include "cuda/skinny/skinny_args.h"
#include "dispatch/linear_configs.h"
#include "dispatch/linear_internal.h"

namespace kbit {
namespace {

constexpr int kDense = 16;  // the table's bit width for dense 16-bit weights
unsigned long long* skinny_probe_buffer = nullptr;  // detail::set_skinny_probe

int tiles_for(int64_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : 4; }

}  // namespace

namespace {
constexpr detail::EnumNames<SkinnyLoader, 5> kLoaderNames{
    "skinny loader",
    {{{SkinnyLoader::automatic, "auto"}, {SkinnyLoader::tma, "tma"}, {SkinnyLoader::registers, "reg"},
      {SkinnyLoader::staged, "smem"}, {SkinnyLoader::async, "async"}}}};
}  // namespace

void detail::set_skinny_probe(unsigned long long* probe) { skinny_probe_buffer = probe; }
bool detail::skinny_probe_built() { return cuda::detail::kSkinnyProbeBuilt; }

const char* skinny_loader_name(SkinnyLoader l) { return kLoaderNames.name(l).data(); }  // literals: terminated
SkinnyLoader parse_skinny_loader(const std::string& name) { return kLoaderNames.parse(name); }

std::string SkinnyPlan::describe() const {
  // The ring kernel's names stay as they were before the streaming kernel existed.
  return (loader == SkinnyLoader::tma ? std::string() : "l=" + std::string(skinny_loader_name(loader)) + ",") +
         "w=" + std::to_string(warps) + ",r=" + std::to_string(stripes) + ",p=" + std::to_string(stages) +
         ",c=" + std::to_string(kslice) + ",s=" + std::to_string(splits);
}

SkinnyPlan plan_skinny(int64_t m, int64_t n, int64_t k, const SkinnyOptions& o) {
  KBIT_REQUIRE(m > 0 && n > 0 && k > 0, "skinny_gemm: sizes must be positive, got M=", m, " N=", n, " K=", k);
  KBIT_REQUIRE(m <= kMaxSkinnyM, "skinny_gemm: M = ", m, " is outside 1..", kMaxSkinnyM, " (use cuBLAS for larger M)");
  SkinnyPlan p;
  p.n_tiles = tiles_for(m);
  const bool forced =
      o.loader != SkinnyLoader::automatic || o.warps || o.stripes || o.stages || o.kslice || o.splits;
  // An entry tuned for another token-tile count does not apply (a PDL request then falls
  // back to the plain entries).
  const detail::LinearConfig* c =
      forced ? nullptr
             : detail::find_linear_config(kDense, n, k, m, o.pdl,
                                          [&](const detail::LinearConfig& e) { return e.n_tiles == p.n_tiles; });
  p.source = forced ? "forced" : c ? "table" : "heuristic";
  // Planning without a GPU (host tests) assumes the H200's 132 SMs.
  const int64_t sms = cuda::device_available() ? detail::linear_sm_count() : 132;
  // Untuned default: the streaming kernel's async loader up to M = 16 (H200, commit
  // 8c06927, N = 7168, K = 3584: 15.2 / 16.1 / 19.9 us at M = 1 / 8 / 16 against the ring's
  // 17.4 / 18.1-19.1 / 20.0), the ring above, and at M = 9-16 on weights of 48 M elements
  // or more, where the ring's 32-row CTAs share A better (dense projections at e6fa8bc
  // against 4604268, M = 16: glm47 q 46.9 against 36.4 us, o 42.3 / 40.9, shared_gu
  // 71.7 / 68.5; below 48 M the async loader was as fast or faster: Kimi 19.7 / 20.0).
  const bool large_at_two_tiles = p.n_tiles == 2 && n * k >= int64_t(48) << 20;
  const SkinnyLoader fallback = p.n_tiles <= 2 && !large_at_two_tiles ? SkinnyLoader::async : SkinnyLoader::tma;
  p.loader = o.loader != SkinnyLoader::automatic ? o.loader : c ? c->loader : fallback;
  const bool ring = p.loader == SkinnyLoader::tma, async = p.loader == SkinnyLoader::async;
  // The ring's default (the H200 sweep over N = 7168, K = 3584, commit 22abcfa: the best
  // shapes at M = 1, 8, 16 are all 3 slots of 256 columns): 4 consumer warps, 32 rows per
  // CTA where that still gives every SM a CTA, else 16. The streaming kernel's: 4 warps, 16
  // rows; async: rings of two 128-column tiles (the best at M = 1, 8 and 16, 8c06927);
  // registers and staged: two 64-column batches in flight.
  p.warps = o.warps ? o.warps : c ? c->warps : 4;
  p.stripes = o.stripes ? o.stripes : c ? c->stripes : ring && (n + 31) / 32 >= sms ? 2 : 1;
  p.stages = o.stages ? o.stages : c ? c->stages : ring ? 3 : 2;
  p.kslice = o.kslice ? o.kslice : c ? c->kslice : ring ? 256 : async ? 128 : 64;
  // The unit that a split must not leave empty: a 32-column step (ring) or a batch
  // (streaming kernel).
  const int64_t unit = ring ? 32 : p.kslice, k_steps = (k + unit - 1) / unit;
  if (o.splits || c) {
    p.splits = o.splits ? o.splits : c->splits;
    cuda::detail::check_skinny_shape(cuda::detail::skinny_shape_of(p));  // a bad request is an error before it is trimmed
  } else {
    // Split K over a cluster until the grid covers every SM, keeping at least two ring
    // slots of columns per split (two batches per warp in the streaming kernel).
    const int64_t groups = (n + 16 * p.stripes - 1) / (16 * p.stripes);
    auto room = [&] { return ring ? k >= int64_t(2) * p.kslice * 2 * p.splits : k >= int64_t(2) * p.kslice * p.warps * 2 * p.splits; };
    while (p.splits < 8 && groups * p.splits < sms && room()) p.splits *= 2;
  }
  // Never an empty split: each CTA of a cluster needs at least one step (batch).
  while (p.splits > 1 && p.splits > k_steps) p.splits /= 2;
  cuda::detail::check_skinny_shape(cuda::detail::skinny_shape_of(p));
  return p;
}

void skinny_gemm(const TensorView& a, const TensorView& w, const MutableTensorView& c, cudaStream_t stream,
                 const SkinnyOptions& o) {
  detail::check_activation(a, "skinny_gemm A");
  detail::check_activation(w, "skinny_gemm W");
  detail::check_activation(c, "skinny_gemm C");
  const int64_t m = a.rows, n = w.rows, k = w.cols;
  KBIT_REQUIRE(a.cols == k, "skinny_gemm: A has ", a.cols, " columns but W has K = ", k);
  KBIT_REQUIRE(c.rows == m && c.cols == n, "skinny_gemm: C is [", c.rows, ", ", c.cols, "], expected [", m, ", ", n, "]");
  KBIT_REQUIRE(w.dtype == a.dtype && c.dtype == a.dtype, "skinny_gemm: A, W and C must share one dtype, got ",
               dtype_name(a.dtype), ", ", dtype_name(w.dtype), ", ", dtype_name(c.dtype));
  KBIT_REQUIRE(k % 8 == 0, "skinny_gemm: K = ", k, " must be a multiple of 8");
  KBIT_REQUIRE(m >= 1 && m <= kMaxSkinnyM, "skinny_gemm: M = ", m, " is outside 1..", kMaxSkinnyM,
               " (use cuBLAS for larger M)");
  KBIT_REQUIRE(n < (int64_t(1) << 31) && k < (int64_t(1) << 31), "skinny_gemm: N and K must be below 2^31");
  KBIT_REQUIRE(reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && w.stride() % 8 == 0,
               "skinny_gemm: W's rows must be 16-byte aligned (pointer ", w.data, ", row stride ", w.stride(), ")");
  KBIT_REQUIRE(reinterpret_cast<uintptr_t>(a.data) % 2 == 0 && reinterpret_cast<uintptr_t>(c.data) % 2 == 0,
               "skinny_gemm: A and C must be 2-byte aligned");
  detail::check_epilogue(o.residual, o.bias, m, n, a.dtype, "skinny_gemm");
  const SkinnyPlan plan = plan_skinny(m, n, k, o);
  cuda::detail::SkinnyArgs s;
  s.w = static_cast<const uint16_t*>(w.data), s.ldw = w.stride();
  s.x = a.data, s.ldx = a.stride();
  s.y = c.data, s.ldy = c.stride();
  s.bias = o.bias;
  s.residual = o.residual.data, s.ldr = o.residual.data ? o.residual.stride() : 0;
  s.M = int(m), s.N = int(n), s.K = int(k);
  s.x_vec = reinterpret_cast<uintptr_t>(a.data) % 16 == 0 && a.stride() % 8 == 0;
  s.pdl = o.pdl;
  s.probe = skinny_probe_buffer;
  cuda::detail::launch_skinny(s, cuda::detail::skinny_shape_of(plan), a.dtype, stream);
}

}  // namespace kbit
