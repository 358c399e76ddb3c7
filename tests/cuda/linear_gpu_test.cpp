// kbit::linear on the GPU against the fp64 CPU reference over the dequantized
// weights: every k, fp16 and bf16, M from 1 to 512, model and awkward shapes,
// every path and fused-kernel shape forced and the dispatcher, poisoned outputs,
// bias and residual, run-to-run bit identity, graph capture, rotation, bad input.
// Also the mma16 layout: GPU repack and dequantize bit-exact with the CPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>

#include "kbit/cpu.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"
#include "cuda/device_checks.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_internal.h"
#include "support/gpu_test_support.h"

namespace kbit {
namespace {

using test::HostMatrix;
using test::random_matrix;
using test::download16;
using test::relative_error;
using test::tolerance;
using test::upload;


struct Quantized {
  QuantizedMatrix host_flat, device_mma16, device_flat;
};
Quantized quantize_host(const HostMatrix& w, int bits) {
  Quantized q;
  q.host_flat = cpu::quantize(w.view(), Codebook::bnf(bits));
  q.device_flat = cuda::to_device(q.host_flat);
  q.device_mma16 = cuda::repack(q.device_flat, Layout::mma16, nullptr);
  return q;
}
Quantized quantize_random(int64_t n, int64_t k, int bits, uint64_t seed) {
  return quantize_host(random_matrix(n, k, DType::f32, seed, 0.02f, 0.001), bits);
}

TEST(GpuMma16, RepackAndDequantizeAreBitExactWithTheCpu) {
  KBIT_SKIP_WITHOUT_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {17, 100}, {33, 5152}, {300, 96}, {16, 128}};
  uint64_t seed = 11;
  for (auto [n, k] : shapes)
    for (int bits = 2; bits <= 5; ++bits) {
      const std::string what = std::to_string(n) + "x" + std::to_string(k) + " k=" + std::to_string(bits);
      const HostMatrix w = random_matrix(n, k, DType::f32, seed++);
      const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(bits));
      const QuantizedMatrix cpu_mma = cpu::repack(flat, Layout::mma16);
      const QuantizedMatrix gpu_mma = cuda::to_host(cuda::repack(cuda::to_device(flat), Layout::mma16, nullptr));
      ASSERT_EQ(gpu_mma.word_count(), cpu_mma.word_count()) << what;
      ASSERT_EQ(0, std::memcmp(gpu_mma.words(), cpu_mma.words(), size_t(cpu_mma.word_count()) * 4)) << what;
      ASSERT_EQ(0, std::memcmp(gpu_mma.scales(), cpu_mma.scales(), size_t(cpu_mma.scale_count()))) << what;
      // back to flat on both sides
      const QuantizedMatrix back = cuda::to_host(cuda::repack(cuda::to_device(cpu_mma), Layout::flat, nullptr));
      ASSERT_EQ(0, std::memcmp(back.words(), flat.words(), size_t(flat.word_count()) * 4)) << what;
      ASSERT_EQ(0, std::memcmp(back.scales(), flat.scales(), size_t(flat.scale_count()))) << what;
      const QuantizedMatrix cpu_back = cpu::repack(cpu_mma, Layout::flat);
      ASSERT_EQ(0, std::memcmp(cpu_back.words(), flat.words(), size_t(flat.word_count()) * 4)) << what;
      // dequantize from mma16 on the GPU == CPU dequantize of flat (poisoned output)
      HostMatrix ref{std::vector<uint8_t>(size_t(n * k) * 2), DType::bf16, n, k, k};
      cpu::dequantize(flat, ref.mutable_view());
      Buffer out = Buffer::allocate(Memory::device, size_t(n * k) * 2);
      ASSERT_EQ(cudaMemset(out.data(), 0xff, out.size()), cudaSuccess);
      cuda::dequantize(cuda::to_device(cpu_mma), MutableTensorView{out.data(), DType::bf16, n, k}, nullptr);
      ASSERT_EQ(download16(out.data(), size_t(n * k)),
                std::vector<uint16_t>(reinterpret_cast<const uint16_t*>(ref.bytes.data()),
                                      reinterpret_cast<const uint16_t*>(ref.bytes.data()) + n * k))
          << what;
    }
}

// The dequant_cublas path's operand dequantize (detail::dequantize_operand): every element
// within two roundings of the exact fp32 value (the codebook level and the product in the
// 16-bit type), zeros exact, every element of [N, K] written (NaN-poisoned output), nothing
// written between rows of a strided output (aligned and unaligned rows), bad input refused.
TEST(GpuMma16, OperandDequantizeMatchesTheExactValues) {
  KBIT_SKIP_WITHOUT_GPU();
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {17, 100}, {33, 5152}, {300, 96}, {16, 128}, {100, 5120 + 32}};
  uint64_t seed = 41;
  for (auto [n, k] : shapes)
    for (int bits = 2; bits <= 5; ++bits)
      for (DType t : {DType::f16, DType::bf16})
        for (int64_t pad : {0, 8, 3}) {
          const std::string what = std::to_string(n) + "x" + std::to_string(k) + " k=" + std::to_string(bits) + " " +
                                   std::string(dtype_name(t)) + " ld=K+" + std::to_string(pad);
          const HostMatrix w = random_matrix(n, k, DType::f32, seed++, 0.02f, 0.001);
          const QuantizedMatrix flat = cpu::quantize(w.view(), Codebook::bnf(bits));
          std::vector<float> exact(size_t(n * k));
          cpu::dequantize(flat, MutableTensorView{exact.data(), DType::f32, n, k});
          const QuantizedMatrix dev = cuda::to_device(cpu::repack(flat, Layout::mma16));
          const int64_t ld = k + pad;
          Buffer out = Buffer::allocate(Memory::device, size_t(n * ld) * 2);
          ASSERT_EQ(cudaMemset(out.data(), 0xff, out.size()), cudaSuccess);
          ASSERT_NO_THROW(detail::dequantize_operand(dev, MutableTensorView{out.data(), t, n, k, ld}, nullptr)) << what;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          const std::vector<uint16_t> got = download16(out.data(), size_t(n * ld));
          // two roundings at the type's unit roundoff (fp16 2^-11, bf16 2^-8), and fp16's subnormal step
          const double rel = 1.01 * (t == DType::f16 ? 0x1p-10 : 0x1p-7), abs = t == DType::f16 ? 0x1p-24 : 0.0;
          int64_t bad = 0;
          for (int64_t r = 0; r < n; ++r) {
            for (int64_t c = 0; c < k; ++c) {
              const uint16_t b = got[size_t(r * ld + c)];
              const double v = t == DType::f16 ? half_bits_to_float(b) : bf16_bits_to_float(b);
              const double e = exact[size_t(r * k + c)];
              const bool ok = e == 0.0 ? v == 0.0 : std::fabs(v - e) <= rel * std::fabs(e) + abs;
              if (!ok && bad++ < 3) ADD_FAILURE() << what << ": [" << r << ", " << c << "] = " << v << ", expected " << e;
            }
            for (int64_t c = k; c < ld; ++c)
              if (got[size_t(r * ld + c)] != 0xffffu && bad++ < 3) ADD_FAILURE() << what << ": wrote past K in row " << r;
          }
          ASSERT_EQ(bad, 0) << what;
        }
  // Bad input: a flat matrix, a 32-bit output, a shape that is not W's.
  const HostMatrix w = random_matrix(32, 128, DType::f32, 7);
  const QuantizedMatrix flat = cuda::to_device(cpu::quantize(w.view(), Codebook::bnf(4)));
  const QuantizedMatrix mma = cuda::repack(flat, Layout::mma16, nullptr);
  Buffer out = Buffer::allocate(Memory::device, 32 * 128 * 4);
  EXPECT_THROW(detail::dequantize_operand(flat, MutableTensorView{out.data(), DType::bf16, 32, 128}, nullptr), Error);
  EXPECT_THROW(detail::dequantize_operand(mma, MutableTensorView{out.data(), DType::f32, 32, 128}, nullptr), Error);
  EXPECT_THROW(detail::dequantize_operand(mma, MutableTensorView{out.data(), DType::bf16, 32, 96}, nullptr), Error);
}

