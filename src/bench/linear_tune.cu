#include "bench/linear_tune.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "bench/inputs.h"
#include "bench/timing.h"
#include "cuda/common.cuh"
#include "cuda/linear/fused_args.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_internal.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/linear.h"
#include "kbit/shapes.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

// Candidate plans for one case, deduplicated after plan_linear's normalisation.
std::vector<LinearOptions> candidates(int64_t m, int64_t n, int64_t k, int bits) {
  std::vector<LinearOptions> out;
  std::set<std::tuple<int, int, int, int, int, int>> seen;
  auto add = [&](LinearOptions o) {
    const LinearPlan p = plan_linear(m, n, k, bits, o);
    const int algo = p.path == LinearPath::dequant_cublas ? p.gemm_algo : 0;
    if (seen.insert({int(p.path), p.n_tiles, p.warps, p.splits, int(p.items), algo}).second) out.push_back(o);
  };
  // Token tiles: the default for M, twice it, and half it (two tiles re-read W but double
  // the items: glm47 o at M = 64 had only 40 stripe groups x 2 splits for 132 SMs).
  const int base = default_n_tiles(m);
  std::set<int> tiles{base, std::min(8, base * 2), std::max(1, base / 2)};
  // Splits only where they have won: in six runs on the H200 (202 cases, glm47, qwen3, kimi,
  // M = 8..64, k = 2..5; bench/results/h200-tune-*) no CTA-items plan with splits and no
  // warp-items plan with more than 2 came within 3% of the case's best (0 of ~3,800 and of
  // ~2,900 timed), while stripes items won with 1 to 12. Half the candidates, half the time;
  // the untuned plan is timed as well, whatever its splits.
  // Above 256 tokens only the tile kernels and dequantize + cuBLAS: in the tune at M = 512
  // (H200, all models, k = 2..5, bench/results/h200-tune-all-m128-512-session24.txt) no
  // mma.sync or wgmma-items plan won any of the 72 cases, and at M = 4096 each costs
  // milliseconds to time.
  // CTA items with 2..4 splits where the (stripe, token tile) items are few per SM: one item
  // per CTA leaves SMs with 3 items next to SMs with 2 (glm47 moe_dn at M = 16: 320 items on
  // 132 SMs), where splits even the SMs' shares out at the cost of the fix-up. On the H200
  // (M = 16, all models, k = 2..5, 2026-12-04) they won 1 case of 72 (glm47 moe_gu k = 5, -4%),
  // elsewhere 10-40% slower: a CTA then runs two items, each with its own pipeline fill.
  const bool small_items = m <= 256;
  auto cta_splits = [&](int nt, int splits) {
    return splits == 1 ||
           (splits <= 4 && detail::fused_output_items(m, n, nt) <= 4 * int64_t(cuda::detail::sm_count()));
  };
  for (int nt : small_items ? tiles : std::set<int>{})
    for (int warps : {4, 8})
      for (int splits : {1, 2, 3, 4, 6, 8, 12})
        for (LinearItems items : {LinearItems::cta, LinearItems::warp, LinearItems::stripes, LinearItems::cta_shuffle}) {
          if ((items == LinearItems::cta && !cta_splits(nt, splits)) || (items == LinearItems::warp && splits > 2)) continue;
          // cta items without the pair table: k >= 3, small n_tiles
          if (items == LinearItems::cta_shuffle &&
              (!cta_splits(nt, splits) || nt > cuda::detail::kCtaShuffleMaxNTiles || bits < 3))
            continue;
          LinearOptions o;
          o.path = LinearPath::fused_mma;
          o.n_tiles = nt, o.warps = warps, o.splits = splits, o.items = items;
          add(o);
        }
  // wgmma items (one warpgroup, the tensor cores reading x from shared memory) where the
  // token tile is 32 or 64 tokens and the GPU has wgmma, with the splits stripes items take.
  if (kbit::cuda::detail::device_has_wgmma() && small_items)
    for (int nt : tiles)
      for (int warps : {4, 8})  // one or two warpgroups sharing x
        for (int splits : {1, 2, 3, 4, 6, 8, 12})
          if (nt >= 4) {
            LinearOptions o;
            o.path = LinearPath::fused_mma;
            o.n_tiles = nt, o.warps = warps, o.splits = splits, o.items = LinearItems::wgmma;
            add(o);
          }
  // The tile kernel (wgmma_tile items) from 17 tokens: 64 tokens per tile (and 128 above 64),
  // one or two warpgroups, splits where the tiles alone leave SMs idle, or stream-K
  // (wgmma_stream items: the tiles' K work cut evenly over the SMs).
  if (kbit::cuda::detail::device_has_wgmma() && m > 16)
    for (int nt : {8, 16})
      for (int warps : {4, 8})
        for (int splits : {1, 2, 3, 4}) {
          if (nt == 16 && m <= 64) continue;
          LinearOptions o;
          o.path = LinearPath::fused_mma;
          o.n_tiles = nt, o.warps = warps, o.splits = splits, o.items = LinearItems::wgmma_tile;
          add(o);
          if (splits == 1) {  // the same tiles with stream-K work (no whole splits)
            o.items = LinearItems::wgmma_stream;
            add(o);
            if (warps == 8) {  // and on the warp-specialised kernel (8 decode + 8 MMA warps)
              o.warps = 16;
              add(o);
            }
          }
        }
  // The warp-specialised tile kernel (256 tokens) from M = 65: half a tile is padding at
  // M = 128, but its split tail can still beat the 128-token kernel on large W (glm47 o:
  // thirds at ~60 us against 63, estimated from the M = 512 runs).
  // Also with stream-K work, which balances the tiles over the SMs where the split tail
  // cannot (glm47 o at M = 512: 80 tiles of 96 supertiles for 132 SMs).
  if (kbit::cuda::detail::device_has_wgmma() && m > 64) {
    LinearOptions o;
    o.path = LinearPath::fused_mma;
    o.n_tiles = 32, o.items = LinearItems::wgmma_tile;
    add(o);
    o.items = LinearItems::wgmma_stream;
    add(o);
  }
  // Dequantize + cuBLASLt with each GEMM algorithm its heuristic offers: its first choice is not
  // always the fastest for these shapes (those it does not offer fail and are skipped).
  if (m >= 32)
    for (int algo = 0; algo < detail::kLtMaxCandidates; ++algo) {
      LinearOptions o;
      o.path = LinearPath::dequant_cublas;
      o.gemm_algo = algo;
      add(o);
    }
  LinearOptions g;
  g.path = LinearPath::gemv;
  try {
    add(g);  // M <= 4 with x fitting in one CTA's shared memory
  } catch (const Error&) {
  }
  return out;
}

}  // namespace

