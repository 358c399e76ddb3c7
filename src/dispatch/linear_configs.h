// The tuned configuration table of kbit::linear (data/linear_configs.json, written by
// `kbit tune`, compiled in): for a GPU, bit width and shape, which path and fused
// kernel shape is fastest for M up to each tuned value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kbit/linear.h"
#include "kbit/skinny.h"

namespace kbit::detail {

// Above this M the default (untuned) plan is dequantize + cuBLASLt: on the H200 table of commit
// cdfe642 the fused kernel at M = 64 took 1.5-5x longer than the dequantize (from the M = 512
// rows) plus cuBLAS at M = 64; at M = 32 each won on some shapes.
inline constexpr int64_t kDefaultFusedMaxM = 32;
// Large W (N x K at least this many weights): the untuned plan takes the fused kernel with
// stripes items from n_tiles = 2 and up to M = kLargeFusedMaxM. Measured on the H200 at
// 70403c0 (glm47, k = 4): stripes items won on q, o, shared_gu, shared_dn (63-126 M weights;
// M = 16: 1.1-1.4x over cta items; M = 64: 1.06-1.5x over dequantize + cuBLASLt) and lost on
// kv, moe_gu, moe_dn (8-16 M weights).
inline constexpr int64_t kStripesMinWeights = int64_t(1) << 25;
inline constexpr int64_t kLargeFusedMaxM = 64;
// Untuned large W above kLargeFusedMaxM on Hopper: the tile kernel (wgmma_tile items, 128
// tokens per tile to M = 128, 256 above) up to M = kTileMaxM where 128-row x 128-token tiles
// number at least a quarter of the SMs, else dequantize + cuBLAS. H200, glm47 at M = 128 (2026-12-01,
// bench/results/h200-tile-ws-bench-glm47-m128-512-4096-session24.txt): q, o, shared_gu and
// shared_dn (40-192 tiles) 50-95 us against 82-159 dequantize + cuBLAS; kv and moe_gu (16, 24
// tiles) 33-36 us against 20-23. At M = 512 (H200, 2026-12-01, with the split tail) the 256-token
// kernel wins glm47 q, o, shared_dn and shared_gu (63-126 M weights; k = 4 q 109 us, o 124, against
// 133-140 for dequantize + cuBLAS), and the tuned table runs it there (q and shared_gu with this very
// plan); it loses on every smaller W. H200, 2026-12-05 (bench/results/h200-large-m-crossover-session62.*,
// the clocks held down by power on most rows): at M = 256 the untuned tile plans ran 60.8-65.6 us on
// q, o, shared_dn against 85.0-98.1 for dequantize + cuBLAS; at M = 1024 the tile kernel forced ran
// 0.96-1.03x dequantize + cuBLAS's time on those four, at M = 2048 1.03-1.16x; at M = 4096 dequantize +
// cuBLAS wins everywhere. So kTileMaxM = 512 since the sixty-second session (256 before, which gave
// M = 257..512 to dequantize + cuBLAS); M = 257..511 with it is not timed.
// Up to M = 128 its tiles' K work is cut evenly over the SMs (wgmma_stream items): H200,
// 2026-12-02, forced default plans at M = 128, k = 2..5, stream-K against whole tiles: glm47
// q 44.8-53.4 us against 47.2-58.2, o 45.9-53.8 against 63.7-78.4, kv 18.2-20.3 against
// 46.0-63.8, shared_gu 78.2-99.8 against 95.5-114.7 (bench/results/h200-stream-k-ab-m32-128-session37.txt).
inline constexpr int64_t kTileMaxM = 512;
// Untuned small W on Hopper: the tile kernel (wgmma_stream items: 64-token tiles to M = 64, 128 above)
// at M = 33..kSmallTileMaxM where N >= kSmallTileMinN and K >= kSmallTileMinK64 (M <= 64) or
// kSmallTileMinK128, else dequantize + cuBLAS. These follow what kbit tune chose on the H200 (tuned
// table; it times dequantize + cuBLAS against the tile kernels from M = 32): at M = 64, 26 of the 28
// small-W cases with N >= 2048 and K >= 1536 took wgmma_stream (2048 x 2048 at k = 4, 5 took the
// fused kernel), none took dequantize + cuBLAS; at M = 128, 14 of the 16 with K >= 3584 took
// wgmma_stream, and 22 of the 24 with K <= 2048 dequantize + cuBLAS. The margins are not in the table.
inline constexpr int64_t kSmallTileMaxM = 128;
// Untuned tile kernels up to this M run stream-K (wgmma_stream), above it whole tiles. Large W on Hopper
// takes them from M = 33 (kDefaultFusedMaxM). Measured on the H200 (2026-12-05, sixty-first session,
// kbit_linear_untuned against kbit_linear, bench/results/h200-untuned-vs-tuned-m48-128-session61.*): the
// fused kernel's stripes items that the untuned plan ran before at M = 48 and 64 were 1.19-1.82x slower than
// the tuned wgmma_stream plans on all 16 large-W rows (glm47 q, k = 3, M = 64: 1.82x). Stream-K does not
// need the tiles to fill the SMs. Its untuned tiles are 64 tokens up to M = 64, and up to
// kStreamKMaxM where N <= kStreamKNarrowMaxN (Qwen3 o, 2048 x 4096, M = 96 / 128: 128-token tiles
// 1.18-1.22x slower than the tuned 64-token ones; the H200 table takes 64 for N = 2048 there), else 128.
// With these rules the untuned plans at M = 33, 48, 64, 96, 128 ran 1.001-1.008x the tuned ones by
// geomean, worst 1.11x (h200-untuned-vs-tuned-m33-128-af3ca01-session61.*).
inline constexpr int64_t kStreamKMaxM = 128;
inline constexpr int64_t kStreamKNarrowMaxN = 2048;
inline constexpr int64_t kSmallTileMinN = 2048;
inline constexpr int64_t kSmallTileMinK64 = 1536;
inline constexpr int64_t kSmallTileMinK128 = 3584;
// Untuned small W at k >= 3: cta_shuffle items (no pair table) where K has at most this many
// 128-column supertiles and the 16-row stripes are no more than the SMs (one CTA's work each:
// the table's build is then on the critical path). kbit tune on the H200 (2026-12-01, best
// cta_shuffle against best cta plan, M = 1..16): 2048 x 512 0.90-0.97x, 512 x 2048 0.92-0.99x,
// 1024 x 2048 0.96-0.99x, 2048 x 2048 0.96-1.04x; above the stripes limit they lost
// (4096 x 2048 at k = 3, 4 1.02-1.08x; 5120 x 1536 at M <= 8 1.01-1.08x; 7168 x 3584 1.03-1.15x),
// and so they did on longer K (2048 x 5120 1.00-1.13x).
inline constexpr int64_t kShuffleMaxSupertiles = 16;
// The untuned plans at M = 5..16, refit in the sixty-first session to the H200 tunes of sessions 56 and 58
// (bench/results/h200-tune-m16-session56.txt.xz, h200-tune-k5-call{1,2}-session58.txt.xz: every candidate's
// screened time for all 18 dense shapes at M = 16 for k = 2..5, M = 12 for k = 3..5 and M = 8 for k = 5),
// since the per-warp x ring (fifty-fifth session) made two token tiles and warp shuffles cheaper:
// - small W at M = 9..16: n_tiles 2 unless N is at most kSmallHalfTileMaxN, cta items at k = 2 and
//   cta_shuffle at k >= 3 whatever K (glm47 kv, 2048 x 5120: cta_shuffle 7.3 us against 8.6-8.9 for
//   the cta items at n_tiles 1 that the earlier rule chose); small W at M = 5..8, k = 5: cta_shuffle;
// - 4 warps where the stripes number more than twice the SMs (Kimi 7168 x 3584, k = 3, M = 16:
//   cta_shuffle at 4 warps 14.3 us, at 8 warps 15.8);
// - large W: stripes items from M = 3 (at M = 5..8 the earlier cta items ran 5-11% slower: glm47 q,
//   k = 5, M = 8, 27.6 against 24.7 us), 8 warps where K has kLargeEightWarpsMinSupertiles (glm47 o
//   and shared_dn, K = 12288, tuned at 8 warps at every M = 4..32; q and shared_gu, K = 5120, at 4).
// bench/analysis/untuned_plans.py (each untuned plan's screened time against the fastest candidate
// of its case, planned without a GPU for the H200) on those logs: before, 1.123x by geomean at
// M = 9..16 (204 cases, up to 1.72x: glm47 moe_gu k = 5 M = 16, cta items at n_tiles 1, 19.0
// against 11.7 us; 12 more cases were plans the tune never timed, glm47 q with 5 splits) and 1.058x
// at M = 8 (18 cases, up to 1.22x); with these rules and linear.cpp's kStripesItemCost 1.008x (216
// cases, up to 1.09x) and 1.007x (up to 1.06x). Timed on the H200 as plans (kbit_linear_untuned against
// kbit_linear, h200-untuned-vs-tuned-m8-12-16-session61.*): 1.006x by geomean at M = 8, 12, 16 (216 rows, worst 1.10x).
// Small W at M = 17..32, first fit (sixty-first session): stripes items of two token tiles, split by the
// stripes cost. Timed on the H200 (kbit_linear_untuned against kbit_linear, 56 small-W rows per M,
// bench/results/h200-untuned-vs-tuned-m17-32-session61.*): 1.217x / 1.208x / 1.201x the tuned plans by
// geomean at M = 17 / 24 / 32 (worst 1.83x), where the earlier cta items at n_tiles 4 took 1.233x / 1.303x /
// 1.387x (worst 2.50x); the worst rows were Qwen3's K = 512 and 2048 shapes at k = 5, tuned to cta_shuffle
// items without a split where these stripes took 4-8 splits.
inline constexpr int64_t kSmallHalfTileMaxN = 1024;
// Small W at M = 17..32, second fit (sixty-second session), to the H200 table's M = 32 entries for the 40
// small-W cases, where the stripes cost above had chosen 4-8 splits on every Qwen3 shape (2048 x 512 at k = 5:
// 1.83x the tuned plan's time):
// - k = 5 with kSmallShuffleMinStripes..SMs stripes: cta_shuffle items, which take no split (CTA items never
//   split on 32 or more outputs, linear.cpp), as tuned for all 5 such shapes (512 x 2048 kept stripes items);
// - otherwise stripes items: one 32-token tile and 8 warps past twice the SMs in stripes (glm47 moe_dn
//   5120 x 1536, Kimi 7168 x 3584), else two token tiles, 4 warps up to kShuffleMaxSupertiles of K and 8
//   above; split so that the CTA items (stripes / warps x token tiles x splits) reach
//   kSmallStripesMinItemsPerSm per SM, with at least kSmallStripesMinSupertilesPerSplit supertiles per split
//   (512 x 2048: 6 splits; 1024 x 2048: 4; 2048 x 512: none; 2048 x 4096 and 2048 x 5120: 4; 5120 x 1536: 3).
// Timed on the H200 (2026-12-05, kbit_linear_untuned against kbit_linear, 56 small-W rows per M,
// bench/results/h200-untuned-vs-tuned-m17-32-session62.*): 1.072x / 1.063x by geomean at M = 17 / 32 (first
// fit: 1.217x / 1.201x); worst glm47 moe_gu 3072 x 5120 k = 5 (1.51x: tuned to the tile kernel) and Qwen3
// 2048 x 2048 and 4096 x 2048 (1.34-1.43x: tuned to CTA items of 8 warps without a split).
inline constexpr int64_t kSmallStripesMinSupertilesPerSplit = 3;
inline constexpr double kSmallStripesMinItemsPerSm = 0.8;
inline constexpr int64_t kSmallShuffleMinStripes = 64;
// Third fit: CTA items of 8 warps without a split (one 32-token tile past the SMs in stripes, cta_shuffle
// where the shuffle rule says) where the stripes are kSmallCtaMinStripes..2 x SMs (at k = 2, 3 no more than
// the SMs) and K has 8..kShuffleMaxSupertiles supertiles. Timed on the H200 (2026-12-05, sixty-fourth session,
// bench/results/h200-untuned-m17-512-session64.txt) in its first form, without the upper bounds: 0.89-1.02x the
// tuned plans' time on Qwen3 2048 x 2048 (all k) and 4096 x 2048 (k = 4, 5), but 1.38-1.53x on 4096 x 2048 at
// k = 2, 3 and 1.39-2.10x on glm47 moe_dn (320 stripes, all k), whose tuned plans are stripes items with 2-4
// splits; the bounds keep it to the first kind. With the bounds (H200, 2026-12-05, sixty-fifth session,
// bench/results/h200-untuned-m17-32-mended-session65.txt) all untuned small-W plans at M = 17..32 run 1.03x the
// tuned time by geomean (1.08-1.09x before), moe_dn exactly its tuned plan; left behind: glm47 moe_gu
// (long K, 192 stripes) 1.23-1.53x and Qwen3 4096 x 2048 at k = 2, 3 1.11-1.16x. The H200 table's M = 32 plans for Qwen3 2048 x 2048 (k = 2, 3, 5)
// and 4096 x 2048 (k = 4, 5) are these very plans, and they ran 1.34-1.43x faster than the second fit's stripes
// items in the timing above; 2048 x 2048 at k = 4 takes cta_shuffle here where the table has cta (0.89x the
// table's time at M = 32).
inline constexpr int64_t kSmallCtaMinStripes = 128;
inline constexpr int64_t kLargeEightWarpsMinSupertiles = 64;

struct LinearConfig {
  std::string device;  // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int bits = 4;
  // applies to M in (previous tuned M, m] and M > m / 2 (an entry tuned at M = 16 alone says
  // nothing about M = 1..8, where another kernel may win)
  int64_t n = 0, k = 0, m = 0;
  LinearPath path = LinearPath::fused_mma;
  int n_tiles = 1, warps = 4, splits = 1;
  double us = 0;  // measured median
  LinearItems items = LinearItems::cta;
  // bits 16 (kbit::skinny_gemm's kernels): the loader (kernel), 16-row stripes per CTA,
  // ring slots or batches in flight, columns per slot or batch; splits = the cluster size.
  SkinnyLoader loader = SkinnyLoader::tma;
  int stripes = 1, stages = 0, kslice = 0;
  // Tuned for programmatic-dependent launches (calls chained on a stream, each one's weight
  // requests overlapping the previous call's end): another shape can win there. A PDL
  // request takes such an entry first and falls back to the plain ones; a plain request
  // never takes it.
  bool pdl = false;
  // dequant_cublas: cuBLASLt's heuristic candidate for the GEMM (LinearPlan::gemm_algo).
  int gemm_algo = 0;
};

// Entries of a table in the data/linear_configs.json format; throws on malformed text.
std::vector<LinearConfig> parse_linear_configs(const std::string& json_text);
std::string linear_configs_to_json(const std::vector<LinearConfig>& entries);

// Tuned tables beside the compiled one: the files named in $KBIT_LINEAR_CONFIGS (':'-separated,
// each in the data/linear_configs.json format that `kbit tune --out FILE` writes), read at the first
// plan. Their entries are looked up first, in the files' order, so that a table tuned for a model
// the library does not carry (kbit tune --shapes) takes effect without a rebuild.
inline constexpr const char* kLinearConfigsEnv = "KBIT_LINEAR_CONFIGS";
std::vector<LinearConfig> load_linear_configs_file(const std::string& path);  // errors name the file
std::vector<LinearConfig> load_linear_config_files(const std::string& path_list);
std::vector<LinearConfig> read_user_linear_configs();    // $KBIT_LINEAR_CONFIGS's entries, read now
const std::vector<LinearConfig>& user_linear_configs();  // the same, read once per process
const std::vector<LinearConfig>& compiled_linear_configs();  // data/linear_configs.json as built in

// The entry for the current GPU (the user's tables first, then the compiled one), or null. `applies` (if set) rejects entries the
// caller cannot use (skinny: one tuned for another token-tile count); a PDL request falls
// back to the plain entries when no PDL entry applies.
using LinearConfigFilter = std::function<bool(const LinearConfig&)>;
const LinearConfig* find_linear_config(int bits, int64_t n, int64_t k, int64_t m, bool pdl = false,
                                       const LinearConfigFilter& applies = {});
const LinearConfig* find_linear_config(const std::vector<LinearConfig>& table, const std::string& device, int bits,
                                       int64_t n, int64_t k, int64_t m, bool pdl = false,
                                       const LinearConfigFilter& applies = {});
// `user`'s entry if it has one, else `compiled`'s.
const LinearConfig* find_linear_config(const std::vector<LinearConfig>& user, const std::vector<LinearConfig>& compiled,
                                       const std::string& device, int bits, int64_t n, int64_t k, int64_t m,
                                       bool pdl = false, const LinearConfigFilter& applies = {});

}  // namespace kbit::detail