struct PathCase {
  LinearOptions o;
  std::string name;
};
// The 256-token warp-specialised tile kernel, forced.
LinearOptions tile256_options() {
  LinearOptions o;
  o.path = LinearPath::fused_mma;
  o.n_tiles = 32, o.items = LinearItems::wgmma_tile;
  return o;
}

// The tile kernel (wgmma_tile items): 64 or 128 tokens per tile (padded below that), one
// or two warpgroups, with and without K splits, and with stream-K work (wgmma_stream).
std::vector<PathCase> tile_cases() {
  std::vector<PathCase> v;
  for (int nt : {8, 16})
    for (int warps : {4, 8})
      for (int splits : {1, 3, 0}) {  // 0: stream-K (wgmma_stream), the tiles' K work cut evenly over the CTAs
        LinearOptions f;
        f.path = LinearPath::fused_mma;
        f.n_tiles = nt, f.warps = warps, f.splits = splits;
        f.items = splits ? LinearItems::wgmma_tile : LinearItems::wgmma_stream;
        v.push_back({f, "tile nt=" + std::to_string(nt) + " warps=" + std::to_string(warps) +
                            (splits ? " splits=" + std::to_string(splits) : std::string(" stream-K"))});
      }
  for (int nt : {8, 16}) {  // stream-K on the warp-specialised 64/128-token kernel (8 decode + 8 MMA warps)
    LinearOptions f;
    f.path = LinearPath::fused_mma;
    f.n_tiles = nt, f.warps = 16, f.items = LinearItems::wgmma_stream;
    v.push_back({f, "tile nt=" + std::to_string(nt) + " warps=16 stream-K"});
  }
  v.push_back({tile256_options(), "tile nt=32"});  // the 256-token kernel: no splits asked for
  LinearOptions stream256 = tile256_options();
  stream256.items = LinearItems::wgmma_stream;
  v.push_back({stream256, "tile nt=32 stream-K"});
  return v;
}

std::vector<PathCase> path_cases(int64_t m) {
  std::vector<PathCase> v;
  v.push_back({{}, "auto"});
  LinearOptions d;
  d.path = LinearPath::dequant_cublas;
  v.push_back({d, "dequant_cublas"});
  if (m <= 4) {
    LinearOptions g;
    g.path = LinearPath::gemv;
    v.push_back({g, "gemv"});
  }
  // Fused items forced: every token-tile size, warp count and split count given, with and without K splits.
  auto add_fused = [&](std::initializer_list<int> tiles, std::initializer_list<LinearItems> modes) {
    for (int nt : tiles)
      for (int warps : {4, 8})
        for (int splits : {1, 3})
          for (LinearItems items : modes) {
            LinearOptions f;
            f.path = LinearPath::fused_mma;
            f.n_tiles = nt, f.warps = warps, f.splits = splits, f.items = items;
            v.push_back({f, "fused nt=" + std::to_string(nt) + " warps=" + std::to_string(warps) +
                                " splits=" + std::to_string(splits) + " " + std::string(linear_items_name(items))});
          }
  };
  add_fused({default_n_tiles(m), 8}, {LinearItems::cta, LinearItems::warp, LinearItems::stripes});
  add_fused({1, 2}, {LinearItems::cta_shuffle});  // cta items decoding by shuffle (no pair table)
  add_fused({4, 8}, {LinearItems::wgmma});        // one or two warpgroups, 32 or 64 tokens (padded below)
  for (const auto& t : tile_cases()) v.push_back(t);
  return v;
}

// y[m, n] = x W^T through one path (flat W for dequantize + cuBLAS, mma16 otherwise) into a poisoned
// yd; the first `download` outputs come back in got.
void run_path(const PathCase& pc, const Quantized& q, const Buffer& xd, Buffer& yd, DType dt, int64_t m, int64_t n,
              int64_t k, LinearWorkspace& ws, const std::string& what, int64_t download, std::vector<uint16_t>& got) {
  ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
  const QuantizedMatrix& w = pc.o.path == LinearPath::dequant_cublas ? q.device_flat : q.device_mma16;
  ASSERT_NO_THROW(linear(TensorView{xd.data(), dt, m, k}, w, MutableTensorView{yd.data(), dt, m, n}, ws, nullptr, pc.o))
      << what;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  got = download16(yd.data(), size_t(download));
}

// For each (shape, k, dtype): one quantized W, one x of max(M) rows, the fp64 reference,
// then every M (a prefix of x) through every path, with poisoned y.
void check_shape(int64_t n, int64_t k, const std::vector<int64_t>& ms, const std::vector<int>& bits_list,
                 bool all_paths, uint64_t seed, const std::vector<PathCase>* only = nullptr) {
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  LinearWorkspace ws({max_m, n, k, true});
  for (int bits : bits_list)
    for (DType dt : {DType::f16, DType::bf16}) {
      const Quantized q = quantize_random(n, k, bits, seed++);
      const HostMatrix x = random_matrix(max_m, k, dt, seed++);
      const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
      Buffer xd = upload(x);
      Buffer yd = Buffer::allocate(Memory::device, size_t(max_m * n) * 2);
      for (int64_t m : ms) {
        auto cases = only ? *only : path_cases(m);
        if (!only && !all_paths) cases.resize(m <= 4 ? 3 : 2);
        for (const auto& pc : cases) {
          const std::string what = std::to_string(n) + "x" + std::to_string(k) + " k=" + std::to_string(bits) + " " +
                                   std::string(dtype_name(dt)) + " M=" + std::to_string(m) + " " + pc.name;
          std::vector<uint16_t> got;
          ASSERT_NO_FATAL_FAILURE(run_path(pc, q, xd, yd, dt, m, n, k, ws, what, max_m * n, got));
          const double err = relative_error(dt, got, ref, m * n);
          EXPECT_LE(err, tolerance(dt)) << what;
          // rows past M untouched (still the poison)
          if (m < max_m) EXPECT_EQ(got[size_t(m * n)], 0xffff) << what << ": wrote past M";
        }
      }
    }
}

TEST(GpuLinear, AwkwardShapesEveryMEveryPath) {
  KBIT_SKIP_WITHOUT_GPU();
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 17; ++m) ms.push_back(m);
  for (int64_t m : {31, 32, 33, 64, 100, 512}) ms.push_back(m);
  check_shape(100, 96, ms, {2, 3, 4, 5}, true, 101);
  check_shape(300, 5152, ms, {2, 3, 4, 5}, true, 202);
  check_shape(17, 33, {1, 2, 9, 64}, {2, 3, 4, 5}, true, 303);
}

