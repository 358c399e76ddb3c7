// Every kbit::linear plan of the compiled tuned table (data/linear_configs.json), forced on its own
// shape and bit width, at the M it was tuned at and the lowest M it serves, on whatever Hopper GPU
// runs the tests. The dispatcher runs these plans on the GPU they were tuned for (the H200 today),
// and the other GPU tests reach only a few of them (ModelShapes' shapes, on that GPU). Each plan's output is checked in full (every element written
// and finite, rows past M untouched, within twice the dense bound of dequantize + cuBLAS on the same
// input) and on sampled columns (first, last, stripe and supertile edges, random) against the fp64
// CPU reference over the dequantized weights.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>

#include "kbit/cuda.h"
#include "kbit/linear.h"
#include "cpu/parallel.h"
#include "cuda/device_checks.h"
#include "dispatch/linear_configs.h"
#include "support/gpu_test_support.h"

namespace kbit {
namespace {

using test::download16;
using test::tolerance;

// A fast, thread-count-independent N(0, sigma)-like value for index i (sum of four uniforms):
// the largest table shape has 126 M weights, too many for std::normal_distribution per test run.
float noise(uint64_t seed, uint64_t i, float sigma) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i;
  float sum = 0;
  for (int r = 0; r < 4; ++r) {
    z += 0x9e3779b97f4a7c15ull;
    uint64_t h = z;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    sum += float(h >> 40) * (1.0f / 16777216.0f);
  }
  return (sum - 2.0f) * 1.7320508f * sigma;  // variance of a sum of 4 uniforms is 1/3
}

// rows x cols of `dtype` (f32, f16, bf16) on the device, and its values as floats on the host.
struct RandomMatrix {
  Buffer device;
  std::vector<float> host;  // the values as stored (rounded to dtype)
};
RandomMatrix random_device_matrix(int64_t rows, int64_t cols, DType dtype, uint64_t seed, float sigma) {
  const int64_t count = rows * cols;
  RandomMatrix r;
  r.host.resize(size_t(count));
  std::vector<uint8_t> bytes(size_t(count) * dtype_size(dtype));
  cpu::detail::parallel_for(count, 1 << 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float v = noise(seed, uint64_t(i), sigma);
      if (dtype == DType::f32) {
        std::memcpy(bytes.data() + i * 4, &v, 4);
        r.host[size_t(i)] = v;
      } else {
        const uint16_t h = dtype == DType::f16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
        std::memcpy(bytes.data() + i * 2, &h, 2);
        r.host[size_t(i)] = dtype == DType::f16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
      }
    }
  });
  r.device = Buffer::allocate(Memory::device, bytes.size());
  EXPECT_EQ(cudaMemcpy(r.device.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return r;
}

// Output columns checked against the fp64 reference: both ends, the edges of 16-row stripes and
// 128-row blocks, the middle, and random ones.
std::vector<int64_t> sampled_columns(int64_t n, uint64_t seed) {
  std::vector<int64_t> c = {0, 1, 15, 16, 17, 127, 128, n / 2, n - 129, n - 17, n - 16, n - 2, n - 1};
  for (uint64_t i = 0; i < 19; ++i) c.push_back(int64_t(uint64_t(noise(seed, i, 1.0f) * 1e6f + 5e6f) % uint64_t(n)));
  std::erase_if(c, [n](int64_t v) { return v < 0 || v >= n; });
  std::sort(c.begin(), c.end());
  c.erase(std::unique(c.begin(), c.end()), c.end());
  return c;
}

// The entry's plan as LinearOptions (what the dispatcher runs when the table has the entry).
LinearOptions forced_options(const detail::LinearConfig& c) {
  LinearOptions o;
  o.path = c.path;
  if (c.path == LinearPath::fused_mma) o.items = c.items, o.n_tiles = c.n_tiles, o.warps = c.warps, o.splits = c.splits;
  if (c.path == LinearPath::dequant_cublas) o.gemm_algo = c.gemm_algo;
  o.pdl = c.pdl;
  return o;
}

std::string describe(const detail::LinearConfig& c, DType dt) {
  return c.device + " " + std::to_string(c.n) + "x" + std::to_string(c.k) + " k=" + std::to_string(c.bits) +
         " M=" + std::to_string(c.m) + " " + std::string(dtype_name(dt)) + " " + std::string(linear_path_name(c.path)) +
         (c.path == LinearPath::fused_mma
              ? " " + std::string(linear_items_name(c.items)) + " n_tiles=" + std::to_string(c.n_tiles) +
                    " warps=" + std::to_string(c.warps) + " splits=" + std::to_string(c.splits)
              : std::string()) +
         (c.pdl ? " pdl" : "");
}

double value_of(DType t, uint16_t bits) { return t == DType::f16 ? half_bits_to_float(bits) : bf16_bits_to_float(bits); }

TEST(GpuLinear, EveryTunedPlanOnItsShape) {
  KBIT_SKIP_WITHOUT_GPU();
  // The linear entries (bits 2..5; bits 16 are skinny_gemm's), grouped by weight so that each W is
  // quantized once; within a group by M.
  std::map<std::tuple<int64_t, int64_t, int>, std::vector<detail::LinearConfig>> groups;
  for (const auto& c : detail::compiled_linear_configs())
    if (c.bits >= 2 && c.bits <= 5) groups[{c.n, c.k, c.bits}].push_back(c);
  ASSERT_FALSE(groups.empty()) << "the compiled table has no kbit::linear entry";
  const bool wgmma = cuda::detail::device_has_wgmma();
  int checked = 0, skipped = 0, runs = 0;
  uint64_t seed = 7000;
  for (auto& [key, entries] : groups) {
    const auto started = std::chrono::steady_clock::now();
    const int runs_before = runs;
    const auto [n, k, bits] = key;
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.m < b.m; });
    const int64_t max_m = entries.back().m;
    const DType dt = bits % 2 ? DType::f16 : DType::bf16;  // both dtypes over each shape's bit widths
    const std::string group = std::to_string(n) + "x" + std::to_string(k) + " k=" + std::to_string(bits);

    // W quantized on the GPU (the same bytes as the CPU's) and repacked to mma16, the layout every path
    // reads; its dequantized rows at the sampled columns come back for the reference.
    QuantizedMatrix mma16;
    const std::vector<int64_t> cols = sampled_columns(n, seed);
    std::vector<float> w_rows(cols.size() * size_t(k));
    {
      const RandomMatrix w = random_device_matrix(n, k, DType::f32, seed++, 0.02f);
      const QuantizedMatrix flat = cuda::quantize(TensorView{w.device.data(), DType::f32, n, k}, Codebook::bnf(bits), nullptr);
      mma16 = cuda::repack(flat, Layout::mma16, nullptr);
      Buffer dq = Buffer::allocate(Memory::device, size_t(n * k) * 4);
      cuda::dequantize(flat, MutableTensorView{dq.data(), DType::f32, n, k}, nullptr);
      for (size_t j = 0; j < cols.size(); ++j)
        ASSERT_EQ(cudaMemcpy(w_rows.data() + j * size_t(k), static_cast<const float*>(dq.data()) + cols[j] * k,
                             size_t(k) * 4, cudaMemcpyDeviceToHost),
                  cudaSuccess)
            << group;
    }
    const RandomMatrix x = random_device_matrix(max_m, k, dt, seed++, 1.0f);
    std::vector<double> ref(size_t(max_m) * cols.size());
    cpu::detail::parallel_for(max_m, 1, [&](int64_t b, int64_t e) {
      for (int64_t m = b; m < e; ++m)
        for (size_t j = 0; j < cols.size(); ++j) {
          const float* xr = x.host.data() + m * k;
          const float* wr = w_rows.data() + j * size_t(k);
          double s = 0;
          for (int64_t i = 0; i < k; ++i) s += double(xr[i]) * double(wr[i]);
          ref[size_t(m) * cols.size() + j] = s;
        }
    });

    LinearWorkspace ws({max_m, n, k, true});
    const size_t count = size_t(max_m * n);
    Buffer yd = Buffer::allocate(Memory::device, count * 2);
    // The whole-matrix comparison: dequantize + cuBLAS (cuBLASLt's first candidate) at max_m.
    LinearOptions dq;
    dq.path = LinearPath::dequant_cublas, dq.gemm_algo = 0;
    ASSERT_NO_THROW(linear(TensorView{x.device.data(), dt, max_m, k}, mma16,
                           MutableTensorView{yd.data(), dt, max_m, n}, ws, nullptr, dq))
        << group;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << group;
    const std::vector<uint16_t> y_dq = download16(yd.data(), count);

    int64_t previous_m[2] = {0, 0};  // the last tuned M of plain and of PDL entries
    for (const auto& c : entries) {
      // An entry serves M in (previous tuned M, m] above m / 2 (linear_configs.h): run both ends,
      // the lower one mostly leaving partial token tiles.
      const int64_t low_m = std::max(previous_m[c.pdl], c.m / 2) + 1;
      previous_m[c.pdl] = c.m;
      const bool tile_items = c.path == LinearPath::fused_mma &&
                              (c.items == LinearItems::wgmma || c.items == LinearItems::wgmma_tile ||
                               c.items == LinearItems::wgmma_stream);
      if (tile_items && !wgmma) {
        ++skipped;
        continue;
      }
      const LinearOptions o = forced_options(c);
      for (const int64_t m : {low_m, c.m}) {
        if (m == low_m && low_m == c.m) continue;
        const std::string what = describe(c, dt) + " run at M=" + std::to_string(m);
        const LinearPlan p = plan_linear(m, n, k, bits, o);
        EXPECT_EQ(p.path, c.path) << what;
        if (c.path == LinearPath::fused_mma) {
          EXPECT_EQ(p.items, c.items) << what;
          EXPECT_EQ(p.n_tiles, c.n_tiles) << what;
          EXPECT_EQ(p.warps, c.warps) << what;
        }
        ASSERT_EQ(cudaMemset(yd.data(), 0xff, count * 2), cudaSuccess) << what;
        ASSERT_NO_THROW(linear(TensorView{x.device.data(), dt, m, k}, mma16, MutableTensorView{yd.data(), dt, m, n},
                               ws, nullptr, o))
            << what;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        const std::vector<uint16_t> got = download16(yd.data(), size_t(m * n + (m < max_m ? 1 : 0)));
        int64_t non_finite = 0;
        double diff = 0, norm = 0;
        for (size_t i = 0; i < size_t(m * n); ++i) {
          const double v = value_of(dt, got[i]), r = value_of(dt, y_dq[i]);
          if (!std::isfinite(v)) {
            ++non_finite;
            continue;
          }
          diff += (v - r) * (v - r), norm += r * r;
        }
        EXPECT_EQ(non_finite, 0) << what << ": outputs not written or not finite";
        EXPECT_LE(std::sqrt(diff / std::max(norm, 1e-300)), 2 * tolerance(dt)) << what << ": against dequantize + cuBLAS";
        if (m < max_m) {
          EXPECT_EQ(got[size_t(m * n)], 0xffff) << what << ": wrote past M";
        }
        double e = 0, r2 = 0;
        for (int64_t row = 0; row < m; ++row)
          for (size_t j = 0; j < cols.size(); ++j) {
            const double v = value_of(dt, got[size_t(row * n + cols[j])]), r = ref[size_t(row) * cols.size() + j];
            e += (v - r) * (v - r), r2 += r * r;
          }
        EXPECT_LE(std::sqrt(e / std::max(r2, 1e-300)), tolerance(dt)) << what << ": sampled columns against fp64";
        ++runs;
      }
      ++checked;
    }
    std::printf("[          ] %s %s: %zu plans, %d runs, %.1f s\n", group.c_str(), std::string(dtype_name(dt)).c_str(),
                entries.size(), runs - runs_before,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    std::fflush(stdout);
  }
  std::printf("[          ] %d tuned plans checked in %d runs, %d skipped (wgmma items on a GPU without wgmma)\n",
              checked, runs, skipped);
  EXPECT_GT(checked, 0);
}

}  // namespace
}  // namespace kbit
