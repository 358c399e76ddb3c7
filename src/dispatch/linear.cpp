// kbit::linear: argument checks, path selection and the launch of the chosen path.
#include "kbit/linear.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "core/checks.h"
#include "core/enum_names.h"
#include "cuda/device_checks.h"
#include "cuda/linear/fused_args.h"
#include "cuda/linear/tile_schedule.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_configs.h"
#include "dispatch/linear_internal.h"
#include "kbit/cuda.h"
#include "kbit/moe.h"

namespace kbit {

using detail::kMaxPartialRows;

namespace {


void check_cuda_call(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(detail::concat(what, ": ", cudaGetErrorString(e)));
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool is_16bit(DType t) { return t == DType::f16 || t == DType::bf16; }

// SMs of the current device (cached per device in cuda::detail); without a GPU the
// H200's 132, so that plans can be made and tested on machines without one.
int current_sm_count() { return cuda::device_available() ? cuda::detail::sm_count() : 132; }

int occupancy(int bits, cuda::detail::FusedShape s, DType t) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, int, int>, int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(bits, s.n_tiles, s.warps, int(t), int(s.items));
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  // Without a GPU: 16 warps per SM, what the H200 holds of the fused kernels at n_tiles 1 and 2
  // (ptxas: 102-128 registers, so 4 CTAs of 4 warps or 2 of 8), so that plans made here match its.
  int v = std::max(1, 16 / s.warps);
  if (cuda::device_available() &&
      (s.items == cuda::detail::FusedItems::wgmma_tile || s.items == cuda::detail::FusedItems::wgmma_stream)) {
    switch (bits) {
      case 2: v = cuda::detail::tile_occupancy_k2(s, t); break;
      case 3: v = cuda::detail::tile_occupancy_k3(s, t); break;
      case 4: v = cuda::detail::tile_occupancy_k4(s, t); break;
      default: v = cuda::detail::tile_occupancy_k5(s, t); break;
    }
  } else if (cuda::device_available()) {
    switch (bits) {
      case 2: v = cuda::detail::fused_occupancy_k2(s, t); break;
      case 3: v = cuda::detail::fused_occupancy_k3(s, t); break;
      case 4: v = cuda::detail::fused_occupancy_k4(s, t); break;
      default: v = cuda::detail::fused_occupancy_k5(s, t); break;
    }
  }
  cache[key] = std::max(v, 1);
  return cache[key];
}

}  // namespace

namespace detail {
cuda::detail::FusedItems fused_items(LinearItems items) {
  switch (items) {
    case LinearItems::warp: return cuda::detail::FusedItems::warp;
    case LinearItems::stripes: return cuda::detail::FusedItems::stripes;
    case LinearItems::wgmma: return cuda::detail::FusedItems::wgmma;
    case LinearItems::cta_shuffle: return cuda::detail::FusedItems::cta_shuffle;
    case LinearItems::wgmma_tile: return cuda::detail::FusedItems::wgmma_tile;
    case LinearItems::wgmma_stream: return cuda::detail::FusedItems::wgmma_stream;
    default: return cuda::detail::FusedItems::cta;
  }
}
int linear_occupancy(int bits, int n_tiles, int warps, LinearItems items, DType t) {
  return occupancy(bits, {n_tiles, warps, fused_items(items)}, t);
}
int linear_sm_count() { return current_sm_count(); }

bool gemv_supports(int64_t m, int64_t k, int bits) {
  return m >= 1 && m <= cuda::detail::kGemvMaxM && k <= (int64_t(1) << 30) && cuda::detail::gemv_smem_bytes(bits, m, k) > 0;
}

bool gemv_preferred(int64_t m, int64_t n, int64_t k, int bits) {
  if (!gemv_supports(m, k, bits)) return false;
  // Measured on the H200 (bench/results/h200-gemv-bench-{45a23f8,23f0a36}.txt): the
  // GEMV's fixed costs (a 64-128 KB table and x staged per CTA, split-stripe sums) pay
  // off from about 16K units of 16 x 128 weights (glm47 q, o, shared_gu, shared_dn);
  // below that (glm47 kv, the experts, kimi latent, qwen3) the fused kernel is faster.
  // At M = 3..4, staging 4 rows of a long K (12288) made the GEMV slower than the fused
  // kernel (45a23f8, 408a747), and so it still is at k = 2..4 with tensor products (thirty-
  // fifth session: glm47 o 19.5-21.4 against 18.1-19.8 us; bench/results/
  // h200-linear-bench-all-m2-4-session35.jsonl). The largest W (shared_gu, 61K units) once lost
  // too; since then kbit tune put the GEMV first for it at M = 4 for every k (the H200 table).
  const int64_t units = ceil_div(n, 16) * ceil_div(k, 128);
  if (units < 16384) return false;
  return m <= 2 || k <= 8192;
}

void launch_gemv(int bits, const cuda::detail::GemvArgs& a, DType t, cudaStream_t stream) {
  switch (bits) {
    case 2: cuda::detail::launch_gemv_k2(a, t, stream); break;
    case 3: cuda::detail::launch_gemv_k3(a, t, stream); break;
    case 4: cuda::detail::launch_gemv_k4(a, t, stream); break;
    case 5: cuda::detail::launch_gemv_k5(a, t, stream); break;
    default: require_supported_bits(bits);
  }
}

void launch_fused(int bits, const cuda::detail::FusedArgs& a, const cuda::detail::FusedShape& s, DType t,
                  cudaStream_t stream) {
  if (s.items == cuda::detail::FusedItems::wgmma_tile || s.items == cuda::detail::FusedItems::wgmma_stream) {
    switch (bits) {
      case 2: cuda::detail::launch_tile_k2(a, s, t, stream); break;
      case 3: cuda::detail::launch_tile_k3(a, s, t, stream); break;
      case 4: cuda::detail::launch_tile_k4(a, s, t, stream); break;
      case 5: cuda::detail::launch_tile_k5(a, s, t, stream); break;
      default: require_supported_bits(bits);
    }
    return;
  }
  switch (bits) {
    case 2: cuda::detail::launch_fused_k2(a, s, t, stream); break;
    case 3: cuda::detail::launch_fused_k3(a, s, t, stream); break;
    case 4: cuda::detail::launch_fused_k4(a, s, t, stream); break;
    case 5: cuda::detail::launch_fused_k5(a, s, t, stream); break;
    default: require_supported_bits(bits);
  }
}
}  // namespace detail

int default_n_tiles(int64_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : 8; }
int wgmma_n_tiles(int64_t m) { return std::max(4, default_n_tiles(m)); }

int detail::normalize_splits(int requested, int64_t k, int64_t m, int n_tiles) {
  const int64_t supertiles = ceil_div(k, 128), tiles = ceil_div(m, 8 * n_tiles);
  auto no_empty = [&](int64_t s) { return ceil_div(supertiles, ceil_div(supertiles, s)); };
  int64_t s = no_empty(std::clamp<int64_t>(requested, 1, supertiles));
  while (s > 1 && s * tiles * 8 * n_tiles > kMaxPartialRows) --s;
  return int(no_empty(s));
}

int64_t detail::fused_output_items(int64_t m, int64_t n, int n_tiles) {
  return ceil_div(n, 16) * ceil_div(m, int64_t(8) * n_tiles);
}

namespace {

constexpr int64_t kCtaNoSplitMinItems = 32;
// A stripes item's fixed cost in supertiles (pipeline fill, x ring, the split's fix-up). At 6 the
// split count below is the fastest the H200 measured on all 52 large-W cases of the tunes of sessions
// 56 and 58 (glm47 q, o, shared_gu, shared_dn and Kimi at M = 8, 12, 16, k = 2..5; screened times,
// each plan at the GPU's occupancy: 4 CTAs of 4 warps, 2 of 8); at 2 it chose 5 splits for glm47 q
// at M = 16 (2 measured best: 21.7 against ~25.6 us at 4 or 6) and was 1.04x the best elsewhere.
constexpr double kStripesItemCost = 6.0;

// Splits along K for the persistent kernel, never leaving a split empty and never
// needing more partial rows than the workspace holds. CTA items: none while the output has
// kCtaNoSplitMinItems (stripe, token tile) items: kbit tune on the H200 put no split
// first for CTA items in every case at M = 8 (glm47, k = 2..5, 4 and 8 warps, 56 cases,
// 5d93ccc: q 20.1 us against 26.9 with 2 splits) and at M = 8, 16 on qwen3 (e5ce83e, 32
// items the fewest): the fix-up costs more than the parallelism it buys. Below that (a
// narrow output over a long K), minimise (items per CTA, rounded up) x (supertiles per
// warp + a fixed cost per item). Warp items:
// minimise (items per warp) x (supertiles per item + a fixed cost), at most 8 splits
// (more made glm47.kv slower on the H200: the fix-up reads every split).
}  // namespace

int detail::linear_heuristic_splits(int64_t m, int64_t n, int64_t k, int bits, int n_tiles, int warps,
                                    LinearItems items, DType t) {
  const int64_t stripes = ceil_div(n, 16), supertiles = ceil_div(k, 128), tiles = ceil_div(m, 8 * n_tiles);
  const int64_t ctas = int64_t(current_sm_count()) * occupancy(bits, {n_tiles, warps, fused_items(items)}, t);
  const bool cta = items == LinearItems::cta || items == LinearItems::cta_shuffle;
  const int64_t outputs = detail::fused_output_items(m, n, n_tiles);  // stripes x token tiles
  if (cta && outputs >= kCtaNoSplitMinItems) return 1;
  int best = 1;
  double best_cost = 1e300;
  for (int64_t s = 1; s <= std::min<int64_t>(items == LinearItems::warp ? 8 : 32, supertiles); ++s) {
    const int64_t per = ceil_div(supertiles, s), eff = ceil_div(supertiles, per);
    if (eff != s) continue;
    if (s > 1 && s * tiles * 8 * n_tiles > kMaxPartialRows) break;
    double cost;
    if (cta) {
      const int64_t items_per_cta = ceil_div(outputs * s, ctas);
      cost = double(items_per_cta) * (double(ceil_div(per, warps)) + 1.0) + (s > 1 ? 1.0 : 0.0);
    } else if (cuda::detail::items_share_x(fused_items(items))) {  // CTA items of `warps` stripes
      const int64_t items_per_cta = ceil_div(ceil_div(stripes, warps) * tiles * s, ctas);
      cost = double(items_per_cta) * (double(per) + kStripesItemCost);
    } else {
      cost = double(ceil_div(outputs * s, ctas * warps)) * (double(per) + 2.0);
    }
    if (cost < best_cost - 1e-9) best_cost = cost, best = int(s);
  }
  return best;
}

namespace {
constexpr detail::EnumNames<LinearPath, 4> kPathNames{
    "linear path",
    {{{LinearPath::automatic, "auto"},
      {LinearPath::gemv, "gemv"},
      {LinearPath::fused_mma, "fused_mma"},
      {LinearPath::dequant_cublas, "dequant_cublas"}}}};
constexpr detail::EnumNames<LinearItems, 8> kItemNames{
    "fused-kernel item mode",
    {{{LinearItems::automatic, "auto"}, {LinearItems::cta, "cta"}, {LinearItems::warp, "warp"},
      {LinearItems::stripes, "stripes"}, {LinearItems::wgmma, "wgmma"}, {LinearItems::cta_shuffle, "cta_shuffle"},
      {LinearItems::wgmma_tile, "wgmma_tile"}, {LinearItems::wgmma_stream, "wgmma_stream"}}}};
// Untuned small W at M = 17..32, stripes items: the fewest splits (none left empty) that bring the CTA
// items (warps stripes x one token tile each) to kSmallStripesMinItemsPerSm x the SMs, keeping at least
// kSmallStripesMinSupertilesPerSplit supertiles per split (linear_configs.h).
int small_stripes_splits(int64_t stripes, int64_t supertiles, int64_t tiles, int warps, int64_t sms) {
  const int64_t items = ceil_div(stripes, warps) * tiles;
  int best = 1;
  for (int64_t s = 2; s <= supertiles; ++s) {
    const int64_t per = ceil_div(supertiles, s);
    if (per < detail::kSmallStripesMinSupertilesPerSplit) break;
    if (ceil_div(supertiles, per) != s) continue;  // a split would be empty
    if (double(items * best) >= detail::kSmallStripesMinItemsPerSm * double(sms)) break;
    best = int(s);
  }
  return best;
}
}  // namespace

std::string_view linear_path_name(LinearPath p) { return kPathNames.name(p); }
LinearPath parse_linear_path(std::string_view name) { return kPathNames.parse(name); }
std::string_view linear_items_name(LinearItems i) { return kItemNames.name(i); }
LinearItems parse_linear_items(std::string_view name) { return kItemNames.parse(name); }

std::string LinearPlan::describe() const {
  if (path == LinearPath::dequant_cublas)
    return (gemm_algo ? detail::concat("dequant_cublas gemm_algo=", gemm_algo) : std::string("dequant_cublas")) + " (" +
           source + ")";
  if (path == LinearPath::gemv) return "gemv (" + source + ")";
  return detail::concat("fused_mma n_tiles=", n_tiles, " warps=", warps, " splits=", splits,
                        " items=", linear_items_name(items), " (", source, ")");
}

LinearPlan plan_linear(int64_t m, int64_t n, int64_t k, int bits, const LinearOptions& o) {
  require_supported_bits(bits);
  KBIT_REQUIRE(m > 0 && n > 0 && k > 0, "linear: sizes must be positive, got M=", m, " N=", n, " K=", k);
  LinearPlan p;
  p.source = "heuristic";
  const detail::LinearConfig* c = o.tuned ? detail::find_linear_config(bits, n, k, m, o.pdl) : nullptr;
  if (c) p.source = "table";
  // A tuned entry decides; otherwise M <= 4 takes the CUDA-core GEMV where it was
  // measured faster, unless the caller overrides the fused kernel's shape.
  const bool fused_overrides = o.n_tiles || o.warps || o.splits || o.items != LinearItems::automatic;
  const bool gemv = detail::gemv_supports(m, k, bits);
  const bool large = n * k >= detail::kStripesMinWeights;
  const bool hopper = cuda::device_available() && cuda::detail::device_has_wgmma();
  const bool tile = !c && hopper &&
                    (large ? m > detail::kDefaultFusedMaxM && m <= detail::kTileMaxM &&
                                 (m <= detail::kStreamKMaxM || ceil_div(n, 128) * ceil_div(m, 128) * 4 >= current_sm_count())
                           : m > detail::kDefaultFusedMaxM && m <= detail::kSmallTileMaxM &&
                                 n >= detail::kSmallTileMinN &&
                                 k >= (m <= detail::kLargeFusedMaxM ? detail::kSmallTileMinK64 : detail::kSmallTileMinK128));
  p.path = o.path != LinearPath::automatic ? o.path
           : c && (c->path != LinearPath::gemv || gemv) ? c->path
           : !fused_overrides && detail::gemv_preferred(m, n, k, bits) ? LinearPath::gemv
           : m > (large ? detail::kLargeFusedMaxM : detail::kDefaultFusedMaxM) && !tile ? LinearPath::dequant_cublas
                                                                                        : LinearPath::fused_mma;
  if (p.path == LinearPath::gemv && o.path == LinearPath::automatic && !c) p.source = "heuristic";
  if (p.path == LinearPath::gemv) {
    KBIT_REQUIRE(gemv, "linear: the gemv path takes M = 1..", cuda::detail::kGemvMaxM,
                 " with M * K small enough for shared memory (", cuda::detail::kGemvMaxSmem, " bytes), got M = ", m,
                 ", K = ", k);
    if (o.path != LinearPath::automatic) p.source = "forced";
    return p;
  }
  if (p.path == LinearPath::dequant_cublas) {
    KBIT_REQUIRE(o.gemm_algo >= -1 && o.gemm_algo < detail::kLtMaxCandidates, "linear: gemm_algo must be -1..",
                 detail::kLtMaxCandidates - 1, ", got ", o.gemm_algo);
    p.gemm_algo = o.gemm_algo >= 0 ? o.gemm_algo : c && c->path == LinearPath::dequant_cublas ? c->gemm_algo : 0;
    if (o.gemm_algo >= 0) p.source = "forced";
    return p;
  }
  // Untuned plans (linear_configs.h: kSmallHalfTileMaxN, kLargeEightWarpsMinSupertiles and the
  // measurements behind them). Small W (below kStripesMinWeights): CTA items, no split (see
  // linear_heuristic_splits); half the token tile at M = 9..16 only for narrow N; 8 warps where
  // K has a supertile for each (4 below: a CTA item's warps share its K) unless the stripes
  // number more than twice the SMs (more, smaller CTAs then); level lookups by warp shuffle
  // (cta_shuffle, k >= 3) at M = 9..16, at M = 5..8 for k = 5, and elsewhere where K has at most
  // kShuffleMaxSupertiles and the stripes are no more than the SMs. Large W: stripes items,
  // 8 warps on long K.
  const bool small = !c && !large;
  const int64_t stripes = ceil_div(n, 16), supertiles = ceil_div(k, 128), sms = current_sm_count();
  const bool two_tile_decode = m > 8 && m <= 16;
  // Small W at M = 17..32 (linear_configs.h, kSmallStripesMinSupertilesPerSplit): k = 5 with no more
  // stripes than SMs (and at least kSmallShuffleMinStripes) takes cta_shuffle items without a split;
  // kSmallCtaMinStripes..2 x SMs stripes (at k = 2, 3 up to the SMs) over 8..kShuffleMaxSupertiles supertiles
  // CTA items of 8 warps (cta_shuffle where the shuffle rule below says), one 32-token tile past the SMs in
  // stripes; the rest stripes items, of one 32-token tile and 8 warps past twice the SMs in stripes, else two
  // token tiles and 4 warps up to kShuffleMaxSupertiles of K (8 above), split to about one CTA item per SM
  // (small_stripes_splits).
  const bool small_m32 = small && m > 16 && m <= detail::kDefaultFusedMaxM;
  const bool small_m32_shuffle = small_m32 && bits == 5 && stripes <= sms && stripes >= detail::kSmallShuffleMinStripes;
  const bool many_stripes = stripes > 2 * sms;
  const bool small_m32_cta = small_m32 && !small_m32_shuffle && stripes >= detail::kSmallCtaMinStripes &&
                             !many_stripes && (bits >= 4 || stripes <= sms) && supertiles >= 8 &&
                             supertiles <= detail::kShuffleMaxSupertiles;
  const bool small_stripes = small_m32 && !small_m32_shuffle && !small_m32_cta;
  p.n_tiles = o.n_tiles ? o.n_tiles
              : c       ? c->n_tiles
              : small && two_tile_decode && n <= detail::kSmallHalfTileMaxN ? 1
              : (small_stripes && many_stripes) || (small_m32_cta && stripes > sms) ? 4
              : small_m32                                                   ? 2
                                                                               : default_n_tiles(m);
  p.warps = o.warps ? o.warps
            : c     ? c->warps
            : large ? (supertiles >= detail::kLargeEightWarpsMinSupertiles ? 8 : 4)
            : small_m32_cta ? 8
            : small_stripes ? (many_stripes || supertiles > detail::kShuffleMaxSupertiles ? 8 : 4)
            : stripes > 2 * sms || supertiles < 8 ? 4
                                                  : 8;
  const bool shuffle = small && bits >= 3 && p.n_tiles <= cuda::detail::kCtaShuffleMaxNTiles &&
                       (two_tile_decode || (m > 4 && m <= 8 && bits == 5) || small_m32_shuffle ||
                        (supertiles <= detail::kShuffleMaxSupertiles && stripes <= sms));
  p.items = o.items != LinearItems::automatic ? o.items
            : c                                ? c->items
            : tile && !fused_overrides         ? (m <= detail::kStreamKMaxM ? LinearItems::wgmma_stream : LinearItems::wgmma_tile)
            : large || small_stripes           ? LinearItems::stripes
            : shuffle                          ? LinearItems::cta_shuffle
                                               : LinearItems::cta;
  // wgmma items not from a wgmma table entry (forced over a table entry of another item
  // mode, or untuned): one warpgroup over 32 or 64 tokens, unless the caller says.
  if (p.items == LinearItems::wgmma && !(c && c->items == LinearItems::wgmma)) {
    if (!o.n_tiles) p.n_tiles = wgmma_n_tiles(m);
    if (!o.warps) p.warps = 4;
  }
  // cta_shuffle items not from such a table entry: token tiles of at most 16, unless the caller says.
  if (p.items == LinearItems::cta_shuffle && !o.n_tiles && !(c && c->items == LinearItems::cta_shuffle))
    p.n_tiles = std::min(p.n_tiles, cuda::detail::kCtaShuffleMaxNTiles);
  // Tile-kernel items (wgmma_tile, wgmma_stream) not from a table entry of their mode: 64
  // tokens per tile up to M = 64, 128 up to M = 128, else 256 (the warp-specialised kernel,
  // whole tiles only; stream-K stays at 128); two warpgroups (wgmma_tile: 8 warps that decode
  // and multiply; wgmma_stream: 16, the warp-specialised 64/128-token kernel, forced on every
  // shape 12-14% faster at M = 64 by geomean, forty-ninth session), unless the caller says.
  const bool stream_k = p.items == LinearItems::wgmma_stream;
  const bool untabled_tile = (p.items == LinearItems::wgmma_tile || stream_k) && !(c && c->items == p.items);
  if (untabled_tile && !o.n_tiles)
    p.n_tiles = m <= 64 || (m <= detail::kStreamKMaxM && n <= detail::kStreamKNarrowMaxN) ? 8
                : m <= detail::kStreamKMaxM || stream_k                                 ? 16
                                                                                        : 32;
  // 16 warps: the warp-specialised 64/128-token stream-K kernel (8 decode warps, 8 MMA warps).
  const bool sixteen_warps_run = stream_k && p.n_tiles <= 16;
  if (untabled_tile && !o.warps) p.warps = sixteen_warps_run ? 16 : 8;
  // 16 warps from a table entry of the warp-specialised stream-K kernel, with other items or
  // n_tiles forced over it: the same two warpgroups as 8 warps.
  if (p.warps == 16 && !o.warps && !sixteen_warps_run) p.warps = 8;
  if (p.items == LinearItems::wgmma_tile || stream_k) {
    KBIT_REQUIRE(p.n_tiles == 8 || p.n_tiles == 16 || p.n_tiles == 32, "linear: ", stream_k ? "wgmma_stream" : "wgmma_tile",
                 " items take n_tiles 8, 16 or 32, got ", p.n_tiles);
    if (p.n_tiles == 32) {  // the 256-token kernel: 8 MMA warps (plus 4 that decode)
      KBIT_REQUIRE(!o.warps || o.warps == 8, "linear: ", stream_k ? "wgmma_stream" : "wgmma_tile",
                   " items with n_tiles 32 (the 256-token kernel) take 8 warps, got ", o.warps);
      p.warps = 8;
    }
  } else {
    KBIT_REQUIRE(p.n_tiles == 1 || p.n_tiles == 2 || p.n_tiles == 4 || p.n_tiles == 8,
                 "linear: n_tiles must be 1, 2, 4 or 8, got ", p.n_tiles);
  }
  KBIT_REQUIRE(p.warps == 4 || p.warps == 8 || (p.warps == 16 && sixteen_warps_run),
               "linear: warps must be 4 or 8 (16: wgmma_stream items with n_tiles 8 or 16), got ", p.warps);
  KBIT_REQUIRE(p.items != LinearItems::wgmma || p.n_tiles >= 4, "linear: wgmma items take n_tiles 4 or 8, got ",
               p.n_tiles);
  KBIT_REQUIRE(p.items != LinearItems::cta_shuffle || p.n_tiles <= cuda::detail::kCtaShuffleMaxNTiles,
               "linear: cta_shuffle items take n_tiles up to ", cuda::detail::kCtaShuffleMaxNTiles, ", got ", p.n_tiles);
  const bool small_stripes_plan = small_stripes && p.items == LinearItems::stripes && !fused_overrides;
  p.splits = o.splits                                        ? o.splits
             : c                                               ? c->splits
             : small_stripes_plan ? small_stripes_splits(stripes, supertiles, ceil_div(m, 8 * p.n_tiles), p.warps, sms)
             : detail::linear_heuristic_splits(m, n, k, bits, p.n_tiles, p.warps, p.items, DType::bf16);
  p.splits = stream_k ? 1 : detail::normalize_splits(p.splits, k, m, p.n_tiles);  // stream-K cuts K itself
  if (o.n_tiles || o.warps || o.splits || o.path != LinearPath::automatic || o.items != LinearItems::automatic)
    p.source = "forced";
  return p;
}


LinearWorkspace::LinearWorkspace(const Limits& l) : limits_(l), impl_(std::make_unique<Impl>()) {
  KBIT_REQUIRE(l.max_m > 0 && l.max_n > 0 && l.max_k > 0, "LinearWorkspace: max_m, max_n and max_k must be positive, got ",
               l.max_m, ", ", l.max_n, ", ", l.max_k);
  KBIT_REQUIRE(cuda::device_available(), "LinearWorkspace needs a CUDA GPU: ", cuda::device_description());
  const int64_t npad = ceil_div(l.max_n, 16) * 16;
  impl_->partial_floats = kMaxPartialRows * npad;
  impl_->counter_count = ceil_div(std::max<int64_t>(l.max_m, kMaxPartialRows), 8) * ceil_div(l.max_n, 16);
  impl_->partials = Buffer::allocate(Memory::device, size_t(impl_->partial_floats) * 4);
  impl_->counters = Buffer::allocate(Memory::device, size_t(impl_->counter_count) * 4);
  check_cuda_call(cudaMemset(impl_->counters.data(), 0, impl_->counters.size()), "LinearWorkspace: clearing counters");
  impl_->rotated = Buffer::allocate(Memory::device, size_t(l.max_m * l.max_k) * 2);
  if (l.max_m >= 1) {
    // Two pieces of 16 rows x M tokens per warp of one wave of GEMV CTAs (kGemvMaxCtasPerSm),
    // for the GEMV's largest M: the grouped mode takes tiles of up to 4 rows even when
    // the call has fewer rows (1 MB on an H200).
    const int64_t m = cuda::detail::kGemvMaxM;
    impl_->gemv_piece_floats = 2 * int64_t(current_sm_count()) * cuda::detail::kGemvMaxCtasPerSm * cuda::detail::kGemvWarps * 16 * m;
    // One counter per stripe; the grouped GEMV needs one per (tile, stripe) with at most
    // 2 P tiles for P <= kGroupedGemvMaxRows rows.
    impl_->gemv_counter_count = ceil_div(l.max_n, 16) * std::max<int64_t>(1, 2 * std::min(l.max_m, kGroupedGemvMaxRows));
    impl_->gemv_pieces = Buffer::allocate(Memory::device, size_t(impl_->gemv_piece_floats) * 4);
    impl_->gemv_counters = Buffer::allocate(Memory::device, size_t(impl_->gemv_counter_count) * 4);
    check_cuda_call(cudaMemset(impl_->gemv_counters.data(), 0, impl_->gemv_counters.size()),
                    "LinearWorkspace: clearing the GEMV counters");
    cuda::detail::dynamic_smem_base();  // probed here, outside any graph capture
  }
  if (l.max_m > 16 && cuda::detail::device_has_wgmma()) {
    // The 256-token tile kernel (tuned or forced from M = 65) and its split tail
    // (tile_schedule.h): up to two waves of partial tiles (128 KB each; 34 MB on an H200).
    // Its counters (8 per tail tile) fit in `counters`, which has one per 8 tokens x 16
    // rows, 256 per tile. Up to M = 64, the stream-K tile items (wgmma_stream, from M = 17):
    // two slots per CTA of at most 128 rows x 128 tokens (64 KB) with one CTA per SM, or
    // half that with two (17 MB on an H200).
    impl_->tile_partial_slots = (l.max_m > 64 ? 2 : 1) * int64_t(current_sm_count());
    impl_->tile_partials = Buffer::allocate(
        Memory::device, size_t(impl_->tile_partial_slots * cuda::detail::kWsPartialTileFloats) * 4);
  }
  if (l.dequant_path) {
    impl_->dequant = Buffer::allocate(Memory::device, size_t(l.max_n * l.max_k) * 2);
    impl_->lt_workspace = Buffer::allocate(Memory::device, detail::kLtWorkspaceBytes);
  }
}

LinearWorkspace::~LinearWorkspace() = default;

size_t LinearWorkspace::device_bytes() const {
  return impl_->partials.size() + impl_->counters.size() + impl_->rotated.size() + impl_->dequant.size() +
         impl_->lt_workspace.size() + impl_->gemv_pieces.size() + impl_->gemv_counters.size() +
         impl_->tile_partials.size();
}

void detail::check_activation(const TensorView& v, std::string_view what) {
  check_float_view(v, what);
  KBIT_REQUIRE(is_16bit(v.dtype), what, ": dtype ", dtype_name(v.dtype), " is not supported (expected F16 or BF16)");
  cuda::detail::check_device_pointer(v.data, what);
}

void detail::check_epilogue(const TensorView& residual, const void* bias, int64_t m, int64_t n, DType t,
                            std::string_view who) {
  if (residual.data) {
    check_activation(residual, concat(who, " residual"));
    KBIT_REQUIRE(residual.rows == m && residual.cols == n && residual.dtype == t, who, ": residual must be [", m, ", ",
                 n, "] ", dtype_name(t), ", got [", residual.rows, ", ", residual.cols, "] ", dtype_name(residual.dtype));
  }
  if (bias) {
    cuda::detail::check_device_pointer(bias, concat(who, " bias"));
    KBIT_REQUIRE(reinterpret_cast<uintptr_t>(bias) % 2 == 0, who, " bias: pointer ", bias, " is not 2-byte aligned");
  }
}

TensorView detail::rotated_activations(const TensorView& x, const QuantizedMatrix& w, LinearWorkspace& ws,
                                       cudaStream_t stream) {
  if (!w.rotation()) return x;
  const auto& lim = ws.limits();
  KBIT_REQUIRE(x.rows <= lim.max_m && x.cols <= lim.max_k, "rotating x [", x.rows, ", ", x.cols,
               "] needs a workspace of max_m >= ", x.rows, " and max_k >= ", x.cols);
  const MutableTensorView rx{ws.impl().rotated.data(), x.dtype, x.rows, x.cols};
  cuda::hadamard_rotate(x, rx, *w.rotation(), false, stream, w.device_rotation_signs());
  return rx;
}

void detail::run_lt_gemm(LinearWorkspace& ws, const TensorView& x, const void* w, const MutableTensorView& y,
                         const void* residual, const void* bias, cudaStream_t stream, int algo, bool algo_forced) {
  auto& impl = ws.impl();
  KBIT_REQUIRE(impl.lt_workspace.size() > 0, "the cuBLASLt path needs a workspace created with dequant_path");
  const int64_t m = x.rows, n = y.cols, k = x.cols;
  const auto key = std::make_tuple(m, n, k, int(x.dtype), residual != nullptr, bias != nullptr, algo);
  auto& gemm = impl.gemms[key];
  // A table's index was tuned on one problem (no residual or bias): where cuBLASLt offers fewer
  // candidates for this one, its first choice.
  if (!gemm)
    gemm = std::make_unique<LtGemm>(m, n, k, x.dtype, residual != nullptr, bias != nullptr, algo, !algo_forced);
  gemm->run(x.data, w, residual, bias, y.data, impl.lt_workspace.data(), impl.lt_workspace.size(), stream);
}

namespace {
// The fields of W (mma16) that the fused kernels' and the operand dequantize's arguments
// share, the codebook in the 16-bit type t (round to nearest even).
template <typename Args>
void set_mma16_weight(Args& a, const QuantizedMatrix& w, DType t) {
  const Geometry g = w.geometry();
  a.words = reinterpret_cast<const uint2*>(w.words());
  a.scales = reinterpret_cast<const uint2*>(w.scales());
  a.meta = w.device_meta();
  a.supertiles = int(g.supertiles()), a.stripes = int(g.stripes());
  for (int i = 0; i < w.codebook().levels(); ++i)
    a.codebook16[i] = t == DType::f16 ? float_to_half_bits(w.codebook()[i]) : float_to_bf16_bits(w.codebook()[i]);
}
}  // namespace

cuda::detail::FusedArgs detail::fused_args(const QuantizedMatrix& w, const TensorView& x, const MutableTensorView& y) {
  cuda::detail::FusedArgs a;
  set_mma16_weight(a, w, x.dtype);
  a.x = x.data, a.ldx = x.stride();
  a.y = y.data, a.ldy = y.stride();
  a.M = int(x.rows), a.N = int(y.cols), a.K = int(w.cols());
  a.x_vec = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && x.stride() % 8 == 0 && w.cols() % 8 == 0;
  // After our own rotation kernel (which lets dependents launch at once) the fused
  // kernel always uses PDL: its weight loads overlap the rotation of x.
  a.pdl = w.rotation().has_value();
  return a;
}

void detail::dequantize_operand(const QuantizedMatrix& w, const MutableTensorView& out, cudaStream_t stream) {
  detail::check_matrix(w, "dequantize_operand weight", Memory::device);
  KBIT_REQUIRE(w.layout() == Layout::mma16, "dequantize_operand: W must be in the mma16 layout (got ",
               layout_name(w.layout()), ")");
  detail::check_activation(TensorView{out.data, out.dtype, out.rows, out.cols, out.stride()}, "dequantize_operand out");
  KBIT_REQUIRE(out.rows == w.rows() && out.cols == w.cols(), "dequantize_operand: out is [", out.rows, ", ", out.cols,
               "], W is [", w.rows(), ", ", w.cols(), "]");
  cuda::detail::OperandDequantArgs a;
  set_mma16_weight(a, w, out.dtype);
  a.out = out.data, a.ld = out.stride();
  a.rows = int(w.rows()), a.cols = int(w.cols());
  a.vec = reinterpret_cast<uintptr_t>(out.data) % 16 == 0 && out.stride() % 8 == 0;
  cuda::detail::launch_dequantize_operand(w.bits(), a, out.dtype, stream);
}

namespace {
unsigned long long* gemv_probe_buffer = nullptr;  // set_gemv_probe
}  // namespace

void detail::set_gemv_probe(unsigned long long* probe) { gemv_probe_buffer = probe; }

cuda::detail::GemvArgs detail::gemv_args(const QuantizedMatrix& w, const TensorView& x, const MutableTensorView& y,
                                         LinearWorkspace& ws) {
  const cuda::detail::FusedArgs f = fused_args(w, x, y);
  auto& impl = ws.impl();
  cuda::detail::GemvArgs a;
  static_cast<cuda::detail::LinearOperands&>(a) = f;  // W, x, y
  a.pieces = static_cast<float*>(impl.gemv_pieces.data()), a.piece_floats = impl.gemv_piece_floats;
  a.counters = static_cast<unsigned*>(impl.gemv_counters.data()), a.counter_count = impl.gemv_counter_count;
  a.M = f.M, a.N = f.N, a.K = f.K, a.supertiles = f.supertiles, a.stripes = f.stripes;
  a.x_vec = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && x.stride() % 8 == 0;
  a.pdl = f.pdl;
  // The codebook normalised to max |level| = 1 keeps fp16 partial sums bounded.
  float cb_max = 0.0f;
  for (float v : w.codebook().values()) cb_max = std::max(cb_max, std::fabs(v));
  if (!(cb_max > 0.0f) || !std::isfinite(cb_max)) cb_max = 1.0f;
  for (int i = 0; i < w.codebook().levels(); ++i) a.codebook16[i] = float_to_half_bits(w.codebook()[i] / cb_max);
  a.out_factor = cb_max * 16.0f;  // E4M4 block scales enter the kernel as fp16 value / 16
  a.probe = gemv_probe_buffer;
  return a;
}

cuda::detail::GemvGroupedPlan detail::plan_grouped_gemv(int bits, const cuda::detail::GemvArgs& a) {
  switch (bits) {
    case 2: return cuda::detail::plan_grouped_gemv_k2(a);
    case 3: return cuda::detail::plan_grouped_gemv_k3(a);
    case 4: return cuda::detail::plan_grouped_gemv_k4(a);
    case 5: return cuda::detail::plan_grouped_gemv_k5(a);
    default: require_supported_bits(bits);
  }
  return {};
}

cuda::detail::GemvArgs detail::staged_gemv_args(const QuantizedMatrix& w, const TensorView& source,
                                                const GemvInput& in, const MutableTensorView& y, LinearWorkspace& ws) {
  const int64_t rows = y.rows, k = w.cols();
  KBIT_REQUIRE(!in.gather || in.gather_div >= 1, "gemv: gather_div must be >= 1, got ", in.gather_div);
  KBIT_REQUIRE(source.cols == (in.swiglu ? 2 * k : k) &&
                   (in.gather ? source.rows * in.gather_div == rows : source.rows == rows),
               "gemv: the source x [", source.rows, ", ", source.cols, "] does not give [", rows, ", ", k, "] rows");
  const TensorView rows_view{source.data, source.dtype, rows, k, source.stride()};
  cuda::detail::GemvArgs a = gemv_args(w, rows_view, y, ws);
  a.x_gather = in.gather, a.x_gather_div = in.gather_div, a.x_swiglu = in.swiglu;
  a.x_vec = a.x_vec && (!in.swiglu || k % 8 == 0);  // the up half starts K elements on
  return a;
}

bool detail::try_dense_gemv(const TensorView& source, const GemvInput& in, const QuantizedMatrix& w,
                            const MutableTensorView& y, LinearWorkspace& ws, cudaStream_t stream, bool force) {
  const int64_t m = y.rows, n = w.rows(), k = w.cols();
  KBIT_REQUIRE(y.cols == n, "dense gemv: y has ", y.cols, " columns but W has N = ", n);
  const auto& lim = ws.limits();
  // A rotation would have to apply after the gather or SwiGLU.
  if (w.rotation() || w.layout() != Layout::mma16 || m > lim.max_m || n > lim.max_n || k > lim.max_k) return false;
  if (force ? !gemv_supports(m, k, w.bits()) : plan_linear(m, n, k, w.bits(), {}).path != LinearPath::gemv) return false;
  launch_gemv(w.bits(), staged_gemv_args(w, source, in, y, ws), source.dtype, stream);
  return true;
}

void linear(const TensorView& x_in, const QuantizedMatrix& w, const MutableTensorView& y, LinearWorkspace& ws,
            cudaStream_t stream, const LinearOptions& o) {
  detail::check_matrix(w, "linear weight", Memory::device);
  detail::check_activation(x_in, "linear x");
  detail::check_activation(y, "linear y");
  const int64_t m = x_in.rows, n = w.rows(), k = w.cols();
  KBIT_REQUIRE(x_in.cols == k, "linear: x has ", x_in.cols, " columns but W has K = ", k);
  KBIT_REQUIRE(y.rows == m && y.cols == n, "linear: y is [", y.rows, ", ", y.cols, "], expected [", m, ", ", n, "]");
  KBIT_REQUIRE(y.dtype == x_in.dtype, "linear: y is ", dtype_name(y.dtype), " but x is ", dtype_name(x_in.dtype));
  detail::check_epilogue(o.residual, o.bias, m, n, x_in.dtype, "linear");
  const auto& lim = ws.limits();
  KBIT_REQUIRE(m <= lim.max_m && n <= lim.max_n && k <= lim.max_k, "linear: [M=", m, ", N=", n, ", K=", k,
               "] exceeds the workspace limits [", lim.max_m, ", ", lim.max_n, ", ", lim.max_k, "]");
  auto& impl = ws.impl();

  const TensorView x = detail::rotated_activations(x_in, w, ws, stream);

  LinearPlan plan = plan_linear(m, n, k, w.bits(), o);
  const bool contiguous = x.stride() == k && y.stride() == n && (!o.residual.data || o.residual.stride() == n);
  if (plan.path == LinearPath::dequant_cublas && (impl.dequant.size() == 0 || !contiguous)) {
    KBIT_REQUIRE(o.path != LinearPath::dequant_cublas, "linear: the dequant_cublas path needs ",
                 impl.dequant.size() == 0 ? "a workspace created with dequant_path" : "contiguous x, y and residual");
    LinearOptions fused = o;
    fused.path = LinearPath::fused_mma;
    plan = plan_linear(m, n, k, w.bits(), fused);
  }

  if (plan.path == LinearPath::dequant_cublas) {
    MutableTensorView wd{impl.dequant.data(), x.dtype, n, k};
    if (w.layout() == Layout::mma16) {
      detail::dequantize_operand(w, wd, stream);
    } else {
      cuda::dequantize(w, wd, stream);
    }
    detail::run_lt_gemm(ws, x, wd.data, y, o.residual.data, o.bias, stream, plan.gemm_algo, o.gemm_algo >= 0);
    return;
  }

  KBIT_REQUIRE(w.layout() == Layout::mma16, "linear: the ", linear_path_name(plan.path),
               " path needs W in the mma16 layout (got ", layout_name(w.layout()), "); use cuda::repack(w, Layout::mma16)");
  if (plan.path == LinearPath::gemv) {
    cuda::detail::GemvArgs a = detail::gemv_args(w, x, y, ws);
    a.bias = o.bias;
    a.residual = o.residual.data, a.ldr = o.residual.data ? o.residual.stride() : 0;
    a.pdl = a.pdl || o.pdl;
    detail::launch_gemv(w.bits(), a, x.dtype, stream);
    return;
  }
  cuda::detail::FusedArgs a = detail::fused_args(w, x, y);
  a.bias = o.bias;
  a.residual = o.residual.data, a.ldr = o.residual.data ? o.residual.stride() : 0;
  a.partials = static_cast<float*>(impl.partials.data());
  a.counters = static_cast<unsigned*>(impl.counters.data());
  a.counter_count = impl.counter_count;
  a.tile_partials = static_cast<float*>(impl.tile_partials.data());
  a.tile_partial_slots = impl.tile_partial_slots;
  a.splits = plan.splits;
  a.supertiles_per_split = int(ceil_div(a.supertiles, a.splits));
  a.pdl = a.pdl || o.pdl;
  const int64_t tiles = ceil_div(m, 8 * plan.n_tiles);
  a.tiles = int(tiles);
  const cuda::detail::FusedShape shape{plan.n_tiles, plan.warps, detail::fused_items(plan.items)};
  a.max_ctas = current_sm_count() * occupancy(w.bits(), shape, x.dtype);
  KBIT_REQUIRE(a.splits == 1 || (a.splits * tiles * 8 * plan.n_tiles <= kMaxPartialRows &&
                                 tiles * a.stripes <= impl.counter_count),
               "linear: splits=", a.splits, " needs more workspace than reserved");
  detail::launch_fused(w.bits(), a, shape, x.dtype, stream);
}

}  // namespace kbit