// The dequant_cublas path with each GEMM algorithm cuBLASLt offers (kbit tune's candidates), forced:
// every one within the tolerance, y past M untouched; an index it does not offer is an error naming
// the count, and so is one out of range.
TEST(GpuLinear, DequantCublasEveryGemmCandidate) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 909;
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{512, 2048}, {300, 5152}}) {
    const int64_t max_m = 520;
    LinearWorkspace ws({max_m, n, k, true});
    for (DType dt : {DType::f16, DType::bf16}) {
      const int bits = dt == DType::f16 ? 3 : 5;
      const Quantized q = quantize_random(n, k, bits, seed++);
      const HostMatrix x = random_matrix(max_m, k, dt, seed++);
      const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
      Buffer xd = upload(x);
      Buffer yd = Buffer::allocate(Memory::device, size_t(max_m * n) * 2);
      for (int64_t m : {33, 512}) {
        const int offered = detail::LtGemm::candidate_count(m, n, k, dt, false);
        ASSERT_GE(offered, 1);
        for (int a = 0; a < offered; ++a) {
          PathCase pc;
          pc.o.path = LinearPath::dequant_cublas, pc.o.gemm_algo = a;
          pc.name = "dequant_cublas gemm_algo=" + std::to_string(a);
          const std::string what = std::to_string(n) + "x" + std::to_string(k) + " " + std::string(dtype_name(dt)) +
                                   " M=" + std::to_string(m) + " " + pc.name;
          std::vector<uint16_t> got;
          ASSERT_NO_FATAL_FAILURE(run_path(pc, q, xd, yd, dt, m, n, k, ws, what, max_m * n, got));
          EXPECT_LE(relative_error(dt, got, ref, m * n), tolerance(dt)) << what;
          EXPECT_EQ(got[size_t(m * n)], 0xffff) << what << ": wrote past M";
        }
        if (offered < detail::kLtMaxCandidates) {
          LinearOptions o;
          o.path = LinearPath::dequant_cublas, o.gemm_algo = offered;
          try {
            linear(TensorView{xd.data(), dt, m, k}, q.device_flat, MutableTensorView{yd.data(), dt, m, n}, ws, nullptr, o);
            ADD_FAILURE() << "gemm_algo " << offered << " of " << offered << ": no error";
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("offers"), std::string::npos) << e.what();
          }
        }
      }
    }
  }
}

// Blocks whose E4M4 scale is subnormal (exponent field 0: amax below 2^-10 of the tensor scale).
// The fused kernel's bf16 scale pairs are the scale byte's bits shifted into a bf16, which is then
// a bf16 subnormal, times levels carrying 2^116 (scale_bits_pair_bf16): a multiply that flushed
// subnormal inputs would zero these rows. Stripe 1 (rows 16-31) is 2^-17 times the others, so its
// blocks get E4M4 bytes 1..15; in bf16 its outputs are checked on their own (the norm of the
// whole matrix would hide them), through every path at M = 1, 8, 16.
TEST(GpuLinear, SubnormalBlockScales) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 64, k = 640, tiny_begin = 16, tiny_end = 32;
  LinearWorkspace ws({64, n, k, true});  // room for every path's workspace (stream-K tiles need max_m > 16)
  for (int bits : {2, 3, 4, 5})
    for (DType dt : {DType::bf16, DType::f16}) {
      HostMatrix w = random_matrix(n, k, DType::f32, 800 + bits, 0.02f);
      for (int64_t r = tiny_begin; r < tiny_end; ++r)
        for (int64_t c = 0; c < k; ++c) w.set(r, c, w.at(r, c) * 0x1p-17f);
      const Quantized q = quantize_host(w, bits);
      const int64_t blocks = k / 32;
      int64_t subnormal = 0;
      for (int64_t b = tiny_begin * blocks; b < tiny_end * blocks; ++b) {
        const uint8_t e = q.host_flat.scales()[b];
        subnormal += e > 0 && e < 16;
      }
      ASSERT_GT(subnormal, (tiny_end - tiny_begin) * blocks / 2) << "the test needs subnormal block scales";
      // fp16: x 2^10 times larger, so that the tiny rows' outputs stay normal fp16 numbers
      const HostMatrix x = random_matrix(16, k, dt, 810 + bits, dt == DType::f16 ? 1024.0f : 1.0f);
      const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
      Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(16 * n) * 2);
      for (int64_t m : {1, 8, 16})
        for (const auto& pc : path_cases(m)) {
          const std::string what = "k=" + std::to_string(bits) + " " + std::string(dtype_name(dt)) +
                                   " M=" + std::to_string(m) + " " + pc.name;
          std::vector<uint16_t> got;
          ASSERT_NO_FATAL_FAILURE(run_path(pc, q, xd, yd, dt, m, n, k, ws, what, m * n, got));
          std::vector<uint16_t> got_tiny, got_rest;
          std::vector<double> ref_tiny, ref_rest;
          for (int64_t t = 0; t < m; ++t)
            for (int64_t r = 0; r < n; ++r) {
              const bool tiny = r >= tiny_begin && r < tiny_end;
              (tiny ? got_tiny : got_rest).push_back(got[size_t(t * n + r)]);
              (tiny ? ref_tiny : ref_rest).push_back(ref[size_t(t * n + r)]);
            }
          // fp16 is checked on the whole matrix only: a tiny block's decoded weights (level * E4M4 / 16)
          // are fp16 subnormals themselves, 0.8% off in the fused paths and 11% through dequantize +
          // cuBLAS (measured on the H200), which the tiny rows' share of the norm (2^-17) hides.
          if (dt == DType::bf16)
            EXPECT_LE(relative_error(dt, got_tiny, ref_tiny, int64_t(ref_tiny.size())), tolerance(dt)) << what << ": tiny rows";
          EXPECT_LE(relative_error(dt, got_rest, ref_rest, int64_t(ref_rest.size())), tolerance(dt)) << what;
          EXPECT_LE(relative_error(dt, got, ref, m * n), tolerance(dt)) << what << ": all rows";
        }
    }
}

TEST(GpuLinear, ModelShapes) {
  KBIT_SKIP_WITHOUT_GPU();
  // glm47 kv, qwen3 q and shared_dn (K = 512), kimi latent; glm47 q and o at small M.
  check_shape(2048, 5120, {1, 4, 16, 33, 64}, {2, 3, 4, 5}, false, 401);
  check_shape(4096, 2048, {1, 8, 17, 512}, {2, 4}, false, 402);
  check_shape(2048, 512, {1, 5, 16, 100}, {3, 5}, false, 403);
  check_shape(7168, 3584, {1, 16}, {2, 3, 4, 5}, false, 404);
  check_shape(12288, 5120, {1, 16}, {4}, false, 405);
  check_shape(5120, 12288, {1, 2}, {2}, false, 406);
}

