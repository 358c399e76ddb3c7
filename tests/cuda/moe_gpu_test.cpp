// MoE on the GPU against CPU references: routing (selections, offsets and the
// expert-order permutation exactly, weights within fp32 rounding, run-to-run bit
// identity, poisoned outputs), gather and combine against host loops, the grouped
// GEMM kbit::expert_linear against per-expert fp64 products; bad input.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "kbit/container.h"
#include "kbit/cpu.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/moe.h"
#include "cuda/device_checks.h"
#include "dispatch/linear_internal.h"
#include "support/gpu_test_support.h"

namespace kbit {
namespace {

using test::HostMatrix;
using test::random_matrix;
using test::upload;

template <typename T>
std::vector<T> download(const void* p, size_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

struct DeviceRoutingBuffers {
  Buffer expert, weight, offsets, sorted_pair, pair_row;
  DeviceRoutingBuffers(int64_t pairs, int64_t experts)
      : expert(Buffer::allocate(Memory::device, size_t(std::max<int64_t>(pairs, 1)) * 4)),
        weight(Buffer::allocate(Memory::device, size_t(std::max<int64_t>(pairs, 1)) * 4)),
        offsets(Buffer::allocate(Memory::device, size_t(experts + 1) * 4)),
        sorted_pair(Buffer::allocate(Memory::device, size_t(std::max<int64_t>(pairs, 1)) * 4)),
        pair_row(Buffer::allocate(Memory::device, size_t(std::max<int64_t>(pairs, 1)) * 4)) {}
  DeviceRouting view() {
    return {static_cast<int32_t*>(expert.data()), static_cast<float*>(weight.data()),
            static_cast<int32_t*>(offsets.data()), static_cast<int32_t*>(sorted_pair.data()),
            static_cast<int32_t*>(pair_row.data())};
  }
  void poison() {
    for (Buffer* b : {&expert, &weight, &offsets, &sorted_pair, &pair_row})
      ASSERT_EQ(cudaMemset(b->data(), 0xff, b->size()), cudaSuccess);
  }
};

TEST(GpuRouting, MatchesTheCpuReferenceExactlyAndIsBitIdentical) {
  KBIT_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 2.f);
  // E: 8 and 160 hold 8 logits per lane, 512 16, 1000 32 (select_token_in's three widths).
  for (int64_t experts : {1, 8, 160, 512, 1000})
    for (int top_k : {1, 2, 8, 10})
      // Up to 64 tokens one CTA selects and orders: by counting up to 256 pairs (T = 1, 16, and
      // 64 with top_k <= 2), by histograms above (64 with top_k 8, 10); then two kernels.
      for (int64_t tokens : {1, 16, 64, 300, 4096})
        for (int pattern = 0; pattern < 3; ++pattern) {  // random, skewed to the last experts, ties everywhere
          if (top_k > experts) continue;
          std::vector<float> l(size_t(tokens * experts));
          for (auto& v : l) v = pattern == 2 ? float(int(nd(rng))) : nd(rng);
          if (pattern == 1)
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t e = experts - top_k; e < experts; ++e) l[size_t(t * experts + e)] += 100.f;
          for (RoutingMode mode : {RoutingMode::topk_softmax, RoutingMode::softmax_topk}) {
            const std::string what = "E=" + std::to_string(experts) + " k=" + std::to_string(top_k) +
                                     " T=" + std::to_string(tokens) + " pattern " + std::to_string(pattern) + " " +
                                     std::string(routing_mode_name(mode));
            const Routing ref = cpu::route(l.data(), tokens, experts, top_k, mode);
            Buffer ld = Buffer::allocate(Memory::device, l.size() * 4);
            ASSERT_EQ(cudaMemcpy(ld.data(), l.data(), l.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
            const int64_t pairs = tokens * top_k;
            DeviceRoutingBuffers b(pairs, experts);
            std::vector<int32_t> first_rows;
            for (int run = 0; run < 2; ++run) {
              b.poison();
              cuda::route(static_cast<const float*>(ld.data()), tokens, experts, top_k, mode, b.view(), nullptr);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
              EXPECT_EQ(download<int32_t>(b.expert.data(), size_t(pairs)), ref.expert) << what;
              EXPECT_EQ(download<int32_t>(b.offsets.data(), size_t(experts + 1)), ref.offsets) << what;
              const auto sorted = download<int32_t>(b.sorted_pair.data(), size_t(pairs));
              EXPECT_EQ(sorted, ref.sorted_pair) << what;
              EXPECT_EQ(download<int32_t>(b.pair_row.data(), size_t(pairs)), ref.pair_row) << what;
              const auto w = download<float>(b.weight.data(), size_t(pairs));
              for (size_t p = 0; p < w.size(); ++p)
                ASSERT_NEAR(w[p], ref.weight[p], 1e-6 + 1e-5 * ref.weight[p]) << what << " pair " << p;
              if (run == 1) EXPECT_EQ(sorted, first_rows) << what << ": differs run to run";
              first_rows = sorted;
            }
          }
        }
}

TEST(GpuRouting, GatherAndCombineMatchHostLoops) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t tokens = 37, experts = 20, cols = 264;
  const int top_k = 4;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> l(size_t(tokens * experts));
  for (auto& v : l) v = nd(rng);
  const Routing ref = cpu::route(l.data(), tokens, experts, top_k, RoutingMode::topk_softmax);
  Buffer ld = Buffer::allocate(Memory::device, l.size() * 4);
  ASSERT_EQ(cudaMemcpy(ld.data(), l.data(), l.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  DeviceRoutingBuffers b(tokens * top_k, experts);
  cuda::route(static_cast<const float*>(ld.data()), tokens, experts, top_k, RoutingMode::topk_softmax, b.view(), nullptr);
  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    const HostMatrix x = random_matrix(tokens, cols, dt, 9);
    Buffer xd = upload(x);
    const size_t es = dtype_size(dt);
    Buffer xs = Buffer::allocate(Memory::device, size_t(tokens * top_k * cols) * es);
    ASSERT_EQ(cudaMemset(xs.data(), 0xff, xs.size()), cudaSuccess);
    cuda::gather_rows(TensorView{xd.data(), dt, tokens, cols}, static_cast<const int32_t*>(b.sorted_pair.data()), top_k,
                      MutableTensorView{xs.data(), dt, tokens * top_k, cols}, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> got(xs.size());
    ASSERT_EQ(cudaMemcpy(got.data(), xs.data(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t row = 0; row < tokens * top_k; ++row) {
      const int64_t t = ref.sorted_pair[size_t(row)] / top_k;
      ASSERT_EQ(std::memcmp(got.data() + size_t(row * cols) * es, x.bytes.data() + size_t(t * cols) * es,
                            size_t(cols) * es), 0)
          << dtype_name(dt) << " row " << row;
    }
    // Combine the gathered rows back (each expert output = its input): y = x * sum of weights = x.
    Buffer yd = Buffer::allocate(Memory::device, size_t(tokens * cols) * es);
    ASSERT_EQ(cudaMemset(yd.data(), 0, yd.size()), cudaSuccess);
    cuda::combine(TensorView{xs.data(), dt, tokens * top_k, cols}, b.view(), top_k,
                  MutableTensorView{yd.data(), dt, tokens, cols}, false, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    HostMatrix y{std::vector<uint8_t>(yd.size()), dt, tokens, cols, cols};
    ASSERT_EQ(cudaMemcpy(y.bytes.data(), yd.data(), yd.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    const double tol = dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 2e-3 : 1e-2;
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_NEAR(y.at(t, c), x.at(t, c), tol * (1 + std::fabs(x.at(t, c)))) << dtype_name(dt) << " " << t << "," << c;
  }
}

// y = x W_e^T for every row of expert e (rows [offsets[e], offsets[e + 1])), in fp64 over
// the dequantized weights (wd: E stacked [n, k] matrices); rows of no expert stay 0.
std::vector<double> per_expert_reference(const HostMatrix& xs, const std::vector<float>& wd,
                                         const std::vector<int32_t>& offsets, int64_t n, int64_t k) {
  std::vector<double> ref(size_t(xs.rows * n));
  for (size_t e = 0; e + 1 < offsets.size(); ++e)
    for (int32_t row = offsets[e]; row < offsets[e + 1]; ++row)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) acc += double(xs.at(row, c)) * double(wd[size_t((int64_t(e) * n + j) * k + c)]);
        ref[size_t(row * n + j)] = acc;
      }
  return ref;
}

// One expert_linear case against the fp64 reference over the dequantized experts, for
// the automatic choice, the fused kernel and (decode sizes) the grouped GEMV with every
// tile size and tiles by expert. pattern: 0 random logits, 1 all tokens on the first top_k experts, 2 the
// first, middle and last experts empty.
// tile_variants: only the automatic choice and the tile kernels (wgmma_tile items, every
// token tile size and warp count), which run on Hopper only.
void check_expert_linear(int bits, int64_t experts, int64_t n, int64_t k, int top_k, int64_t tokens, int pattern,
                         uint64_t seed, bool tile_variants = false) {
  const std::string what = "k=" + std::to_string(bits) + " E=" + std::to_string(experts) + " top_k=" +
                           std::to_string(top_k) + " T=" + std::to_string(tokens) + " pattern " +
                           std::to_string(pattern);
  std::mt19937 rng(uint32_t(seed++));
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> l(size_t(tokens * experts));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t e = 0; e < experts; ++e) {
      float v = nd(rng);
      if (pattern == 1 && e >= top_k) v = -INFINITY;
      if (pattern == 2 && (e == 0 || e == experts / 2 || e == experts - 1)) v = -INFINITY;
      l[size_t(t * experts + e)] = v;
    }
  const Routing r = cpu::route(l.data(), tokens, experts, top_k, RoutingMode::topk_softmax);
  const int64_t pairs = tokens * top_k;
  const HostMatrix x = random_matrix(tokens, k, DType::bf16, seed++);
  HostMatrix xs{std::vector<uint8_t>(size_t(pairs * k) * 2), DType::bf16, pairs, k, k};
  for (int64_t row = 0; row < pairs; ++row)
    std::memcpy(xs.bytes.data() + size_t(row * k) * 2,
                x.bytes.data() + size_t(r.sorted_pair[size_t(row)] / top_k * k) * 2, size_t(k) * 2);
  const HostMatrix w = random_matrix(experts * n, k, DType::bf16, seed++, 0.05f);
  const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(bits));
  std::vector<float> wd(size_t(experts * n * k));
  cpu::dequantize(flat, MutableTensorView{wd.data(), DType::f32, experts * n, k});
  const std::vector<double> ref = per_expert_reference(xs, wd, r.offsets, n, k);
  const QuantizedMatrix wq = cuda::to_device(cpu::repack(flat, Layout::mma16));
  Buffer xd = upload(xs), yd = Buffer::allocate(Memory::device, size_t(std::max<int64_t>(pairs, 1) * n) * 2);
  Buffer od = Buffer::allocate(Memory::device, r.offsets.size() * 4);
  ASSERT_EQ(cudaMemcpy(od.data(), r.offsets.data(), r.offsets.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  LinearWorkspace ws({pairs, n, k, false});
  // the automatic choice, the fused kernel, and (decode sizes) the grouped GEMV
  // with every tile size
  std::vector<std::pair<ExpertLinearOptions, std::string>> variants{{{}, "auto"}};
  if (tile_variants) {
    for (auto [n_tiles, warps] : {std::pair{8, 4}, {8, 8}, {16, 4}, {16, 8}, {32, 8}}) {
      ExpertLinearOptions t;
      t.items = LinearItems::wgmma_tile, t.n_tiles = n_tiles, t.warps = warps;
      variants.push_back({t, "wgmma_tile n_tiles=" + std::to_string(n_tiles) + " warps=" + std::to_string(warps)});
    }
  }
  ExpertLinearOptions fused;
  fused.path = LinearPath::fused_mma;
  if (!tile_variants) variants.push_back({fused, "fused_mma"});
  ExpertLinearOptions shared_x = fused;  // stripes of a CTA sharing x (a partial group when N = 48)
  shared_x.items = LinearItems::stripes;
  if (!tile_variants) variants.push_back({shared_x, "fused_mma items=stripes"});
  ExpertLinearOptions shuffle = fused;  // cta items without the pair table
  shuffle.items = LinearItems::cta_shuffle;  // n_tiles clamped to kCtaShuffleMaxNTiles where the rows per expert would take 4 or 8
  if (!tile_variants) variants.push_back({shuffle, "fused_mma items=cta_shuffle"});
  ExpertLinearOptions wgmma = fused;  // one warpgroup per 64 rows, 32 or 64 tokens per tile
  wgmma.items = LinearItems::wgmma;
  if (!tile_variants) variants.push_back({wgmma, "fused_mma items=wgmma"});
  ExpertLinearOptions wgmma2 = wgmma;  // two warpgroups sharing x
  wgmma2.warps = 8;
  if (!tile_variants) variants.push_back({wgmma2, "fused_mma items=wgmma warps=8"});
  if (pairs <= kGroupedGemvMaxRows && !tile_variants)
    for (int rows : {1, 2, 4, kTileRowsByExpert}) {
      ExpertLinearOptions g;
      g.path = LinearPath::gemv, g.tile_rows = rows;
      if (rows == kTileRowsByExpert && bits == 5) {  // k = 2..4 only: a clear error
        EXPECT_THROW(expert_linear(TensorView{xd.data(), DType::bf16, pairs, k}, wq, experts,
                                   static_cast<const int32_t*>(od.data()),
                                   MutableTensorView{yd.data(), DType::bf16, pairs, n}, ws, nullptr, g),
                     Error)
            << what;
        continue;
      }
      variants.push_back({g, "gemv tile_rows=" + std::to_string(rows)});
    }
  for (const auto& [opts, name] : variants)
    test::expect_accurate_and_deterministic(
        [&] {
          expert_linear(TensorView{xd.data(), DType::bf16, pairs, k}, wq, experts,
                        static_cast<const int32_t*>(od.data()),
                        MutableTensorView{yd.data(), DType::bf16, pairs, n}, ws, nullptr, opts);
        },
        yd, DType::bf16, ref, pairs * n, what + " " + name);
}

TEST(GpuExpertLinear, MatchesPerExpertFp64ForAnyRouting) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 48, k = 160;
  uint64_t seed = 100;
  for (int bits : {2, 4})
    for (int64_t experts : {1, 8, 160})
      for (int top_k : {1, 2, 8})
        for (int64_t tokens : {1, 16, 30, 300})  // 30 x top-8 = 240 rows: the grouped GEMV's upper range
          for (int pattern = 0; pattern < 3; ++pattern) {
            if (top_k > experts || (pattern == 2 && experts < top_k + 3)) continue;
            check_expert_linear(bits, experts, n, k, top_k, tokens, pattern, seed);
            seed += 3;
          }
}

// Prefill sizes through the tile kernels in grouped mode (the 64/128-token kernel and the
// warp-specialised 256-token one): experts of several tiles (all rows on top_k experts),
// partial tiles whose rows run into the next experts, empty experts first, middle and last,
// a partial group of 8 stripes (N = 144) and a K tail (K = 416: 3.25 supertiles).
TEST(GpuExpertLinear, TileKernelsGrouped) {
  KBIT_SKIP_WITHOUT_GPU();
  if (!cuda::detail::device_has_wgmma()) GTEST_SKIP() << "the tile kernels need an sm_90 GPU";
  uint64_t seed = 900;
  for (int bits : {2, 3, 4, 5})
    for (auto [experts, top_k, tokens, pattern] :
         {std::tuple<int64_t, int, int64_t, int>{8, 2, 300, 1}, {160, 8, 40, 2}, {160, 8, 300, 0}, {1, 1, 600, 0}}) {
      check_expert_linear(bits, experts, 144, 416, top_k, tokens, pattern, seed, true);
      seed += 3;
    }
}

// Decode sizes on experts large enough that the grouped GEMV splits (tile, stripe)
// segments between warps and a CTA's units span several tiles.
TEST(GpuExpertLinear, GroupedGemvOnLargerExperts) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 700;
  for (int bits : {2, 3, 4, 5})
    for (auto [experts, top_k, tokens] : {std::tuple<int64_t, int, int64_t>{16, 4, 4}, {16, 2, 16}, {64, 8, 1}, {64, 8, 30}})
      for (int pattern = 0; pattern < 2; ++pattern) {
        check_expert_linear(bits, experts, 512, 1024, top_k, tokens, pattern, seed);
        seed += 3;
      }
}

// Rows outside [offsets[0], offsets[E]) belong to no expert: the grouped GEMV (every tile
// size and tiles by expert; 1-row tiles derive their units from the rows, not from the offsets) leaves them as
// they were and computes the others. Here rows 0, 1 and the last two are nobody's, and
// experts 1, 4 and 7 are empty.
TEST(GpuExpertLinear, GroupedGemvLeavesRowsOfNoExpertUntouched) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t experts = 8, n = 48, k = 160, rows = 12;
  const std::vector<int32_t> offsets{2, 4, 4, 5, 7, 7, 9, 10, 10};
  for (int bits : {2, 4}) {
    const HostMatrix xs = random_matrix(rows, k, DType::bf16, 50 + bits);
    const HostMatrix w = random_matrix(experts * n, k, DType::bf16, 60 + bits, 0.05f);
    const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(bits));
    std::vector<float> wd(size_t(experts * n * k));
    cpu::dequantize(flat, MutableTensorView{wd.data(), DType::f32, experts * n, k});
    const QuantizedMatrix wq = cuda::to_device(cpu::repack(flat, Layout::mma16));
    Buffer xd = upload(xs), yd = Buffer::allocate(Memory::device, size_t(rows * n) * 2);
    Buffer od = Buffer::allocate(Memory::device, offsets.size() * 4);
    ASSERT_EQ(cudaMemcpy(od.data(), offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    LinearWorkspace ws({rows, n, k, false});
    for (int tile_rows : {1, 2, 4, kTileRowsByExpert}) {
      const std::string what = "k=" + std::to_string(bits) + " tile_rows=" + std::to_string(tile_rows);
      ExpertLinearOptions g;
      g.path = LinearPath::gemv, g.tile_rows = tile_rows;
      ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
      ASSERT_NO_THROW(expert_linear(TensorView{xd.data(), DType::bf16, rows, k}, wq, experts,
                                    static_cast<const int32_t*>(od.data()),
                                    MutableTensorView{yd.data(), DType::bf16, rows, n}, ws, nullptr, g))
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const auto got = test::download16(yd.data(), size_t(rows * n));
      const std::vector<double> all = per_expert_reference(xs, wd, offsets, n, k);
      std::vector<uint16_t> owned;
      std::vector<double> ref;
      for (int64_t row = offsets.front(); row < offsets.back(); ++row)
        for (int64_t j = 0; j < n; ++j) {
          ref.push_back(all[size_t(row * n + j)]);
          owned.push_back(got[size_t(row * n + j)]);
        }
      EXPECT_LE(test::relative_error(DType::bf16, owned, ref, int64_t(ref.size())), test::tolerance(DType::bf16))
          << what;
      for (int64_t row : {0, 1, 10, 11})
        for (int64_t j = 0; j < n; ++j)
          ASSERT_EQ(got[size_t(row * n + j)], 0xffffu) << what << ": row " << row << " of no expert was written";
    }
  }
}

// More rows than experts would take 4-row tiles, but at K = 5120 and N = 48 a CTA's units
// span up to 7 tiles: 28 staged rows of x (287 KB) do not fit in shared memory, nor 14 at
// 2-row tiles; 7 at 1-row tiles do. The automatic path falls back to them (bit-identical to
// forcing them) where a forced size that does not fit is an error.
TEST(GpuExpertLinear, GroupedGemvTakesSmallerTilesWhereXDoesNotFit) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t experts = 160, n = 48, k = 5120;
  std::vector<int32_t> offsets{0};  // experts 0..31 two rows, the others one: 192 rows
  for (int64_t e = 0; e < experts; ++e) offsets.push_back(offsets.back() + (e < 32 ? 2 : 1));
  const int64_t rows = offsets.back();
  const HostMatrix xs = random_matrix(rows, k, DType::bf16, 81);
  const HostMatrix w = random_matrix(experts * n, k, DType::bf16, 82, 0.05f);
  const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(4));
  std::vector<float> wd(size_t(experts * n * k));
  cpu::dequantize(flat, MutableTensorView{wd.data(), DType::f32, experts * n, k});
  const std::vector<double> ref = per_expert_reference(xs, wd, offsets, n, k);
  const QuantizedMatrix wq = cuda::to_device(cpu::repack(flat, Layout::mma16));
  Buffer xd = upload(xs), yd = Buffer::allocate(Memory::device, size_t(rows * n) * 2);
  Buffer od = Buffer::allocate(Memory::device, offsets.size() * 4);
  ASSERT_EQ(cudaMemcpy(od.data(), offsets.data(), od.size(), cudaMemcpyHostToDevice), cudaSuccess);
  LinearWorkspace ws({rows, n, k, false});
  auto run = [&](int tile_rows) {
    ExpertLinearOptions o;
    if (tile_rows) o.path = LinearPath::gemv, o.tile_rows = tile_rows;
    ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
    expert_linear(TensorView{xd.data(), DType::bf16, rows, k}, wq, experts, static_cast<const int32_t*>(od.data()),
                  MutableTensorView{yd.data(), DType::bf16, rows, n}, ws, nullptr, o);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  };
  for (int forced : {2, 4}) EXPECT_THROW(run(forced), Error) << "tile_rows=" << forced << " should not fit";
  // Tiles by expert would take 2-row tiles for experts 0..31 and 1-row ones for the rest, but
  // with 3 stripes per expert a CTA of a class must be able to span 2 more tiles than its
  // share, and 9 staged rows at K = 5120 (x after the 64 KB table) leave 4-row tiles no room
  // for any routing: not fitted, so the automatic path skips them.
  EXPECT_THROW(run(kTileRowsByExpert), Error) << "tiles by expert should not fit";
  run(1);
  const auto one_row = test::download16(yd.data(), size_t(rows * n));
  EXPECT_LE(test::relative_error(DType::bf16, one_row, ref, rows * n), test::tolerance(DType::bf16));
  run(0);
  EXPECT_EQ(test::download16(yd.data(), size_t(rows * n)), one_row) << "auto is not the 1-row grouped gemv";
}

// Experts quantized from rotated rows: expert_linear rotates x first, on every path.
TEST(GpuExpertLinear, RotatedExpertsRotateTheActivations) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t experts = 4, n = 32, k = 512, rows = 6;
  const std::vector<int32_t> offsets{0, 2, 2, 5, 6};  // expert 1 empty
  Buffer od = Buffer::allocate(Memory::device, offsets.size() * 4);
  ASSERT_EQ(cudaMemcpy(od.data(), offsets.data(), od.size(), cudaMemcpyHostToDevice), cudaSuccess);
  LinearWorkspace ws({rows, experts * n, k, false});
  for (RotationMode mode : {RotationMode::block, RotationMode::row}) {
    const Rotation rot = Rotation::make(mode, 64, k, 7);
    HostMatrix w = random_matrix(experts * n, k, DType::f32, 41, 0.02f, 0.001);
    hadamard_rotate(w.mutable_view(), rot);
    QuantizedMatrix qh = cpu::quantize(w.view(), Codebook::bnf(3));
    qh.set_rotation(rot);
    const QuantizedMatrix qd = cuda::repack(cuda::to_device(qh), Layout::mma16, nullptr);
    const HostMatrix x = random_matrix(rows, k, DType::f16, 42);
    HostMatrix xr = random_matrix(rows, k, DType::f32, 0);
    hadamard_rotate(x.view(), xr.mutable_view(), rot);
    const std::vector<double> all = cpu::matmul_fp64(xr.view(), qh);  // [rows, experts * n]
    std::vector<double> ref(size_t(rows * n));
    for (int64_t e = 0; e < experts; ++e)
      for (int32_t r = offsets[size_t(e)]; r < offsets[size_t(e) + 1]; ++r)
        for (int64_t j = 0; j < n; ++j) ref[size_t(r * n + j)] = all[size_t(r * experts * n + e * n + j)];
    Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(rows * n) * 2);
    for (LinearPath path : {LinearPath::automatic, LinearPath::gemv, LinearPath::fused_mma}) {
      ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
      ExpertLinearOptions o;
      o.path = path;
      expert_linear(TensorView{xd.data(), DType::f16, rows, k}, qd, experts, static_cast<const int32_t*>(od.data()),
                    MutableTensorView{yd.data(), DType::f16, rows, n}, ws, nullptr, o);
      EXPECT_LE(test::relative_error(DType::f16, test::download16(yd.data(), size_t(rows * n)), ref, rows * n), 3e-3)
          << (mode == RotationMode::block ? "block " : "row ") << linear_path_name(path);
    }
  }
}

// bf16 rounding, as the GPU stores every intermediate.
double bf16_round(double v) { return bf16_bits_to_float(float_to_bf16_bits(float(v))); }

// Dequantized rows of a flat host matrix as floats.
std::vector<float> dequantized(const QuantizedMatrix& flat) {
  std::vector<float> out(size_t(flat.rows() * flat.cols()));
  cpu::dequantize(flat, MutableTensorView{out.data(), DType::f32, flat.rows(), flat.cols()});
  return out;
}

// moe_forward's result in fp64 from the stacks (host, flat): per token, the shared expert (if
// given) plus each selected expert's down(swiglu(gate_up(x))) times its routing weight, the
// intermediates rounded to bf16 as the kernels round them.
std::vector<double> moe_reference(const HostMatrix& x, const std::vector<float>& logits, int top_k,
                                  const QuantizedMatrix& gu, const QuantizedMatrix& dn, int64_t experts,
                                  const QuantizedMatrix* sgu = nullptr, const QuantizedMatrix* sdn = nullptr) {
  const int64_t tokens = x.rows, hidden = x.cols, inter = dn.cols();
  const auto gu_f = dequantized(gu), dn_f = dequantized(dn);
  const std::vector<float> sgu_f = sgu ? dequantized(*sgu) : std::vector<float>{},
                           sdn_f = sdn ? dequantized(*sdn) : std::vector<float>{};
  // One expert (or the shared one) on one token.
  auto ffn = [&](const std::vector<float>& wgu, const std::vector<float>& wdn, int64_t row0_gu, int64_t row0_dn,
                 int64_t width, int64_t t) {
    std::vector<double> hmid(static_cast<size_t>(width));
    for (int64_t i = 0; i < width; ++i) {
      double g = 0, u = 0;
      for (int64_t c = 0; c < hidden; ++c) {
        g += double(x.at(t, c)) * wgu[size_t((row0_gu + i) * hidden + c)];
        u += double(x.at(t, c)) * wgu[size_t((row0_gu + width + i) * hidden + c)];
      }
      g = bf16_round(g), u = bf16_round(u);
      hmid[size_t(i)] = bf16_round(g / (1 + std::exp(-g)) * u);
    }
    std::vector<double> out(static_cast<size_t>(hidden));
    for (int64_t j = 0; j < hidden; ++j) {
      double acc = 0;
      for (int64_t i = 0; i < width; ++i) acc += hmid[size_t(i)] * wdn[size_t((row0_dn + j) * width + i)];
      out[size_t(j)] = bf16_round(acc);
    }
    return out;
  };
  const Routing r = cpu::route(logits.data(), tokens, experts, top_k, RoutingMode::topk_softmax);
  std::vector<double> ref(size_t(tokens * hidden), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    if (sgu && sdn) {
      const auto s = ffn(sgu_f, sdn_f, 0, 0, sdn->cols(), t);
      for (int64_t j = 0; j < hidden; ++j) ref[size_t(t * hidden + j)] = s[size_t(j)];
    }
    for (int s = 0; s < top_k; ++s) {
      const int64_t e = r.expert[size_t(t * top_k + s)];
      const auto o = ffn(gu_f, dn_f, e * 2 * inter, e * hidden, inter, t);
      for (int64_t j = 0; j < hidden; ++j) ref[size_t(t * hidden + j)] += r.weight[size_t(t * top_k + s)] * o[size_t(j)];
    }
  }
  return ref;
}

std::vector<float> random_logits(int64_t tokens, int64_t experts, uint64_t seed) {
  std::mt19937 rng{uint32_t(seed)};
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> logits(size_t(tokens * experts));
  for (auto& v : logits) v = nd(rng);
  return logits;
}

TEST(GpuMoeForward, MatchesTheCpuReferenceWithAndWithoutSharedExpert) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t hidden = 64, inter = 32, experts = 8, shared_inter = 48;
  const int top_k = 2;
  for (int64_t tokens : {1, 5, 16, 80})  // 80 x top-2 = 160 rows: past the grouped GEMV, unfolded
    for (bool shared : {false, true}) {
      const std::string what = "T=" + std::to_string(tokens) + (shared ? " shared" : "");
      uint64_t seed = 500 + uint64_t(tokens) * 2 + (shared ? 1 : 0);
      const HostMatrix x = random_matrix(tokens, hidden, DType::bf16, seed++);
      const std::vector<float> logits = random_logits(tokens, experts, seed++);
      const QuantizedMatrix gu = cpu::quantize(random_matrix(experts * 2 * inter, hidden, DType::bf16, seed++, 0.1f).view(),
                                               Codebook::bnf(4));
      const QuantizedMatrix dn = cpu::quantize(random_matrix(experts * hidden, inter, DType::bf16, seed++, 0.1f).view(),
                                               Codebook::bnf(4));
      const QuantizedMatrix sgu = cpu::quantize(random_matrix(2 * shared_inter, hidden, DType::bf16, seed++, 0.1f).view(),
                                                Codebook::bnf(4));
      const QuantizedMatrix sdn = cpu::quantize(random_matrix(hidden, shared_inter, DType::bf16, seed++, 0.1f).view(),
                                                Codebook::bnf(4));
      const std::vector<double> ref =
          moe_reference(x, logits, top_k, gu, dn, experts, shared ? &sgu : nullptr, shared ? &sdn : nullptr);
      const QuantizedMatrix gud = cuda::to_device(cpu::repack(gu, Layout::mma16)),
                            dnd = cuda::to_device(cpu::repack(dn, Layout::mma16)),
                            sgud = cuda::to_device(cpu::repack(sgu, Layout::mma16)),
                            sdnd = cuda::to_device(cpu::repack(sdn, Layout::mma16));
      MoeWeights w;
      w.gate_up = &gud, w.down = &dnd, w.experts = experts;
      if (shared) w.shared_gate_up = &sgud, w.shared_down = &sdnd;
      MoeWorkspace ws({80, hidden, inter, experts, top_k, shared ? shared_inter : 0});
      Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(tokens * hidden) * 2);
      Buffer ld = Buffer::allocate(Memory::device, logits.size() * 4);
      ASSERT_EQ(cudaMemcpy(ld.data(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      MoeOptions o;
      o.top_k = top_k;
      test::expect_accurate_and_deterministic(
          [&] {
            moe_forward(TensorView{xd.data(), DType::bf16, tokens, hidden}, static_cast<const float*>(ld.data()), w,
                        MutableTensorView{yd.data(), DType::bf16, tokens, hidden}, ws, nullptr, o);
          },
          yd, DType::bf16, ref, tokens * hidden, what);
    }
}

// A MoE layer as a user gets it: kbit quantize's per-expert tensors (each under its own tensor scale,
// in a checkpoint file), io::load_moe_layer's stacks, repacked and on the device, through moe_forward.
TEST(GpuMoeForward, LayerFromAQuantizedCheckpoint) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t hidden = 96, inter = 64, shared_inter = 32, experts = 6;
  const int top_k = 2;
  const auto dir = test::temp_dir("moe_checkpoint");
  const std::string layer = "model.layers.0.mlp";
  {
    std::map<std::string, QuantizedMatrix> q;
    uint64_t seed = 900;
    auto quantized = [&](const std::string& name, int64_t rows, int64_t cols, float sigma) {
      q.emplace(name, cpu::quantize(random_matrix(rows, cols, DType::bf16, seed++, sigma).view(), Codebook::bnf(4)));
    };
    for (int64_t e = 0; e < experts; ++e) {  // sigmas 2^-e apart: six tensor scales in one stack
      const std::string p = layer + ".experts." + std::to_string(e) + ".";
      quantized(p + "gate_proj.weight", inter, hidden, 0.1f * float(1 << e));
      quantized(p + "up_proj.weight", inter, hidden, 0.1f);
      quantized(p + "down_proj.weight", hidden, inter, 0.1f / float(1 << e));
    }
    quantized(layer + ".shared_expert.gate_proj.weight", shared_inter, hidden, 0.1f);
    quantized(layer + ".shared_expert.up_proj.weight", shared_inter, hidden, 0.2f);
    quantized(layer + ".shared_expert.down_proj.weight", hidden, shared_inter, 0.1f);
    io::SafetensorsWriter w((dir / "model.safetensors").string());
    for (const auto& [name, m] : q) io::declare_quantized(w, name, m.rows(), m.cols(), m.bits());
    w.begin();
    for (const auto& [name, m] : q) io::write_quantized(w, name, m);
    w.finish();
  }
  const io::MoeLayer l = io::load_moe_layer(io::Checkpoint::open((dir / "model.safetensors").string()), layer);
  ASSERT_TRUE(l.has_shared);
  const QuantizedMatrix gud = cuda::to_device(cpu::repack(l.gate_up, Layout::mma16)),
                        dnd = cuda::to_device(cpu::repack(l.down, Layout::mma16)),
                        sgud = cuda::to_device(cpu::repack(l.shared_gate_up, Layout::mma16)),
                        sdnd = cuda::to_device(cpu::repack(l.shared_down, Layout::mma16));
  MoeWeights w;
  w.gate_up = &gud, w.down = &dnd, w.experts = l.experts, w.shared_gate_up = &sgud, w.shared_down = &sdnd;
  MoeWorkspace ws({16, l.hidden, l.intermediate, l.experts, top_k, l.shared_intermediate});
  MoeOptions o;
  o.top_k = top_k;
  for (int64_t tokens : {1, 3, 16}) {
    const HostMatrix x = random_matrix(tokens, hidden, DType::bf16, 950 + uint64_t(tokens));
    const std::vector<float> logits = random_logits(tokens, experts, 960 + uint64_t(tokens));
    const std::vector<double> ref =
        moe_reference(x, logits, top_k, l.gate_up, l.down, l.experts, &l.shared_gate_up, &l.shared_down);
    Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(tokens * hidden) * 2);
    Buffer ld = Buffer::allocate(Memory::device, logits.size() * 4);
    ASSERT_EQ(cudaMemcpy(ld.data(), logits.data(), logits.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    test::expect_accurate_and_deterministic(
        [&] {
          moe_forward(TensorView{xd.data(), DType::bf16, tokens, hidden}, static_cast<const float*>(ld.data()), w,
                      MutableTensorView{yd.data(), DType::bf16, tokens, hidden}, ws, nullptr, o);
        },
        yd, DType::bf16, ref, tokens * hidden, "T=" + std::to_string(tokens));
  }
  std::filesystem::remove_all(dir);
}

// moe_forward's folds: a GEMV that stages x through the gather of rows or through
// SwiGLU gives exactly what the separate kernel followed by the GEMV gives (both round
// the intermediate to x's type), grouped and dense, vector and scalar x loads.
TEST(GpuGemvStagedInput, GatherAndSwigluFoldsEqualTheSeparateKernelsBitForBit) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 900;
  const int64_t experts = 8, n = 64, top_k = 2;
  for (int bits : {2, 3, 4, 5})
    for (DType dt : {DType::bf16, DType::f16})
      for (int64_t k : {100, 1032}) {  // 100: rows not 16-byte aligned (scalar loads)
        const std::string what = "k=" + std::to_string(bits) + " " + std::string(dtype_name(dt)) + " K=" +
                                 std::to_string(k);
        const QuantizedMatrix wg = cuda::to_device(cpu::repack(
            cpu::quantize(random_matrix(experts * n, k, DType::bf16, seed++, 0.1f).view(), Codebook::bnf(bits)),
            Layout::mma16));
        const QuantizedMatrix wd = cuda::to_device(
            cpu::repack(cpu::quantize(random_matrix(n, k, DType::bf16, seed++, 0.1f).view(), Codebook::bnf(bits)),
                        Layout::mma16));
        LinearWorkspace ws({64, experts * n, 2 * k, false});
        std::mt19937 rng(uint32_t(seed++));
        auto bits_of = [&](const Buffer& b, int64_t count) { return test::download16(b.data(), size_t(count)); };
        auto poisoned = [&](int64_t count) {
          Buffer b = Buffer::allocate(Memory::device, size_t(count) * 2);
          EXPECT_EQ(cudaMemset(b.data(), 0xff, b.size()), cudaSuccess);
          return b;
        };
        for (int64_t tokens : {1, 2, 24}) {
          const int64_t pairs = tokens * top_k;
          // A routing: random counts per expert (empty ones included), a random permutation.
          std::vector<int32_t> offsets(static_cast<size_t>(experts + 1), 0), sorted(static_cast<size_t>(pairs));
          for (int64_t p = 0; p < pairs; ++p) ++offsets[size_t(1 + rng() % experts)];
          for (int64_t e = 0; e < experts; ++e) offsets[size_t(e + 1)] += offsets[size_t(e)];
          for (int64_t p = 0; p < pairs; ++p) sorted[size_t(p)] = int32_t(p);
          std::shuffle(sorted.begin(), sorted.end(), rng);
          Buffer od = Buffer::allocate(Memory::device, offsets.size() * 4);
          Buffer sd = Buffer::allocate(Memory::device, sorted.size() * 4);
          ASSERT_EQ(cudaMemcpy(od.data(), offsets.data(), od.size(), cudaMemcpyHostToDevice), cudaSuccess);
          ASSERT_EQ(cudaMemcpy(sd.data(), sorted.data(), sd.size(), cudaMemcpyHostToDevice), cudaSuccess);
          const int32_t* off = static_cast<const int32_t*>(od.data());
          const int32_t* sp = static_cast<const int32_t*>(sd.data());
          const HostMatrix x = random_matrix(tokens, k, dt, seed++), gu = random_matrix(pairs, 2 * k, dt, seed++, 2.0f);
          const Buffer xd = upload(x), gud = upload(gu);
          const TensorView xv{xd.data(), dt, tokens, k}, guv{gud.data(), dt, pairs, 2 * k};
          ExpertLinearOptions gemv;
          gemv.path = LinearPath::gemv;
          // grouped, gather
          Buffer xs = poisoned(pairs * k), ya = poisoned(pairs * n), yb = poisoned(pairs * n);
          cuda::gather_rows(xv, sp, int(top_k), MutableTensorView{xs.data(), dt, pairs, k}, nullptr);
          expert_linear(TensorView{xs.data(), dt, pairs, k}, wg, experts, off, MutableTensorView{ya.data(), dt, pairs, n},
                        ws, nullptr, gemv);
          EXPECT_TRUE(detail::try_grouped_gemv(xv, {sp, int(top_k), false}, wg, experts, off,
                                               MutableTensorView{yb.data(), dt, pairs, n}, ws, nullptr))
              << what;
          EXPECT_EQ(bits_of(ya, pairs * n), bits_of(yb, pairs * n)) << what << " grouped gather T=" << tokens;
          // grouped, SwiGLU
          Buffer h = poisoned(pairs * k), za = poisoned(pairs * n), zb = poisoned(pairs * n);
          cuda::swiglu(guv, MutableTensorView{h.data(), dt, pairs, k}, nullptr);
          expert_linear(TensorView{h.data(), dt, pairs, k}, wg, experts, off, MutableTensorView{za.data(), dt, pairs, n},
                        ws, nullptr, gemv);
          EXPECT_TRUE(detail::try_grouped_gemv(guv, {nullptr, 1, true}, wg, experts, off,
                                               MutableTensorView{zb.data(), dt, pairs, n}, ws, nullptr))
              << what;
          EXPECT_EQ(bits_of(za, pairs * n), bits_of(zb, pairs * n)) << what << " grouped swiglu T=" << tokens;
          if (pairs > 4) continue;
          // dense (M = pairs <= 4), gather and SwiGLU
          LinearOptions dense;
          dense.path = LinearPath::gemv;
          Buffer da = poisoned(pairs * n), db = poisoned(pairs * n);
          linear(TensorView{xs.data(), dt, pairs, k}, wd, MutableTensorView{da.data(), dt, pairs, n}, ws, nullptr, dense);
          EXPECT_TRUE(detail::try_dense_gemv(xv, {sp, int(top_k), false}, wd, MutableTensorView{db.data(), dt, pairs, n},
                                             ws, nullptr, true));
          EXPECT_EQ(bits_of(da, pairs * n), bits_of(db, pairs * n)) << what << " dense gather M=" << pairs;
          Buffer ea = poisoned(pairs * n), eb = poisoned(pairs * n);
          linear(TensorView{h.data(), dt, pairs, k}, wd, MutableTensorView{ea.data(), dt, pairs, n}, ws, nullptr, dense);
          EXPECT_TRUE(detail::try_dense_gemv(guv, {nullptr, 1, true}, wd, MutableTensorView{eb.data(), dt, pairs, n}, ws,
                                             nullptr, true));
          EXPECT_EQ(bits_of(ea, pairs * n), bits_of(eb, pairs * n)) << what << " dense swiglu M=" << pairs;
        }
      }
}

TEST(GpuRouting, BadInputIsAClearError) {
  KBIT_SKIP_WITHOUT_GPU();
  DeviceRoutingBuffers b(64, 8);
  Buffer ld = Buffer::allocate(Memory::device, 64 * 8 * 4);
  using test::expect_error;
  const float* l = static_cast<const float*>(ld.data());
  expect_error([&] { cuda::route(l, 4, 8, 9, RoutingMode::topk_softmax, b.view(), nullptr); }, "top_k must be");
  expect_error([&] { cuda::route(l, 4, 2000, 2, RoutingMode::topk_softmax, b.view(), nullptr); }, "experts must be");
  DeviceRouting missing = b.view();
  missing.pair_row = nullptr;
  expect_error([&] { cuda::route(l, 4, 8, 2, RoutingMode::topk_softmax, missing, nullptr); }, "are required");
  std::vector<float> host(8);
  expect_error([&] { cuda::route(host.data(), 1, 8, 2, RoutingMode::topk_softmax, b.view(), nullptr); }, "logits");
  // expert_linear: N per expert not a multiple of 16, W not in mma16, too many experts.
  const HostMatrix w = random_matrix(8 * 24, 64, DType::bf16, 3, 0.05f);
  const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(4));
  const QuantizedMatrix wq = cuda::to_device(cpu::repack(flat, Layout::mma16));
  Buffer xd = Buffer::allocate(Memory::device, 16 * 64 * 2), yd = Buffer::allocate(Memory::device, 16 * 48 * 2);
  LinearWorkspace ws({16, 48, 64, false});
  const TensorView xv{xd.data(), DType::bf16, 16, 64};
  expect_error([&] { expert_linear(xv, wq, 8, b.view().offsets, MutableTensorView{yd.data(), DType::bf16, 16, 24}, ws,
                                   nullptr); }, "multiple of 16");
  expect_error([&] { expert_linear(xv, cuda::to_device(flat), 4, b.view().offsets,
                                   MutableTensorView{yd.data(), DType::bf16, 16, 48}, ws, nullptr); }, "mma16");
  expect_error([&] { expert_linear(xv, wq, 5, b.view().offsets, MutableTensorView{yd.data(), DType::bf16, 16, 48}, ws,
                                   nullptr); }, "not a multiple of 5");
  ExpertLinearOptions four_warps_256;  // the 256-token kernel has 8 MMA warps: not silently changed
  four_warps_256.items = LinearItems::wgmma_tile, four_warps_256.n_tiles = 32, four_warps_256.warps = 4;
  expect_error([&] { expert_linear(xv, wq, 4, b.view().offsets, MutableTensorView{yd.data(), DType::bf16, 16, 48}, ws,
                                   nullptr, four_warps_256); }, "take 8 warps");
}

}  // namespace
}  // namespace kbit
