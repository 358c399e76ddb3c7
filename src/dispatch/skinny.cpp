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
  // Untuned default: the streaming kernel's async loader up to M = 16 with 4 warps and
  // rings of two tiles, the TMA ring above. Tile width: 128 columns at one token tile. At two
  // token tiles a 128-column ring of 4 warps takes 64 KB per CTA, three CTAs per SM, so 64 columns
  // where the grid would not fit in one wave (Kimi-K3's 448 CTAs: two waves) or where a warp
  // would get fewer than 8 batches of 128 columns (a short pipeline), and 64 with two stripes
  // (32-row CTAs, half the A traffic per byte of W) on weights of 48 M elements or more, where
  // the ring used to run. Measured on an H100, which has no tuned entries (2026-12-05, every
  // dense projection at M = 9 and 16 against the former 128 columns and the ring on large W,
  // two rounds; bench/results/h100-ab-skinny-untuned-tiles-session66.txt): 0.73x the time on
  // Kimi-K3 (19.3-19.5 us against 26.5-26.9; cuBLAS addmm 20.4-20.6), 0.86-0.90x on Qwen3's
  // K = 512 and N = 512 shapes, 0.95-0.97x on glm47 q / o / shared_dn; glm47 moe_gu (ten 128-column
  // batches per warp) was 5% slower with 64, so it keeps 128. At one token tile 64 columns were
  // 3% slower by geomean (up to 9%). The H200's tuned entries at M = 9-16 are all 64 columns.
  const SkinnyLoader fallback = p.n_tiles <= 2 ? SkinnyLoader::async : SkinnyLoader::tma;
  p.loader = o.loader != SkinnyLoader::automatic ? o.loader : c ? c->loader : fallback;
  const bool ring = p.loader == SkinnyLoader::tma, async = p.loader == SkinnyLoader::async;
  // The ring's default (the H200 sweep over N = 7168, K = 3584, commit 22abcfa: the best
  // shapes at M = 1, 8, 16 are all 3 slots of 256 columns): 4 consumer warps, 32 rows per
  // CTA where that still gives every SM a CTA, else 16. Registers and staged: two 64-column
  // batches in flight.
  const bool wide_groups = (n + 31) / 32 >= sms;
  const bool large_at_two_tiles = async && p.n_tiles == 2 && n * k >= int64_t(48) << 20 && wide_groups;
  p.warps = o.warps ? o.warps : c ? c->warps : 4;
  p.stripes = o.stripes ? o.stripes : c ? c->stripes : (ring && wide_groups) || large_at_two_tiles ? 2 : 1;
  p.stages = o.stages ? o.stages : c ? c->stages : ring ? 3 : 2;
  // Split K over a cluster until the grid covers every SM, keeping at least two ring slots of
  // columns per split (two batches per warp in the streaming kernel).
  auto row_groups = [&] { return (n + 16 * p.stripes - 1) / (16 * p.stripes); };
  auto default_splits = [&](int64_t kslice) {
    auto room = [&](int64_t s) { return k >= 2 * kslice * (ring ? 1 : p.warps) * 2 * s; };
    int64_t s = 1;
    while (s < 8 && row_groups() * s < sms && room(s)) s *= 2;
    return s;
  };
  if (o.kslice || c) {
    p.kslice = o.kslice ? o.kslice : c->kslice;
  } else if (ring) {
    p.kslice = 256;
  } else if (!async || large_at_two_tiles) {
    p.kslice = 64;
  } else if (p.n_tiles == 1) {
    p.kslice = 128;
  } else {
    // Two token tiles: 128 columns where the SMs hold the whole grid of the 128-column plan at
    // once (three CTAs per SM at 4 warps) and each of its warps keeps kMinBatches batches.
    constexpr int64_t kMinBatches = 8;
    SkinnyPlan wide = p;
    wide.kslice = 128;
    const int64_t splits = default_splits(wide.kslice), ctas = row_groups() * splits;
    const int64_t resident = cuda::detail::skinny_stream_resident_ctas(cuda::detail::skinny_shape_of(wide), int(m));
    p.kslice = ctas <= resident * sms && k / splits >= kMinBatches * wide.kslice * p.warps ? 128 : 64;
  }
  // The unit that a split must not leave empty: a 32-column step (ring) or a batch
  // (streaming kernel).
  const int64_t unit = ring ? 32 : p.kslice, k_steps = (k + unit - 1) / unit;
  if (o.splits || c) {
    p.splits = o.splits ? o.splits : c->splits;
    cuda::detail::check_skinny_shape(cuda::detail::skinny_shape_of(p));  // a bad request is an error before it is trimmed
  } else {
    p.splits = int(default_splits(p.kslice));
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