// Shapes no table has: the heuristic's plans (sixty-first session's rules, linear_configs.h) through the
// automatic path. Small W: cta_shuffle at M = 5 (k = 5) and M = 12, the tile kernel at M = 40 and 100 on
// Hopper (N >= 2048, K >= 3584; K = 3600 ends in a partial supertile); large W (34.6 M weights): the GEMV
// at M = 3, stripes items at M = 6.
TEST(GpuLinear, UntunedPlansOnUnseenShapes) {
  KBIT_SKIP_WITHOUT_GPU();
  EXPECT_EQ(plan_linear(12, 2304, 3600, 3).items, LinearItems::cta_shuffle);
  EXPECT_EQ(plan_linear(5, 2304, 3600, 5).items, LinearItems::cta_shuffle);
  if (cuda::detail::device_has_wgmma()) {
    EXPECT_EQ(plan_linear(40, 2304, 3600, 3).items, LinearItems::wgmma_stream);
    EXPECT_EQ(plan_linear(100, 2304, 3600, 5).items, LinearItems::wgmma_stream);
  }
  EXPECT_EQ(plan_linear(3, 8192, 4224, 4).path, LinearPath::gemv);
  EXPECT_EQ(plan_linear(6, 8192, 4224, 4).items, LinearItems::stripes);
  check_shape(2304, 3600, {5, 12, 40, 100}, {3, 5}, false, 410);
  check_shape(8192, 4224, {3, 6}, {4}, false, 411);
  // Small W at M = 17..32: cta_shuffle without a split at k = 5 (96 stripes); CTA items of one 32-token
  // tile (144 stripes over 13 supertiles); stripes of one 32-token tile and 8 warps past twice the SMs in
  // stripes (352), split; split stripes over a padded short K (600).
  EXPECT_EQ(plan_linear(20, 1536, 2144, 5).items, LinearItems::cta_shuffle);
  EXPECT_EQ(plan_linear(20, 1536, 2144, 5).splits, 1);
  EXPECT_EQ(plan_linear(24, 2304, 1600, 4).items, LinearItems::cta);
  EXPECT_EQ(plan_linear(24, 2304, 1600, 4).n_tiles, 4);
  EXPECT_EQ(plan_linear(24, 5632, 3600, 3).items, LinearItems::stripes);
  EXPECT_EQ(plan_linear(24, 5632, 3600, 3).n_tiles, 4);
  EXPECT_GT(plan_linear(24, 5632, 3600, 3).splits, 1);
  EXPECT_GT(plan_linear(17, 2304, 600, 2).splits, 1);
  check_shape(1536, 2144, {20, 32}, {5}, false, 412);
  check_shape(2304, 1600, {24}, {4}, false, 413);
  check_shape(5632, 3600, {24}, {3}, false, 414);
  check_shape(2304, 600, {17, 32}, {2, 4}, false, 415);
  // Large W above M = 256 (to kTileMaxM): the 256-token tile kernel, not dequantize + cuBLAS.
  if (cuda::detail::device_has_wgmma()) EXPECT_EQ(plan_linear(400, 8192, 4224, 4).items, LinearItems::wgmma_tile);
}

TEST(GpuLinear, WgmmaTileOnModelShapes) {
  KBIT_SKIP_WITHOUT_GPU();
  // The tile kernel where it is meant to run (M from 64 up): glm47 kv, qwen3 q, kimi latent,
  // with partial token tiles (129, 200) and splits; plus the automatic plan.
  auto cases = tile_cases();
  cases.push_back({{}, "auto"});
  check_shape(2048, 5120, {64, 129, 512, 600}, {2, 3, 4, 5}, false, 601, &cases);
  check_shape(4096, 2048, {64, 200}, {2, 4}, false, 602, &cases);
  check_shape(7168, 3584, {128}, {3, 5}, false, 603, &cases);
}

// The 64/128-token tile kernel decodes k >= 3 three ways (tile_decode): one warpgroup by
// register pools (k = 3) or warp shuffles (k = 4, 5), two warpgroups from the shared-memory
// pair table; k = 2 by pools in both. Each output element is the same sequence of wgmma
// steps over the same operands at either warp count, so the decodes must agree bit for bit:
// one wrong level for one code shows here even where the error norm would hide it.
TEST(GpuLinear, TileDecodesAgreeBitForBit) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 256, k = 2048 + 96;  // every block position of a supertile, a padded last one
  for (int64_t m : {64, 50}) {
    LinearWorkspace ws({m, n, k, true});
    for (int bits : {2, 3, 4, 5})
      for (DType dt : {DType::f16, DType::bf16}) {
        const std::string what = "k=" + std::to_string(bits) + " " + std::string(dtype_name(dt)) + " M=" + std::to_string(m);
        const Quantized q = quantize_random(n, k, bits, 700 + bits);
        const HostMatrix x = random_matrix(m, k, dt, 710 + bits);
        Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
        std::vector<uint16_t> by_warps[2];
        for (int i = 0; i < 2; ++i) {
          LinearOptions o;
          o.path = LinearPath::fused_mma;
          o.n_tiles = 8, o.warps = i ? 8 : 4, o.splits = 1, o.items = LinearItems::wgmma_tile;
          ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
          ASSERT_NO_THROW(linear(TensorView{xd.data(), dt, m, k}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n},
                                 ws, nullptr, o))
              << what;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          by_warps[i] = download16(yd.data(), size_t(m * n));
        }
        const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
        EXPECT_LE(relative_error(dt, by_warps[0], ref, m * n), tolerance(dt)) << what;
        int64_t differ = 0;
        for (size_t e = 0; e < by_warps[0].size(); ++e) differ += by_warps[0][e] != by_warps[1][e];
        EXPECT_EQ(differ, 0) << what << ": one and two warpgroups differ";
      }
  }
}

// Only the 256-token tile kernel (n_tiles 32), on shapes small enough for racecheck (which
// runs the kernel two orders of magnitude slower): two token tiles, one partial, every k;
// 4 tiles of 16 supertiles, which run as quarters (tile_schedule.h's split tail).
TEST(GpuLinear, Tile256Alone) {
  KBIT_SKIP_WITHOUT_GPU();
  std::vector<PathCase> cases{{tile256_options(), "tile nt=32"}};
  check_shape(256, 2048, {300}, {2, 3, 4, 5}, false, 604, &cases);
}

// Only cta and cta_shuffle items at n_tiles 2: cta_shuffle (and cta at k = 2) warps copy their
// supertiles' activations into rings of their own (fused_warp_x_ring), cta at k >= 3 loads
// them; on shapes small enough for racecheck: K = 96 (one supertile, past K), K = 5152 (40
// whole supertiles and one past K), x not 16-byte aligned (K = 33: stores instead of copies);
// M = 9 .. 33 (rows past M, 1-3 token tiles), with and without K splits.
TEST(GpuLinear, TwoTokenTileCtaItemsAlone) {
  KBIT_SKIP_WITHOUT_GPU();
  std::vector<PathCase> cases;
  for (int warps : {4, 8}) {
    for (int splits : {1, 3}) {
      LinearOptions f;
      f.path = LinearPath::fused_mma;
      f.n_tiles = 2, f.warps = warps, f.splits = splits, f.items = LinearItems::cta;
      cases.push_back({f, "cta nt=2 warps=" + std::to_string(warps) + " splits=" + std::to_string(splits)});
    }
    LinearOptions s;
    s.path = LinearPath::fused_mma;
    s.n_tiles = 2, s.warps = warps, s.items = LinearItems::cta_shuffle;
    cases.push_back({s, "cta_shuffle nt=2 warps=" + std::to_string(warps)});
  }
  check_shape(100, 96, {9, 16, 17, 33}, {2, 3, 4, 5}, false, 607, &cases);
  check_shape(48, 5152, {9, 16}, {2, 3, 4, 5}, false, 608, &cases);
  check_shape(17, 33, {9, 16}, {2, 3, 4, 5}, false, 609, &cases);
}

