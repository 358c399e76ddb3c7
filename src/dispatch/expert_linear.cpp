// kbit::expert_linear: checks and the launch of the grouped GEMV, the fused kernel or the
// tile kernels in grouped mode (items over the token tiles of non-empty experts).
#include <algorithm>

#include "core/checks.h"
#include "cuda/device_checks.h"
#include "cuda/linear/fused_args.h"
#include "dispatch/linear_internal.h"
#include "kbit/cuda.h"
#include "kbit/moe.h"

namespace kbit {

namespace {
// Prefill: the tile kernels (wgmma_tile items) from this many rows per active expert on
// average, token tiles of 64, 128 or 256 rows by that average. Set from kbit bench moe on
// the H200 (BENCHMARKS.md, "MoE prefill with the tile kernels").
constexpr int64_t kGroupedTileMinRows = 32;
int grouped_tile_n_tiles(int64_t rows_per_expert) { return rows_per_expert <= 64 ? 8 : rows_per_expert <= 128 ? 16 : 32; }
}  // namespace

bool detail::try_grouped_gemv(const TensorView& source, const GemvInput& in, const QuantizedMatrix& w, int64_t experts,
                              const int32_t* expert_offsets, const MutableTensorView& y, LinearWorkspace& ws,
                              cudaStream_t stream, int tile_rows, bool pdl) {
  const int64_t p = y.rows, n = y.cols;
  // A rotation would have to apply after the gather or SwiGLU: the caller's separate
  // path. (Plain rows arrive already rotated from expert_linear.)
  if (w.layout() != Layout::mma16 || (w.rotation() && (in.gather || in.swiglu))) return false;
  // Tiles of 1, 2 or 4 rows by the rows an active expert gets on average: a tile reads its
  // expert's weights once, and a 2-row tile's unit costs more than a 1-row one's. 1-row
  // tiles up to a third of a row per expert: Qwen3-Coder-Next T = 16 (160 rows on 512
  // experts) 3-4% faster with them, GLM-4.7 T = 8 (64 on 160) even (H200, 2026-12-03).
  // Where the chosen size's x rows do not fit in shared memory (4-row tiles of K = 5120,
  // GLM-4.7's gate+up from T = 21), the next smaller size rather than the fused kernel.
  // Where uniform tiles would take 2 or 4 rows and the experts average at least half a row
  // (P >= E / 2), tiles by expert at k = 4 (where they fit): 1-row tiles for the experts with
  // one row, 4-row ones for those with three or more, so that none is read twice for a few
  // rows and none pays for a larger tile than it fills. Against uniform 2-row tiles, same call
  // (H200, 2026-12-04, two routings x two rounds, bench/results/h200-moe-class-split-ab-session52):
  // GLM-4.7 T = 12..20 0.89-1.02 (moe_gu T = 20 0.89-0.92, moe_dn 0.91); below half a row
  // per expert they lost (GLM-4.7 T = 8 up to 1.19, Qwen3-Coder-Next T = 20 1.28-1.33: classes
  // of a few tiles on a few CTAs), so those keep uniform tiles. At k = 2 and 3 they lose
  // (per-unit times of the 2- and 4-row classes vary 30-40% between CTAs there, not understood).
  const bool automatic = tile_rows == 0;
  if (automatic) tile_rows = 3 * p <= experts ? 1 : p <= experts ? 2 : 4;
  cuda::detail::GemvArgs g = staged_gemv_args(w, source, in, y, ws);
  g.stripes = int(n / 16);  // per expert
  g.N = int(n);
  g.expert_offsets = expert_offsets, g.experts = int(experts), g.tile_rows = tile_rows;
  g.pdl = g.pdl || pdl;
  if (automatic && tile_rows > 1 && w.bits() == 4 && 2 * p >= experts) {
    cuda::detail::GemvArgs by_expert = g;
    by_expert.tile_rows = kTileRowsByExpert;
    if (plan_grouped_gemv(w.bits(), by_expert).fits) {
      launch_gemv(w.bits(), by_expert, source.dtype, stream);
      return true;
    }
  }
  while (!plan_grouped_gemv(w.bits(), g).fits) {
    if (!automatic || g.tile_rows == 1) return false;
    g.tile_rows /= 2;
  }
  launch_gemv(w.bits(), g, source.dtype, stream);
  return true;
}

void expert_linear(const TensorView& x_in, const QuantizedMatrix& w, int64_t experts, const int32_t* expert_offsets,
                   const MutableTensorView& y, LinearWorkspace& ws, cudaStream_t stream, const ExpertLinearOptions& o) {
  detail::check_matrix(w, "expert_linear weight", Memory::device);
  detail::check_activation(x_in, "expert_linear x_sorted");
  detail::check_activation(y, "expert_linear y_sorted");
  KBIT_REQUIRE(experts >= 1 && experts <= kMaxExperts, "expert_linear: experts must be 1..",
               kMaxExperts, ", got ", experts);
  KBIT_REQUIRE(w.rows() % experts == 0, "expert_linear: W has ", w.rows(), " rows, not a multiple of ", experts,
               " experts");
  const int64_t n = w.rows() / experts, k = w.cols(), p = x_in.rows;
  KBIT_REQUIRE(n % 16 == 0, "expert_linear: each expert's N = ", n, " must be a multiple of 16");
  KBIT_REQUIRE(x_in.cols == k, "expert_linear: x_sorted has ", x_in.cols, " columns but W has K = ", k);
  KBIT_REQUIRE(y.rows == p && y.cols == n, "expert_linear: y_sorted is [", y.rows, ", ", y.cols, "], expected [", p,
               ", ", n, "]");
  KBIT_REQUIRE(y.dtype == x_in.dtype, "expert_linear: y is ", dtype_name(y.dtype), " but x is ", dtype_name(x_in.dtype));
  KBIT_REQUIRE(w.layout() == Layout::mma16, "expert_linear: W must be in the mma16 layout (got ",
               layout_name(w.layout()), ")");
  KBIT_REQUIRE(expert_offsets, "expert_linear: expert_offsets is null");
  cuda::detail::check_device_pointer(expert_offsets, "expert_linear expert_offsets");
  KBIT_REQUIRE(reinterpret_cast<uintptr_t>(expert_offsets) % 4 == 0, "expert_linear: expert_offsets not 4-byte aligned");
  KBIT_REQUIRE(p < (int64_t(1) << 31), "expert_linear: too many rows (", p, ")");
  if (p == 0) return;

  const TensorView x = detail::rotated_activations(x_in, w, ws, stream);

  const int64_t active = std::min<int64_t>(experts, p);
  KBIT_REQUIRE(o.path == LinearPath::automatic || o.path == LinearPath::gemv || o.path == LinearPath::fused_mma,
               "expert_linear: path must be auto, gemv or fused_mma, got ", linear_path_name(o.path));
  const bool fused_overrides = o.n_tiles || o.warps || o.items != LinearItems::automatic;
  if (o.path == LinearPath::gemv || (o.path == LinearPath::automatic && !fused_overrides && p <= kGroupedGemvMaxRows)) {
    KBIT_REQUIRE(o.tile_rows == 0 || o.tile_rows == 1 || o.tile_rows == 2 || o.tile_rows == 4 ||
                     o.tile_rows == kTileRowsByExpert,
                 "expert_linear: tile_rows must be 1, 2, 4 or kTileRowsByExpert (", kTileRowsByExpert, "), got ",
                 o.tile_rows);
    if (detail::try_grouped_gemv(x, {}, w, experts, expert_offsets, y, ws, stream, o.tile_rows, o.pdl)) return;
    KBIT_REQUIRE(o.path != LinearPath::gemv, "expert_linear: the grouped gemv does not fit: ", p, " rows, K = ", k,
                 " (see GemvGroupedPlan)");
  }

  // Token tiles sized for the rows an active expert gets on average (wgmma items: 32 at least).
  // Stripes items (4 warps on 4 adjacent stripes sharing each x tile) from 2 token tiles (9+
  // rows per expert on average). On the H200 (k = 4) they took glm47 prefill (top-8 of 160)
  // at T = 512 from 1860 to 1040 us (moe_gu; cuBLAS grouped 1340) and at T = 4096 from 18462
  // to 6537 us (cuBLAS 4409), and Qwen3's (top-10 of 512, 10 rows per expert at T = 512,
  // n_tiles 2) from 630 to 321 us (cuBLAS 568); wgmma items were slower than stripes (glm47
  // 1332 and 8765 us). Below 9 rows (n_tiles 1) cta items, not measured against stripes.
  // From kGroupedTileMinRows on Hopper the tile kernels: glm47 T = 4096 moe_gu 6533 -> 2381 us
  // (cuBLAS 4321), Qwen3 T = 2048 (40 rows) 869 -> 584 (cuBLAS 563).
  const int64_t rows_per_expert = (p + active - 1) / active;
  const int tiles_for_rows = default_n_tiles(rows_per_expert);
  // The tile kernels (wgmma_tile items, Hopper) in grouped mode read their token tiles from
  // a table in the workspace's split-K partials buffer (unused by grouped calls).
  auto& impl = ws.impl();
  const int64_t table_capacity = int64_t(impl.partials.size() / sizeof(int4));
  // Entries for tiles of 8 n_tiles rows (128 where n_tiles 32 falls back to 128-token tiles
  // for an unaligned x).
  auto table_entries = [&](int tile_n_tiles) {
    return cuda::detail::grouped_tile_entries(p, int(experts), 8 * std::min(tile_n_tiles, 16));
  };
  const int tile_n_tiles_default = grouped_tile_n_tiles(rows_per_expert);
  const bool tile_fits = cuda::detail::device_has_wgmma() && table_capacity >= table_entries(tile_n_tiles_default);
  const LinearItems items = o.items != LinearItems::automatic              ? o.items
                            : tile_fits && rows_per_expert >= kGroupedTileMinRows ? LinearItems::wgmma_tile
                            : tiles_for_rows >= 2                         ? LinearItems::stripes
                                                                          : LinearItems::cta;
  KBIT_REQUIRE(items != LinearItems::wgmma_stream, "expert_linear: wgmma_stream items have no grouped mode; use wgmma_tile");
  const bool tile = items == LinearItems::wgmma_tile;
  const int n_tiles = o.n_tiles                             ? o.n_tiles
                      : tile                              ? tile_n_tiles_default
                      : items == LinearItems::wgmma       ? wgmma_n_tiles(rows_per_expert)
                      : items == LinearItems::cta_shuffle ? std::min(tiles_for_rows, cuda::detail::kCtaShuffleMaxNTiles)
                                                          : tiles_for_rows;
  // The 256-token kernel (wgmma_tile, n_tiles 32) has 8 MMA warps (plus 4 that decode).
  KBIT_REQUIRE(!(tile && n_tiles == 32) || !o.warps || o.warps == 8,
               "expert_linear: wgmma_tile items with n_tiles 32 (the 256-token kernel) take 8 warps, got ", o.warps);
  const int warps = o.warps ? o.warps : tile ? 8 : 4;
  KBIT_REQUIRE(items != LinearItems::wgmma || n_tiles >= 4, "expert_linear: wgmma items take n_tiles 4 or 8, got ",
               n_tiles);
  KBIT_REQUIRE(items != LinearItems::cta_shuffle || n_tiles <= cuda::detail::kCtaShuffleMaxNTiles,
               "expert_linear: cta_shuffle items take n_tiles up to ", cuda::detail::kCtaShuffleMaxNTiles, ", got ", n_tiles);
  if (tile) {
    KBIT_REQUIRE(n_tiles == 8 || n_tiles == 16 || n_tiles == 32,
                 "expert_linear: wgmma_tile items take n_tiles 8, 16 or 32, got ", n_tiles);
    const int64_t needed = table_entries(n_tiles);
    KBIT_REQUIRE(table_capacity >= needed, "expert_linear: the workspace's tile table holds ", table_capacity,
                 " tiles, ", p, " rows of ", experts, " experts need ", needed, " (create it with a larger max_n)");
  } else {
    KBIT_REQUIRE(n_tiles == 1 || n_tiles == 2 || n_tiles == 4 || n_tiles == 8,
                 "expert_linear: n_tiles must be 1, 2, 4 or 8, got ", n_tiles);
  }
  KBIT_REQUIRE(warps == 4 || warps == 8, "expert_linear: warps must be 4 or 8, got ", warps);

  cuda::detail::FusedArgs a = detail::fused_args(w, x, y);
  a.stripes = int(n / 16);  // per expert (the geometry counts all experts' rows)
  a.splits = 1;
  a.supertiles_per_split = a.supertiles;
  a.tiles = int((p + 8 * n_tiles - 1) / (8 * n_tiles));
  a.pdl = a.pdl || o.pdl;
  a.expert_offsets = expert_offsets;
  a.experts = int(experts);
  if (tile) {
    a.grouped_tiles = static_cast<int4*>(impl.partials.data());
    a.grouped_tile_capacity = table_capacity;
  }
  a.max_ctas = detail::linear_sm_count() * detail::linear_occupancy(w.bits(), n_tiles, warps, items, x.dtype);
  const cuda::detail::FusedShape shape{n_tiles, warps, detail::fused_items(items)};
  detail::launch_fused(w.bits(), a, shape, x.dtype, stream);
}

}  // namespace kbit