std::vector<LinearTuneRow> run_linear_tune(const LinearTuneOptions& o,
                                           const std::function<void(const LinearTuneRow&)>& on_row) {
  const std::vector<ModelShapes> models = select_model_shapes(o.shape_set.empty() ? model_shapes() : o.shape_set, o.models);
  for (int b : o.bits) require_supported_bits(b);
  for (int64_t m : o.ms) KBIT_REQUIRE(m >= 1 && m <= 65536, "--m values must be 1..65536, got ", m);
  for (const auto& name : o.projections)
    KBIT_REQUIRE(std::any_of(models.begin(), models.end(),
                             [&](const ModelShapes& m) {
                               return std::any_of(m.projections.begin(), m.projections.end(),
                                                  [&](const auto& p) { return p.name == name; });
                             }),
                 "--projection ", name, " is not a projection of the chosen models");
  KBIT_REQUIRE(cuda::device_available(), "kbit tune needs a CUDA GPU: ", cuda::device_description());
  const DeviceInfo dev = device_info();
  auto chosen = [&](const std::string& name) {
    return o.projections.empty() || std::find(o.projections.begin(), o.projections.end(), name) != o.projections.end();
  };
  const int64_t max_m = *std::max_element(o.ms.begin(), o.ms.end());
  std::vector<LinearTuneRow> rows;
  uint32_t seed = 7;
  for (const auto& model : models)
    for (const auto& p : model.projections) {
      if (!chosen(p.name)) continue;
      const std::vector<uint16_t> w = random_bf16(size_t(p.N * p.K), seed++, 0.05f);
      Buffer wd = upload(w);
      LinearWorkspace ws({max_m, p.N, p.K, true});
      for (int bits : o.bits) {
        const QuantizedMatrix flat =
            cuda::quantize(TensorView{wd.data(), DType::bf16, p.N, p.K}, Codebook::bnf(bits), nullptr);
        const size_t bytes = size_t(flat.storage_bytes());
        const int sets = linear_rotation_sets(bytes);  // the bench's rotation (weights alone: no fewer sets)
        std::vector<QuantizedMatrix> q;
        for (int i = 0; i < sets; ++i) q.push_back(cuda::repack(flat, Layout::mma16, nullptr));
        for (int64_t m : o.ms) {
          // x, y and the residual rotate with W, as in kbit bench (with one x, hot in L2, the
          // tune timed glm47 kv k = 2 M = 16 at 10.3 us where the bench timed the same plan
          // at 12.9 us, commit 33c4b77).
          const std::vector<uint16_t> x_host = random_bf16(size_t(m * p.K), seed++, 1.0f);
          const std::vector<uint16_t> r_host = p.residual ? random_bf16(size_t(m * p.N), seed++, 1.0f)
                                                          : std::vector<uint16_t>{};
          std::vector<Buffer> x, y, r;
          for (int i = 0; i < sets; ++i) {
            x.push_back(upload(x_host));
            y.push_back(Buffer::allocate(Memory::device, size_t(m * p.N) * 2));
            if (p.residual) r.push_back(upload(r_host));
          }
          TimingOptions t;
          t.calls_per_graph = std::max(sets, 8);
          const double est_us = std::max({double(bytes) / 3.5e6, 2.0 * double(m * p.N * p.K) / 5e8, 3.0});
          t.replays = int(std::clamp(2000.0 / (t.calls_per_graph * est_us), 1.0, 100.0));
          t.repeats = o.repeats;
          TimingOptions screen = t;
          screen.repeats = 1, screen.warmup_replays = 1;
          screen.settle_ms = 0.0;  // the finalists settle; ~75 screened candidates per case would not
          const bool screening = o.finalists > 0;
          auto time_plan = [&](const LinearOptions& base, const TimingOptions& how) {
            LinearOptions lo = base;
            return time_graph(
                       [&](cudaStream_t s, int call) {
                         const size_t i = size_t(call % sets);
                         if (p.residual) lo.residual = TensorView{r[i].data(), DType::bf16, m, p.N};
                         linear(TensorView{x[i].data(), DType::bf16, m, p.K}, q[i],
                                MutableTensorView{y[i].data(), DType::bf16, m, p.N}, ws, s, lo);
                       },
                       how)
                .median_us;
          };
          LinearTuneRow row;
          const LinearPlan heuristic = plan_linear(m, p.N, p.K, bits, LinearOptions{});
          row.heuristic_plan = heuristic.describe();
          {
            LinearOptions h;
            h.path = heuristic.path;
            if (heuristic.path == LinearPath::fused_mma)
              h.n_tiles = heuristic.n_tiles, h.warps = heuristic.warps, h.splits = heuristic.splits,
              h.items = heuristic.items;
            if (heuristic.path == LinearPath::dequant_cublas) h.gemm_algo = heuristic.gemm_algo;
            row.heuristic_us = time_plan(h, t);
          }
          // Screen every candidate with one sample after one warm-up replay, then time the
          // fastest few in full (5 samples after 3 warm-ups for each of ~75 candidates took
          // ~6 s per case on the H200 at M = 32, 64: 53 Qwen3 cases in 330 s at 6373c9f).
          std::vector<LinearOptions> ran;
          std::vector<double> screened;
          // The GEMM algorithms cuBLASLt offers for this very call (residual included).
          const int offered = m >= 32 ? detail::LtGemm::candidate_count(m, p.N, p.K, DType::bf16, p.residual) : 0;
          for (const LinearOptions& c : candidates(m, p.N, p.K, bits)) {
            if (c.path == LinearPath::dequant_cublas && c.gemm_algo >= offered) continue;
            double us = 0;
            try {
              us = time_plan(c, screening ? screen : t);
            } catch (const std::exception& e) {
              std::fprintf(stderr, "  %s: %s\n", plan_linear(m, p.N, p.K, bits, c).describe().c_str(), e.what());
              continue;
            }
            ran.push_back(c), screened.push_back(us);
            std::fprintf(stderr, "  %-64s %8.2f us%s\n", plan_linear(m, p.N, p.K, bits, c).describe().c_str(), us,
                         screening ? " (screen)" : "");
          }
          row.candidates = int(ran.size());
          KBIT_REQUIRE(row.candidates > 0, "tune: no plan ran for ", model.key, ".", p.name, " M=", m, " k=", bits);
          std::vector<size_t> finalists(ran.size());
          for (size_t i = 0; i < finalists.size(); ++i) finalists[i] = i;
          if (screening) finalists = tune_finalists(screened, o.finalists, o.finalist_margin);
          row.finalists = int(finalists.size());
          // A plan as the table entry that replays it.
          auto entry = [&](const LinearPlan& pl, double us) {
            detail::LinearConfig c{dev.name, bits, p.N, p.K, m, pl.path, pl.n_tiles, pl.warps, pl.splits, us, pl.items};
            if (pl.path == LinearPath::dequant_cublas) c.gemm_algo = pl.gemm_algo;
            return c;
          };
          double best = 1e300;
          for (size_t i : finalists) {
            const double us = screening ? time_plan(ran[i], t) : screened[i];
            if (screening)
              std::fprintf(stderr, "  %-64s %8.2f us (final)\n",
                           plan_linear(m, p.N, p.K, bits, ran[i]).describe().c_str(), us);
            if (us < best) {
              best = us;
              row.best = entry(plan_linear(m, p.N, p.K, bits, ran[i]), us);
            }
          }
          // The untuned plan (heuristic splits) is a candidate too: at 5d93ccc it beat every
          // listed one on glm47 o at M = 64, k = 3 and 5 (74.8 against 82.3 us).
          if (row.heuristic_us < best) row.best = entry(heuristic, row.heuristic_us);
          std::fprintf(stderr,
                       "%-36s k=%d M=%-5lld best %8.2f us (%s splits=%d n_tiles=%d warps=%d items=%s gemm_algo=%d) "
                       "heuristic %8.2f us\n",
                       (model.key + "." + p.name).c_str(), bits, (long long)m, row.best.us,
                       std::string(linear_path_name(row.best.path)).c_str(), row.best.splits, row.best.n_tiles,
                       row.best.warps, std::string(linear_items_name(row.best.items)).c_str(), row.best.gemm_algo,
                       row.heuristic_us);
          rows.push_back(row);
          if (on_row) on_row(row);
        }
      }
    }
  return rows;
}

std::vector<size_t> tune_finalists(const std::vector<double>& screened_us, int max_count, double margin) {
  std::vector<size_t> order(screened_us.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return screened_us[a] < screened_us[b]; });
  std::vector<size_t> out;
  const size_t cap = size_t(std::max(max_count, 1));
  for (size_t i : order) {
    if (out.size() == cap) break;
    if (out.size() >= 2 && screened_us[i] > screened_us[order[0]] * (1.0 + margin)) break;
    out.push_back(i);
  }
  return out;
}

std::vector<detail::LinearConfig> merge_linear_configs(std::vector<detail::LinearConfig> table,
                                                       const std::vector<detail::LinearConfig>& tuned) {
  for (const auto& t : tuned) {
    std::erase_if(table, [&](const detail::LinearConfig& c) {
      return c.device == t.device && c.bits == t.bits && c.n == t.n && c.k == t.k && c.m == t.m && c.pdl == t.pdl;
    });
    table.push_back(t);
  }
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) {
    return std::tie(a.device, a.bits, a.n, a.k, a.pdl, a.m) < std::tie(b.device, b.bits, b.n, b.k, b.pdl, b.m);
  });
  return table;
}

}  // namespace kbit::bench