// Only the stream-K tile items (wgmma_stream), on shapes small enough for racecheck: 2 or 4
// stripe groups of 16 supertiles each, so that every CTA takes one supertile of one tile
// and each tile is summed from 16 pieces; 64 and 128 tokens (one partial token tile), one
// and two warpgroups, and the warp-specialised kernel (16 warps), every k.
TEST(GpuLinear, StreamKAlone) {
  KBIT_SKIP_WITHOUT_GPU();
  std::vector<PathCase> cases;
  for (auto [n_tiles, warps] : {std::pair{8, 8}, {16, 4}, {8, 16}, {16, 16}}) {
    LinearOptions f;
    f.path = LinearPath::fused_mma;
    f.n_tiles = n_tiles, f.warps = warps, f.items = LinearItems::wgmma_stream;
    cases.push_back({f, "stream-K nt=" + std::to_string(n_tiles) + " warps=" + std::to_string(warps)});
  }
  check_shape(256, 2048, {50}, {2, 3, 4, 5}, false, 605, &cases);
  // The 256-token kernel with stream-K: 2 stripe groups x 2 token tiles (one partial) of 16
  // supertiles, 64 pieces of one supertile, one per CTA.
  LinearOptions s256 = tile256_options();
  s256.items = LinearItems::wgmma_stream;
  std::vector<PathCase> cases256{{s256, "stream-K nt=32"}};
  check_shape(256, 2048, {300}, {2, 3, 4, 5}, false, 606, &cases256);
}

// The 256-token kernel with whole waves of tiles and a split tail (tile_schedule.h): 16
// stripe groups x 9 token tiles = 144 tiles, on the H200's 132 SMs one whole wave and 12
// tiles split in quarters along K (16 supertiles); results against the reference and
// bit-identical run to run. The same with stream-K (wgmma_stream: 144 x 16 supertiles cut
// over the CTAs). Also a workspace made for M <= 64 (one partial-tile slot per SM: every
// tile whole, stream-K on half the CTAs).
TEST(GpuLinear, Tile256WholeWavesAndSplitTail) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 2048, k = 2048, m = 2304;
  LinearWorkspace ws({m, n, k, true});
  LinearOptions stream_k = tile256_options();
  stream_k.items = LinearItems::wgmma_stream;
  for (const LinearOptions& o : {tile256_options(), stream_k})
  for (int bits : {4}) {  // every k: Tile256Alone and WgmmaTileOnModelShapes
    const std::string what = "k=" + std::to_string(bits) + " " + std::string(linear_items_name(o.items));
    const Quantized q = quantize_random(n, k, bits, 970 + bits);
    const HostMatrix x = random_matrix(m, k, DType::bf16, 971);
    const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
    Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
    std::vector<uint16_t> first;
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
      linear(TensorView{xd.data(), DType::bf16, m, k}, q.device_mma16, MutableTensorView{yd.data(), DType::bf16, m, n},
             ws, nullptr, o);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const auto got = download16(yd.data(), size_t(m * n));
      if (rep == 0) {
        EXPECT_LE(relative_error(DType::bf16, got, ref, m * n), tolerance(DType::bf16)) << what;
        first = got;
      } else {
        ASSERT_EQ(got, first) << what << ": repeat " << rep << " differs";
      }
    }
    // One partial-tile slot per SM: tiles whole (wgmma_tile), half the CTAs (stream-K).
    LinearWorkspace small_ws({64, n, k, true});
    const int64_t m_small = 64;
    ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
    linear(TensorView{xd.data(), DType::bf16, m_small, k}, q.device_mma16,
           MutableTensorView{yd.data(), DType::bf16, m_small, n}, small_ws, nullptr, o);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const auto got = download16(yd.data(), size_t(m * n));
    const std::vector<double> ref_small(ref.begin(), ref.begin() + m_small * n);
    EXPECT_LE(relative_error(DType::bf16, got, ref_small, m_small * n), tolerance(DType::bf16)) << what << " M=64";
    EXPECT_EQ(got[size_t(m_small * n)], 0xffff) << what << ": wrote past M";
  }
}

// The tile kernels' epilogue with bias and residual: full token tiles (M = 600: full tiles
// and a partial last one) and rows past N (N = 264), y and the residual with an even leading
// dimension (4-byte pair stores) and an odd one (the generic per-element epilogue). Both
// must match the reference and each other bit for bit.
TEST(GpuLinear, BiasResidualPairStores) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 264, k = 512, max_m = 600;
  LinearWorkspace ws({max_m, n, k, true});
  // Every tile kernel shape without K splits (the pair stores' condition) at M = 600: 256
  // tokens (whole tiles or stream-K), and 64 / 128 tokens with one or two warpgroups, whole tiles or stream-K (whose
  // cut tiles store after the reduction of their pieces). Every fused-kernel item mode at
  // M = 45 (a partial token tile for every n_tiles), with and without K splits (summed
  // before the stores). N = 264: the last stripe is partial (per-element stores).
  struct Shape {
    LinearOptions o;
    std::string name;
    int64_t m;
  };
  std::vector<Shape> shapes{{tile256_options(), "nt=32", max_m}};
  LinearOptions stream256 = tile256_options();
  stream256.items = LinearItems::wgmma_stream;
  shapes.push_back({stream256, "nt=32 wgmma_stream", max_m});
  for (LinearItems items : {LinearItems::wgmma_tile, LinearItems::wgmma_stream})
    for (auto [n_tiles, warps] : {std::pair{8, 4}, {8, 8}, {16, 4}, {16, 8}, {8, 16}, {16, 16}}) {
      if (warps == 16 && items != LinearItems::wgmma_stream) continue;  // the warp-specialised kernel: stream-K only
      LinearOptions t = tile256_options();
      t.n_tiles = n_tiles, t.warps = warps, t.splits = 1, t.items = items;
      shapes.push_back({t, "nt=" + std::to_string(n_tiles) + " warps=" + std::to_string(warps) + " " +
                               std::string(linear_items_name(items)), max_m});
    }
  for (auto [items, n_tiles, warps, splits] :
       {std::tuple{LinearItems::cta, 2, 4, 1}, {LinearItems::warp, 1, 4, 2}, {LinearItems::stripes, 2, 8, 3},
        {LinearItems::stripes, 8, 4, 1}, {LinearItems::wgmma, 4, 4, 2}, {LinearItems::cta_shuffle, 1, 8, 1}}) {
    LinearOptions f;
    f.path = LinearPath::fused_mma;
    f.n_tiles = n_tiles, f.warps = warps, f.splits = splits, f.items = items;
    shapes.push_back({f, "nt=" + std::to_string(n_tiles) + " warps=" + std::to_string(warps) + " splits=" +
                             std::to_string(splits) + " " + std::string(linear_items_name(items)), 45});
  }
  for (auto [o, shape, m] : shapes)
    for (int bits : {2, 3, 4, 5})
      for (DType dt : {DType::f16, DType::bf16}) {
        const std::string what = shape + " k=" + std::to_string(bits) + " " + std::string(dtype_name(dt));
        const Quantized q = quantize_random(n, k, bits, 950 + bits);
        const HostMatrix x = random_matrix(m, k, dt, 951);
        const HostMatrix b = random_matrix(1, n, dt, 952);
        std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
        Buffer xd = upload(x), bd = upload(b);
        std::vector<std::vector<uint16_t>> outs;
        for (int64_t ld : {n + 2, n + 1}) {
          const HostMatrix r = random_matrix(m, n, dt, 953, 1.0f, 0.0, ld);
          std::vector<double> want = ref;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) want[size_t(i * n + j)] += double(r.at(i, j)) + double(b.at(0, j));
          Buffer rd = upload(r);
          Buffer yd = Buffer::allocate(Memory::device, size_t(m * ld) * 2);
          ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
          o.bias = bd.data();
          o.residual = TensorView{rd.data(), dt, m, n, ld};
          linear(TensorView{xd.data(), dt, m, k}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n, ld}, ws, nullptr,
                 o);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          const auto all = download16(yd.data(), size_t(m * ld));
          std::vector<uint16_t> got;
          for (int64_t i = 0; i < m; ++i) {
            got.insert(got.end(), all.begin() + i * ld, all.begin() + i * ld + n);
            for (int64_t j = n; j < ld; ++j) ASSERT_EQ(all[size_t(i * ld + j)], 0xffff) << what << " row padding, ld " << ld;
          }
          EXPECT_LE(relative_error(dt, got, want, m * n), tolerance(dt)) << what << " ld " << ld;
          outs.push_back(std::move(got));
        }
        EXPECT_EQ(outs[0], outs[1]) << what << ": pair stores differ from the per-element epilogue";
      }
}

