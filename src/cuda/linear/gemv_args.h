// Arguments and launch entry points of the CUDA-core GEMV for M = 1..4 (gemv.cuh).
// Host code (src/dispatch) fills GemvArgs; the kernels are instantiated per bit
// width in gemv_k{2,3,4,5}.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "kbit/dtype.h"
#include "kbit/hd.h"
#include "kbit/moe.h"
#include "kbit/quantized_matrix.h"
#include "linear_operands.h"

namespace kbit::cuda::detail {

inline constexpr int kGemvMaxM = 4;       // tokens per call
inline constexpr int kGemvWarps = 16;     // warps per CTA
inline constexpr int kGemvMinUnits = 2;   // (stripe, supertile) units per warp at least
inline constexpr int kGemvMaxCtasPerSm = 2;  // the workspace's partial sums are sized for this
// Grouped: a warp takes one whole (tile, stripe) segment rather than an even share of the
// units when the share is at most this many units smaller (a split segment's counter and
// second pass cost about that; H200, 2026-12-02: Qwen3-Coder-Next moe_dn T = 1, 4 units per
// segment, 9.9 -> 8.8 us; GLM-4.7 moe_gu T = 1, 40 against 29 units, 25.2 -> 28.8 us).
inline constexpr int kGemvSplitSlack = 2;
// Shared memory of one CTA that the GEMV may use (the H200's 227 KB per block).
inline constexpr int64_t kGemvMaxSmem = 227 * 1024;

// The dense GEMV's grid (host arithmetic, CPU-tested): CTAs of kGemvWarps warps over the units
// (at least kGemvMinUnits per warp, one wave of per_sm CTAs per SM, at most max_ctas when > 0),
// each warp an equal contiguous range (stream-K), or one whole stripe per warp where splitting
// stripes would gain too little parallelism. A split stripe costs a fence, an atomic and a
// second pass over its pieces (~1.5 us of latency): not worth it below 2x at k = 5. At
// k = 2..4 from 1.33x on: whole stripes left glm47 shared_gu (1536 stripes) on 96 of 132 SMs,
// and split it ran 7-13% faster at M = 1, 2, 4 for k = 2, 3 and 1-2.3% for k = 4 (H100,
// 2026-12-06, two sessions: k = 2 22.57 -> 20.48 us at M = 1, k = 4 28.04 -> 27.38 at M = 2);
// k = 5 ran 1.00-1.02x slower split, so it keeps 2x (bench/results/h100-ab-gemv-split-rule-session73.txt,
// h100-ab-gemv-split-rule-k4-session74.txt).
struct GemvDenseSplit {
  int64_t ctas = 1, warps = 1;
};
constexpr bool gemv_whole_stripes(int bits, int64_t stripes, int64_t warps) {
  return bits <= 4 ? stripes * 4 >= warps * 3 : stripes >= warps / 2;
}
constexpr GemvDenseSplit gemv_dense_split(int bits, int64_t stripes, int64_t units, int64_t sms, int64_t per_sm,
                                          int64_t max_ctas) {
  GemvDenseSplit s;
  const int64_t wave = std::max<int64_t>(max_ctas > 0 ? std::min(sms * per_sm, max_ctas) : sms * per_sm, 1);
  s.ctas = std::max<int64_t>(
      std::min<int64_t>(wave, (units + kGemvWarps * kGemvMinUnits - 1) / (kGemvWarps * kGemvMinUnits)), 1);
  s.warps = std::min<int64_t>(s.ctas * kGemvWarps, units);
  if (gemv_whole_stripes(bits, stripes, s.warps)) {
    s.warps = std::min<int64_t>(stripes, wave * kGemvWarps);
    s.ctas = (s.warps + kGemvWarps - 1) / kGemvWarps;
  }
  return s;
}

struct GemvArgs : LinearOperands {
  float* pieces = nullptr;         // [2 * warps of the grid][16][M] partial sums of split stripes
  int64_t piece_floats = 0;        // capacity of pieces
  unsigned* counters = nullptr;    // [stripes], zero between calls
  int64_t counter_count = 0;
  int M = 0, N = 0, K = 0;
  int supertiles = 0;  // per row (K / 128 rounded up)
  int stripes = 0;     // N / 16 rounded up
  bool x_vec = false;  // x rows 16-byte aligned and ldx % 8 == 0: 16-byte activation loads
  bool pdl = false;    // launch with programmatic stream serialization
  int max_ctas = 0;    // 0: one wave of resident CTAs on the current GPU
  // The codebook as fp16 divided by its largest |level| (entries 2^k.. unused), and
  // that level times the fp16 block-scale factor 16 (the tensor scale comes from meta).
  uint16_t codebook16[32] = {};
  float out_factor = 1.0f;
  // Grouped (kbit::expert_linear): W stacks `experts` matrices of N rows (stripes per
  // expert), x and y are [M, *] rows in expert order, expert e owning rows
  // [expert_offsets[e], expert_offsets[e + 1]) (device memory); each non-empty expert's
  // rows are taken tile_rows (1, 2 or 4) at a time, or by expert (kTileRowsByExpert).
  // No bias or residual.
  const int32_t* expert_offsets = nullptr;
  int experts = 0;
  int tile_rows = 1;
  // Where the staged x comes from (kbit::moe_forward folds its gather and SwiGLU into
  // the GEMV this way): row r is row x_gather[r] / x_gather_div of x (null: row r);
  // with x_swiglu, x rows hold [gate | up] halves of K columns each and column c is
  // silu(gate[c]) * up[c] rounded to x's type, as cuda::swiglu writes it.
  const int32_t* x_gather = nullptr;
  int x_gather_div = 1;
  bool x_swiglu = false;
  // Diagnostics (kbit bench gemv-probe): when set, lane 0 of every warp
  // of the grid writes kGemvProbeSlots values at probe[warp * kGemvProbeSlots]: the
  // %globaltimer (ns) at its phases (GemvProbe) and its unit count.
  unsigned long long* probe = nullptr;
};

inline constexpr int kGemvProbeSlots = 11;
enum GemvProbe : int {
  kProbeEntry = 0,        // first instruction
  kProbeLoadsIssued = 1,  // the first D units' weight loads issued
  kProbeTableBuilt = 2,   // the decode table in shared memory (this warp's share; grouped: after the tile table)
  kProbeXStaged = 3,      // after the barrier that ends x staging
  kProbeFirstPiece = 4,   // the first piece or stripe finished (y or a split piece written)
  kProbeLastUnit = 5,     // the last unit computed, before its finish
  kProbeExit = 6,         // the last finish done
  kProbeUnits = 7,        // value: units of this warp's range
  // Only in builds with -DKBIT_GEMV_PROBE_PHASES (each stamp moves the kernel's code):
  kProbeOffsetsRead = 8,  // grouped: the expert offsets used (this warp's share of the table written)
  kProbeXArrived = 9,     // the first chunk of x in registers (lane 0)
  // In every build again:
  kProbeSmid = 10,  // value: the SM the warp runs on (%smid)
};

// Grouped tiles by expert (GemvArgs::tile_rows == kTileRowsByExpert, the mixed kernel):
// class c holds the experts with 1, 2 or >= 3 rows (gemv_class_of), in tiles of
// gemv_class_rows(c) rows, on CTAs of its own (so an SM runs one class's code), as many as
// its units' cost asks. A uniform tile size reads an expert with more rows than a tile once
// per tile, and runs every expert with fewer as the tile's size.
inline constexpr int kGemvClasses = 3;
KBIT_HD constexpr int gemv_class_min_rows(int c) { return c + 1; }  // an expert's rows: 1, 2, 3..
KBIT_HD constexpr int gemv_class_max_rows(int c) { return c == 0 ? 1 : c == 1 ? 2 : 0x7fffffff; }
KBIT_HD constexpr int gemv_class_rows(int c) { return c == 0 ? 1 : c == 1 ? 2 : 4; }  // rows per tile
KBIT_HD constexpr bool gemv_class_holds(int c, int64_t expert_rows) {
  return expert_rows >= gemv_class_min_rows(c) && expert_rows <= gemv_class_max_rows(c);
}
KBIT_HD constexpr int gemv_class_of(int64_t expert_rows) {  // -1: no rows, no tiles
  return gemv_class_holds(0, expert_rows) ? 0 : gemv_class_holds(1, expert_rows) ? 1 : expert_rows > 0 ? 2 : -1;
}
KBIT_HD constexpr int64_t gemv_class_tiles(int c, int64_t expert_rows) {  // an expert's tiles in class c
  return gemv_class_holds(c, expert_rows) ? (expert_rows + gemv_class_rows(c) - 1) / gemv_class_rows(c) : 0;
}
// A unit's relative cost per class, for the CTA split: per-unit times of the classes' warps in
// one mixed launch (kbit bench gemv-probe --tile-rows -1 --per-cta, GLM-4.7 moe_gu / moe_dn
// T = 16; H200, 2026-12-04): k = 2 1 : 1.30-1.40 : 1.35-1.45 (the 2-row tiles' HFMA2 products
// cost what the 1-row ones' loads do: k = 2 is issue-bound), k = 4 1 : 1.09-1.11 :
// 1.13-1.18. k = 3 takes k = 4's (its dense M = 1 / 2 / 4 loops scale like k = 4's; not probed);
// k = 5 has no mixed kernel.
KBIT_HD constexpr int gemv_class_cost(int bits, int c) {
  if (bits == 2) return c == 0 ? 74 : c == 1 ? 100 : 105;
  return c == 0 ? 91 : c == 1 ? 100 : 106;
}
// gemv_class_cost, or the costs "c0,c1,c2" in KBIT_GEMV_CLASS_COSTS (for measuring the split; read once).
int gemv_class_cost_now(int bits, int c);
// Chunks of 8 values of x each thread requests before the weights when it stages x by loads.
inline constexpr int kGemvXEarlyChunks = 2;
// Whether a call staging x_rows rows per CTA stages x by bulk copies (GemvLaunch::x_bulk):
// rows of 16-byte multiples at 16-byte aligned addresses, no SwiGLU; grouped calls only
// where x is more than the loads' early requests cover (kGemvXBulkMinValues: below it grouped
// calls measured the same or up to 1% slower with copies). KBIT_GEMV_X_BULK=0 turns them off,
// =1 on wherever they can run (for measuring).
inline constexpr int64_t kGemvXBulkMinValues = int64_t(kGemvXEarlyChunks) * kGemvWarps * 32 * 8;
bool gemv_x_bulk(const GemvArgs& a, int64_t x_rows);
// The fewest CTAs class c can run on so that a CTA's units span at most x_rows /
// rows_per_tile tiles: a CTA's range of L <= tiles * units_per_tile / ctas + 48 units (even
// shares of 16 warps, or whole segments within kGemvSplitSlack of them) touches at most
// ceil(L / units_per_tile) + 1 tiles. 0x7fffffff: no count suffices.
KBIT_HD int64_t gemv_class_min_ctas(int64_t tiles, int64_t units_per_tile, int rows_per_tile, int64_t x_rows) {
  if (tiles == 0) return 0;
  const int64_t spare = (x_rows / rows_per_tile - 1) * units_per_tile - 48;
  return spare <= 0 ? 0x7fffffff : (tiles * units_per_tile + spare - 1) / spare;
}

// The mixed kernel's CTAs per class: in proportion to each class's work (tiles x unit cost),
// but never fewer than its min_ctas; a class held at its minimum leaves the rest of the grid
// to the others in proportion to theirs (min_ctas came first and the proportional share on
// top of it before: a class whose staged rows forced many CTAs got a share again, GLM-4.7
// moe_gu's 4-row tiles ended ~30% before the 1-row ones). The floor's remainder goes to the
// costliest class not at its minimum. false when the minima exceed the grid (the host's
// bound broken). Every class with tiles gets at least one CTA (min_ctas >= 1 then).
KBIT_HD constexpr bool gemv_class_split(const int64_t (&tiles)[kGemvClasses], int64_t units_per_tile, int64_t x_rows,
                                        const int (&cost)[kGemvClasses], int64_t grid, int64_t (&ctas)[kGemvClasses]) {
  int64_t min_ctas[kGemvClasses] = {}, work[kGemvClasses] = {}, need = 0;
  bool at_min[kGemvClasses] = {};
  for (int c = 0; c < kGemvClasses; ++c) {
    min_ctas[c] = gemv_class_min_ctas(tiles[c], units_per_tile, gemv_class_rows(c), x_rows);
    work[c] = tiles[c] * cost[c];
    need += min_ctas[c];
    at_min[c] = tiles[c] == 0;
  }
  if (need > grid) return false;
  // Hold at its minimum each class whose share falls below it, until the shares settle
  // (at most one class more per round).
  int64_t left = grid, left_work = 0;
  for (int round = 0; round <= kGemvClasses; ++round) {
    left = grid, left_work = 0;
    for (int c = 0; c < kGemvClasses; ++c) {
      if (at_min[c]) left -= min_ctas[c];
      else left_work += work[c];
    }
    bool moved = false;
    for (int c = 0; c < kGemvClasses; ++c)
      if (!at_min[c] && left * work[c] / left_work < min_ctas[c]) at_min[c] = moved = true;
    if (!moved) break;
  }
  int64_t spare = left, most = -1;
  int costliest = -1;
  for (int c = 0; c < kGemvClasses; ++c) {
    ctas[c] = at_min[c] ? min_ctas[c] : left * work[c] / left_work;
    if (!at_min[c]) spare -= ctas[c];
    if (!at_min[c] && work[c] > most) costliest = c, most = work[c];
  }
  if (costliest >= 0) ctas[costliest] += spare;
  return true;
}

// What a grouped launch needs, for the most tiles the rows can make.
struct GemvGroupedPlan {
  int64_t ctas = 0, x_rows = 0, smem = 0, segments = 0, piece_floats = 0;
  bool fits = false;  // shared memory, counters and partials all within their limits
};

// Where dynamic shared memory starts in a CTA's shared window on the current GPU
// (probed once per device with a synchronous copy: call it outside graph capture first).
int dynamic_smem_base();

// Shared memory the GEMV needs for (bits, M, K); 0 when it does not fit in one CTA.
int64_t gemv_smem_bytes(int bits, int64_t m, int64_t k);

// Grouped mode (a.expert_offsets set): whether it fits, and its sizes.
GemvGroupedPlan plan_grouped_gemv_k2(const GemvArgs& a);
GemvGroupedPlan plan_grouped_gemv_k3(const GemvArgs& a);
GemvGroupedPlan plan_grouped_gemv_k4(const GemvArgs& a);
GemvGroupedPlan plan_grouped_gemv_k5(const GemvArgs& a);

void launch_gemv_k2(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k3(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k4(const GemvArgs& a, DType t, cudaStream_t stream);
void launch_gemv_k5(const GemvArgs& a, DType t, cudaStream_t stream);

}  // namespace kbit::cuda::detail