TEST(GpuLinear, BiasResidualAndStridedViews) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 264, k = 1000, m = 12;
  LinearWorkspace ws({64, n, k, true});  // max_m > 16: wgmma_stream's partial tiles
  for (int bits : {2, 5})
    for (DType dt : {DType::f16, DType::bf16}) {
      const Quantized q = quantize_random(n, k, bits, 900 + bits);
      // strided rows: 16-byte aligned (k + 8) and not (k + 3: every kernel's guarded x path)
      for (int64_t ldx : {k + 8, k + 3}) {
        const HostMatrix x = random_matrix(m, k, dt, 7, 1.0f, 0.0, ldx);
        const HostMatrix r = random_matrix(m, n, dt, 8);
        const HostMatrix b = random_matrix(1, n, dt, 9);
        std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) ref[size_t(i * n + j)] += double(r.at(i, j)) + double(b.at(0, j));
        Buffer xd = upload(x), rd = upload(r), bd = upload(b);
        for (LinearItems items :
             {LinearItems::automatic, LinearItems::cta, LinearItems::warp, LinearItems::stripes, LinearItems::wgmma,
              LinearItems::cta_shuffle, LinearItems::wgmma_tile, LinearItems::wgmma_stream}) {
          // wgmma_stream: 16 warps, the warp-specialised kernel for the aligned x (TMA), the
          // tile kernel's 8 for the unaligned one.
          Buffer yd = Buffer::allocate(Memory::device, size_t(m * (n + 4)) * 2);
          ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
          LinearOptions o;
          if (items != LinearItems::automatic) o.path = LinearPath::fused_mma, o.items = items;
          o.bias = bd.data();
          o.residual = TensorView{rd.data(), dt, m, n};
          linear(TensorView{xd.data(), dt, m, k, ldx}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n, n + 4},
                 ws, nullptr, o);
          const auto all = download16(yd.data(), size_t(m * (n + 4)));
          std::vector<uint16_t> got;
          for (int64_t i = 0; i < m; ++i) got.insert(got.end(), all.begin() + i * (n + 4), all.begin() + i * (n + 4) + n);
          EXPECT_LE(relative_error(dt, got, ref, m * n), tolerance(dt))
              << "k=" << bits << " " << dtype_name(dt) << " ldx=" << ldx << " items=" << linear_items_name(items);
          EXPECT_EQ(all[size_t(n)], 0xffff) << "wrote into the row padding";
        }
        // in place: residual == y
        Buffer yd = upload(r);
        LinearOptions o;
        o.bias = bd.data();
        o.residual = TensorView{yd.data(), dt, m, n};
        linear(TensorView{xd.data(), dt, m, k, ldx}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n}, ws, nullptr, o);
        EXPECT_LE(relative_error(dt, download16(yd.data(), size_t(m * n)), ref, m * n), tolerance(dt)) << "in place";
      }
    }
}

TEST(GpuLinear, BitIdenticalRunToRunAndUnderGraphCapture) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 4096, k = 5120;
  LinearWorkspace ws({128, n, k, true});
  const Quantized q = quantize_random(n, k, 4, 77);
  for (int64_t m : {1, 4, 16, 32, 64, 96, 128}) {
    const HostMatrix x = random_matrix(m, k, DType::bf16, 78);
    Buffer xd = upload(x), y1 = Buffer::allocate(Memory::device, size_t(m * n) * 2),
           y2 = Buffer::allocate(Memory::device, size_t(m * n) * 2);
    LinearOptions o;
    o.path = LinearPath::fused_mma;
    o.splits = 5;  // several splits: the reduction order must not depend on arrival order
    o.items = m == 16    ? LinearItems::warp
              : m == 64  ? LinearItems::stripes
              : m == 32  ? LinearItems::wgmma
              : m == 128 ? LinearItems::wgmma_tile
              : m == 96  ? LinearItems::wgmma_stream  // 32 tiles of 40 supertiles cut into 4 or 5 pieces each
                         : LinearItems::cta;
    if (m <= 4) o = LinearOptions{}, o.path = LinearPath::gemv;  // stripes split between warps
    const TensorView xv{xd.data(), DType::bf16, m, k};
    linear(xv, q.device_mma16, MutableTensorView{y1.data(), DType::bf16, m, n}, ws, nullptr, o);
    const auto first = download16(y1.data(), size_t(m * n));
    for (int rep = 0; rep < 5; ++rep) {
      linear(xv, q.device_mma16, MutableTensorView{y2.data(), DType::bf16, m, n}, ws, nullptr, o);
      ASSERT_EQ(download16(y2.data(), size_t(m * n)), first) << "M=" << m << " repeat " << rep;
    }
    // captured in a graph and replayed
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    ASSERT_EQ(cudaMemset(y2.data(), 0xff, y2.size()), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    for (int i = 0; i < 3; ++i) linear(xv, q.device_mma16, MutableTensorView{y2.data(), DType::bf16, m, n}, ws, s, o);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(download16(y2.data(), size_t(m * n)), first) << "graph replay, M=" << m;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
}

// A chain of calls where each call's x is the previous call's y, launched with PDL: every
// kernel lets the next one start early (its weight loads before griddepcontrol.wait), so a
// missing wait would read a y still being written. The chain must give bit for bit what the
// same calls give without PDL, on a stream and replayed from a graph, on every path that
// takes PDL (GEMV, fused kernel in each item mode with split-K through the shared workspace).
// The first PDL launches of a fused-kernel instance and of a skinny ring-kernel instance in
// this process (each ctest test is a process of its own; nothing launches them before) happen
// inside a global-mode stream capture: the launches then query the occupancy calculator
// (even_share_carveout, resident_ctas_per_sm) and set function attributes during the capture,
// which must neither fail nor invalidate it, and the replayed graph must match plain launches.
TEST(GpuLinear, FirstPdlLaunchesInsideAGlobalCapture) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t m = 16, n = 2048;
  LinearWorkspace ws({m, n, n, true});
  const Quantized q = quantize_random(n, n, 4, 900);
  const HostMatrix x = random_matrix(m, n, DType::bf16, 901), w16 = random_matrix(n, n, DType::bf16, 902, 0.02f);
  Buffer xd = upload(x), wd = upload(w16);
  const size_t bytes = size_t(m * n) * 2;
  Buffer y_graph[2] = {Buffer::allocate(Memory::device, bytes), Buffer::allocate(Memory::device, bytes)};
  Buffer y_plain[2] = {Buffer::allocate(Memory::device, bytes), Buffer::allocate(Memory::device, bytes)};
  LinearOptions lo;  // cta items of 8 warps trigger at entry: the even-share carveout's query
  lo.path = LinearPath::fused_mma, lo.items = LinearItems::cta, lo.warps = 8, lo.splits = 1;
  SkinnyOptions so;  // the ring kernel asks the occupancy calculator under PDL
  so.loader = SkinnyLoader::tma;
  auto calls = [&](Buffer (&y)[2], bool pdl, cudaStream_t s) {
    LinearOptions l = lo;
    SkinnyOptions k = so;
    l.pdl = k.pdl = pdl;
    linear(TensorView{xd.data(), DType::bf16, m, n}, q.device_mma16, MutableTensorView{y[0].data(), DType::bf16, m, n},
           ws, s, l);
    skinny_gemm(TensorView{y[0].data(), DType::bf16, m, n}, TensorView{wd.data(), DType::bf16, n, n},
                MutableTensorView{y[1].data(), DType::bf16, m, n}, s, k);
  };
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  for (auto& b : y_graph) ASSERT_EQ(cudaMemsetAsync(b.data(), 0xff, b.size(), s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  try {
    calls(y_graph, true, s);
  } catch (const std::exception& e) {
    cudaStreamEndCapture(s, &graph);
    FAIL() << "a first PDL launch inside a global capture threw: " << e.what();
  }
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  calls(y_plain, false, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (int i = 0; i < 2; ++i) {
    const auto plain = download16(y_plain[i].data(), size_t(m * n));
    for (uint16_t v : plain) ASSERT_NE(v, 0xffff) << "output " << i;
    EXPECT_EQ(download16(y_graph[i].data(), size_t(m * n)), plain) << "output " << i << " from the captured graph";
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(GpuLinear, PdlChainMatchesPlainLaunches) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 2048, layers = 6;
  LinearWorkspace ws({64, n, n, true});
  std::vector<Quantized> w;
  for (int64_t l = 0; l < layers; ++l) w.push_back(quantize_random(n, n, int(2 + l % 4), 300 + uint64_t(l)));
  for (int64_t m : {1, 3, 16, 64}) {
    std::vector<LinearOptions> plans(1);  // automatic
    if (m <= 4) plans.emplace_back().path = LinearPath::gemv;
    for (LinearItems items :
         {LinearItems::cta, LinearItems::warp, LinearItems::stripes, LinearItems::wgmma, LinearItems::cta_shuffle,
          LinearItems::wgmma_tile, LinearItems::wgmma_stream}) {
      LinearOptions f;
      f.path = LinearPath::fused_mma, f.items = items, f.splits = items == LinearItems::cta_shuffle ? 1 : 3;
      plans.push_back(f);
    }
    LinearOptions ws_tile;  // the warp-specialised tile kernel (256 tokens, no splits)
    ws_tile.path = LinearPath::fused_mma, ws_tile.items = LinearItems::wgmma_tile, ws_tile.n_tiles = 32;
    plans.push_back(ws_tile);
    const HostMatrix x = random_matrix(m, n, DType::bf16, 310 + uint64_t(m));
    Buffer x0 = upload(x);
    std::vector<Buffer> act;
    for (int64_t l = 0; l < layers; ++l) act.push_back(Buffer::allocate(Memory::device, size_t(m * n) * 2));
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    for (size_t pi = 0; pi < plans.size(); ++pi) {
      const std::string what = "M=" + std::to_string(m) + " plan " + std::to_string(pi) + " (" +
                               plan_linear(m, n, n, 4, plans[pi]).describe() + ")";
      auto chain = [&](bool pdl) {
        LinearOptions o = plans[pi];
        o.pdl = pdl;
        for (int64_t l = 0; l < layers; ++l)
          linear(TensorView{(l ? act[size_t(l - 1)] : x0).data(), DType::bf16, m, n}, w[size_t(l)].device_mma16,
                 MutableTensorView{act[size_t(l)].data(), DType::bf16, m, n}, ws, s, o);
      };
      auto poison = [&] {
        for (auto& a : act) ASSERT_EQ(cudaMemsetAsync(a.data(), 0xff, a.size(), s), cudaSuccess);
      };
      poison();
      chain(false);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
      const auto plain = download16(act.back().data(), size_t(m * n));
      for (uint16_t v : plain) ASSERT_NE(v, 0xffff) << what << ": the plain chain left poison";
      for (int rep = 0; rep < 3; ++rep) {
        poison();
        chain(true);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
        ASSERT_EQ(download16(act.back().data(), size_t(m * n)), plain) << what << ": PDL chain, repeat " << rep;
      }
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      poison();
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      chain(true);
      ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << what;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess) << what;
      for (int i = 0; i < 3; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
      EXPECT_EQ(download16(act.back().data(), size_t(m * n)), plain) << what << ": PDL chain replayed from a graph";
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
    cudaStreamDestroy(s);
  }
}

// The GEMV keeps x in shared memory as fp16 scaled by a power of two per token: tiny,
// huge (bf16 beyond fp16's range) and outlier-laden activations must all come out right,
// on both product paths, which scale x to different bounds (kGemvTensorProducts: HFMA2 at
// M = 1 and at M = 2 with k = 2, tensor cores at M = 2 with k >= 3 and at M = 4).
TEST(GpuLinear, GemvHandlesAnyActivationRange) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 700, k = 3000;
  LinearWorkspace ws({4, n, k, false});
  for (int64_t m : {1, 2, 4})
    for (int bits : {2, 3, 4})
      for (DType dt : {DType::f16, DType::bf16})
        for (double scale : dt == DType::f16 ? std::vector<double>{1e-3, 1.0, 1000.0} : std::vector<double>{1e-30, 1.0, 1e30}) {
          const Quantized q = quantize_random(n, k, bits, 60 + bits);
          HostMatrix x = random_matrix(m, k, DType::f32, 61);
          for (int64_t t = 0; t < m; ++t)
            for (int64_t i = 0; i < k; ++i) x.set(t, i, i == 17 * (t + 1) ? float(scale) * 8 : x.at(t, i) * float(scale));
          HostMatrix x16 = random_matrix(m, k, dt, 0);
          for (int64_t t = 0; t < m; ++t)
            for (int64_t i = 0; i < k; ++i) x16.set(t, i, x.at(t, i));  // rounded to dt
          const std::vector<double> ref = cpu::matmul_fp64(x16.view(), q.host_flat);
          Buffer xd = upload(x16), yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
          ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
          LinearOptions g;
          g.path = LinearPath::gemv;
          linear(TensorView{xd.data(), dt, m, k}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n}, ws, nullptr, g);
          const auto got = download16(yd.data(), size_t(m * n));
          EXPECT_LE(relative_error(dt, got, ref, m * n), tolerance(dt))
              << "M=" << m << " k=" << bits << " " << dtype_name(dt) << " scale " << scale;
        }
}

// Every weight position of a unit through the GEMV, one at a time: token t's x is one-hot at
// column c_t, so y[t, :] is column c_t of the dequantized W, checked per element. A decode
// that took the wrong code, level, row or k-step for any position (the k = 2 GEMV decodes
// some k-steps in registers and the rest through the table, kGemvK2RegisterSteps) shows
// as a whole wrong element here, where a Frobenius bound over random data could absorb a
// few. K = 256: two supertiles, every column of both; N = 48: every row of a 16-row stripe.
TEST(GpuLinear, GemvDecodesEveryWeightPosition) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 48, k = 256;
  for (int bits = 2; bits <= 5; ++bits) {
    const Quantized q = quantize_random(n, k, bits, 70 + bits);
    for (int64_t m = 1; m <= 4; ++m) {
      LinearWorkspace ws({m, n, k, false});
      for (DType dt : {DType::f16, DType::bf16}) {
        Buffer xd = Buffer::allocate(Memory::device, size_t(m * k) * 2), yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
        for (int64_t c0 = 0; c0 < k; c0 += m) {
          HostMatrix x{{}, dt, m, k, k};
          x.bytes.assign(size_t(m * k) * 2, 0);
          for (int64_t t = 0; t < m; ++t) x.set(t, (c0 + t) % k, 1.0f);
          const std::vector<double> ref = cpu::matmul_fp64(x.view(), q.host_flat);
          ASSERT_EQ(cudaMemcpy(xd.data(), x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
          ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
          LinearOptions g;
          g.path = LinearPath::gemv;
          linear(TensorView{xd.data(), dt, m, k}, q.device_mma16, MutableTensorView{yd.data(), dt, m, n}, ws, nullptr, g);
          const auto got = download16(yd.data(), size_t(m * n));
          double ref_max = 0;
          for (double r : ref) ref_max = std::max(ref_max, std::fabs(r));
          int wrong = 0;
          for (int64_t i = 0; i < m * n; ++i) {
            const double y = dt == DType::f16 ? half_bits_to_float(got[size_t(i)]) : bf16_bits_to_float(got[size_t(i)]);
            const double r = ref[size_t(i)];
            // Per element: the output's rounding and the decode's fp16 products (a few 2^-11),
            // with twice the Frobenius bound as margin. A wrong level is off by at least 10.6%
            // (the closest adjacent bnf levels, k = 5); a wrong position by a whole weight.
            if (!(std::fabs(y - r) <= 2 * tolerance(dt) * (std::fabs(r) + 0.01 * ref_max)) && wrong++ < 3)
              ADD_FAILURE() << "k=" << bits << " M=" << m << " " << dtype_name(dt) << ": y[" << i / n << ", " << i % n
                            << "] (W row " << i % n << ", column " << (c0 + i / n) % k << ") = " << y << ", expected " << r;
          }
          ASSERT_EQ(wrong, 0) << "k=" << bits << " M=" << m << " " << dtype_name(dt) << " columns from " << c0;
        }
      }
    }
  }
}

TEST(GpuLinear, RotatedWeightsRotateTheActivations) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 96, k = 3584, m = 5;
  LinearWorkspace ws({m, n, k, true});
  for (RotationMode mode : {RotationMode::block, RotationMode::row}) {
    const Rotation rot = Rotation::make(mode, 64, k, 5);
    HostMatrix w = random_matrix(n, k, DType::f32, 31, 0.02f, 0.001);
    hadamard_rotate(w.mutable_view(), rot);
    QuantizedMatrix qh = cpu::quantize(w.view(), Codebook::bnf(3));
    qh.set_rotation(rot);
    const QuantizedMatrix qd = cuda::repack(cuda::to_device(qh), Layout::mma16, nullptr);
    ASSERT_TRUE(qd.rotation().has_value());
    const HostMatrix x = random_matrix(m, k, DType::f16, 32);
    HostMatrix xr = random_matrix(m, k, DType::f32, 0);
    hadamard_rotate(x.view(), xr.mutable_view(), rot);
    const std::vector<double> ref = cpu::matmul_fp64(xr.view(), qh);
    Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
    ASSERT_EQ(cudaMemset(yd.data(), 0xff, yd.size()), cudaSuccess);
    linear(TensorView{xd.data(), DType::f16, m, k}, qd, MutableTensorView{yd.data(), DType::f16, m, n}, ws, nullptr);
    EXPECT_LE(relative_error(DType::f16, download16(yd.data(), size_t(m * n)), ref, m * n), 3e-3)
        << (mode == RotationMode::block ? "block" : "row");
  }
}

TEST(GpuLinear, BadInputIsAClearError) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 64, k = 256, m = 4;
  LinearWorkspace ws({m, n, k, false});
  const Quantized q = quantize_random(n, k, 4, 5);
  Buffer xd = Buffer::allocate(Memory::device, size_t(m * k) * 4), yd = Buffer::allocate(Memory::device, size_t(m * n) * 4);
  const TensorView x{xd.data(), DType::bf16, m, k};
  const MutableTensorView y{yd.data(), DType::bf16, m, n};
  auto expect_error = [&](auto&& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error, expected one containing '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error([&] { linear(x, q.device_flat, y, ws, nullptr); }, "mma16 layout");
  expect_error([&] { linear(TensorView{xd.data(), DType::f32, m, k}, q.device_mma16, y, ws, nullptr); }, "F16 or BF16");
  expect_error([&] { linear(TensorView{xd.data(), DType::bf16, m, k - 1}, q.device_mma16, y, ws, nullptr); }, "columns");
  expect_error([&] { linear(x, q.device_mma16, MutableTensorView{yd.data(), DType::f16, m, n}, ws, nullptr); }, "y is F16");
  expect_error([&] { linear(TensorView{xd.data(), DType::bf16, m + 1, k}, q.device_mma16,
                            MutableTensorView{yd.data(), DType::bf16, m + 1, n}, ws, nullptr); }, "workspace limits");
  LinearOptions d;
  d.path = LinearPath::dequant_cublas;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, d); }, "dequant_path");
  LinearOptions bad_algo;
  bad_algo.path = LinearPath::dequant_cublas, bad_algo.gemm_algo = 8;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_algo); }, "gemm_algo must be");
  LinearOptions bad;
  bad.n_tiles = 3;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad); }, "n_tiles");
  LinearOptions bad_wgmma;
  bad_wgmma.items = LinearItems::wgmma, bad_wgmma.n_tiles = 2;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_wgmma); }, "wgmma items take n_tiles 4 or 8");
  LinearOptions bad_tile;
  bad_tile.items = LinearItems::wgmma_tile, bad_tile.n_tiles = 4;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_tile); }, "wgmma_tile items take n_tiles 8, 16 or 32");
  LinearOptions bad_stream;
  bad_stream.items = LinearItems::wgmma_stream, bad_stream.n_tiles = 4;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_stream); }, "wgmma_stream items take n_tiles 8, 16 or 32");
  bad_stream.n_tiles = 32, bad_stream.warps = 4;
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_stream); }, "take 8 warps");
  bad_stream.warps = 0;
  bad_stream.n_tiles = 8;  // this workspace (M <= 16) has no partial tiles for stream-K
  expect_error([&] { linear(x, q.device_mma16, y, ws, nullptr, bad_stream); },
               cuda::detail::device_has_wgmma() ? "partial tiles" : "sm_90");
  std::vector<uint16_t> host_x(size_t(m * k));
  expect_error([&] { linear(TensorView{host_x.data(), DType::bf16, m, k}, q.device_mma16, y, ws, nullptr); },
               "not device memory");
}

}  // namespace
}  // namespace kbit
