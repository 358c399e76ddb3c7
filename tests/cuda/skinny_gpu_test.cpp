// kbit::skinny_gemm (and kbit::linear on dense weights) against an fp64 CPU reference: every M in 1..16, with and
// without residual (and with bias), bf16 and fp16, N in {8, 100, 7168}, K in {8, 3584, 3592},
// random inputs, poisoned outputs, the planned shape and a cluster split, each loader
// (the TMA ring and the streaming kernel's two); every kernel shape bit-identical run to
// run; PDL chains; bad input.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kbit/error.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"
#include "support/gpu_test_support.h"

namespace kbit {
namespace {

using test::HostMatrix;
using test::random_matrix;
using test::download16;
using test::relative_error;
using test::tolerance;
using test::upload;


// fp64 reference of a x w^T (+ r) (+ bias, a 1 x N matrix) over the exact 16-bit operands.
std::vector<double> reference(const HostMatrix& a, const HostMatrix& w, const HostMatrix* r, int64_t m,
                              const HostMatrix* bias = nullptr) {
  std::vector<double> y(size_t(m * w.rows));
  std::vector<double> wd(size_t(w.rows * w.cols));
  for (int64_t j = 0; j < w.rows; ++j)
    for (int64_t c = 0; c < w.cols; ++c) wd[size_t(j * w.cols + c)] = w.at(j, c);
  for (int64_t i = 0; i < m; ++i) {
    std::vector<double> ad(size_t(a.cols));
    for (int64_t c = 0; c < a.cols; ++c) ad[size_t(c)] = a.at(i, c);
    for (int64_t j = 0; j < w.rows; ++j) {
      double acc = 0;
      const double* wr = wd.data() + j * w.cols;
      for (int64_t c = 0; c < a.cols; ++c) acc += ad[size_t(c)] * wr[c];
      y[size_t(i * w.rows + j)] = acc + (r ? double(r->at(i, j)) : 0.0) + (bias ? double(bias->at(0, j)) : 0.0);
    }
  }
  return y;
}


TEST(GpuSkinny, MatchesFp64ReferenceForEveryMShapeDtypeAndResidual) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (int64_t n : {8, 100, 7168})
    for (int64_t k : {8, 3584, 3592})
      for (DType dt : {DType::bf16, DType::f16}) {
        const HostMatrix w = random_matrix(n, k, dt, seed++, 0.05f);
        const HostMatrix a = random_matrix(16, k, dt, seed++);
        const HostMatrix r = random_matrix(16, n, dt, seed++);
        const HostMatrix bias = random_matrix(1, n, dt, seed++);
        Buffer wd = upload(w), ad = upload(a), rd = upload(r), bd = upload(bias);
        Buffer cd = Buffer::allocate(Memory::device, size_t(16 * n) * 2);
        const auto ref_plain = reference(a, w, nullptr, 16), ref_res = reference(a, w, &r, 16);
        const auto ref_bias_res = reference(a, w, &r, 16, &bias);
        // Epilogues: none, R, bias + R (the stream kernels load both before their loop).
        for (int64_t m = 1; m <= 16; ++m)
          for (SkinnyLoader loader : {SkinnyLoader::automatic, SkinnyLoader::registers, SkinnyLoader::staged,
                                      SkinnyLoader::async})
          for (int epilogue : {0, 1, 2})
            for (bool split : {false, true}) {
              const bool residual = epilogue >= 1, with_bias = epilogue == 2;
              const std::string what = "N=" + std::to_string(n) + " K=" + std::to_string(k) + " " +
                                       std::string(dtype_name(dt)) + " M=" + std::to_string(m) +
                                       (residual ? " residual" : "") + (with_bias ? " bias" : "") +
                                       (split ? " split" : "") + " loader " + skinny_loader_name(loader);
              ASSERT_EQ(cudaMemset(cd.data(), 0xff, cd.size()), cudaSuccess);
              SkinnyOptions o;
              o.loader = loader;
              if (residual) o.residual = TensorView{rd.data(), dt, m, n};
              if (with_bias) o.bias = bd.data();
              const TensorView av{ad.data(), dt, m, k}, wv{wd.data(), dt, n, k};
              const MutableTensorView cv{cd.data(), dt, m, n};
              if (split) o.splits = 4, o.warps = 4;  // a cluster of 4 CTAs per row group (fewer if K is short)
              if (std::getenv("KBIT_TEST_TRACE")) std::fprintf(stderr, "%s: %s\n", what.c_str(), plan_skinny(m, n, k, o).describe().c_str());
              ASSERT_NO_THROW(skinny_gemm(av, wv, cv, nullptr, o)) << what;
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
              const auto got = download16(cd.data(), size_t(16 * n));
              const auto& ref = with_bias ? ref_bias_res : residual ? ref_res : ref_plain;
              EXPECT_LE(relative_error(dt, got, ref, m * n), tolerance(dt)) << what;
              if (m < 16) EXPECT_EQ(got[size_t(m * n)], 0xffff) << what << ": wrote past M";
            }
      }
}

// The Kimi latent shape at M = 16 (random W and A, the fp64 reference, device copies and
// an output buffer), shared by the shape tests.
struct KimiM16 {
  static constexpr int64_t n = 7168, k = 3584, m = 16;
  HostMatrix w = random_matrix(n, k, DType::bf16, 5, 0.05f), a = random_matrix(m, k, DType::bf16, 6);
  std::vector<double> ref = reference(a, w, nullptr, m);
  Buffer wd = upload(w), ad = upload(a), cd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
};

TEST(GpuSkinny, EveryKernelShapeAgreesBitForBitRunToRun) {
  KBIT_SKIP_WITHOUT_GPU();
  KimiM16 kimi;
  const int64_t n = kimi.n, k = kimi.k, m = kimi.m;
  const HostMatrix& w = kimi.w;
  Buffer &wd = kimi.wd, &ad = kimi.ad, &cd = kimi.cd;
  const auto& ref = kimi.ref;
  // Every instantiated (warps, stripes) with three rings (stages x kslice) at M = 16
  // (n_tiles 2) and, with a larger A, M = 24 and 32 (n_tiles 4), each with and without a
  // cluster split of K. A ring too large for shared memory must be a clear error.
  const int64_t big_m = 32;
  const HostMatrix a_big = random_matrix(big_m, k, DType::bf16, 7);
  const auto ref_big = reference(a_big, w, nullptr, big_m);
  Buffer abd = upload(a_big), cbd = Buffer::allocate(Memory::device, size_t(big_m * n) * 2);
  for (int64_t mm : {m, int64_t(24), big_m}) {
    for (int warps : {2, 4, 8})
      for (int stripes : {1, 2, 4})
        for (auto [stages, kslice] : {std::pair{2, 128}, std::pair{4, 256}, std::pair{3, 512}})
          for (int splits : {1, 2, 8}) {
            SkinnyOptions o;
            o.loader = SkinnyLoader::tma;
            o.warps = warps, o.stripes = stripes, o.stages = stages, o.kslice = kslice, o.splits = splits;
            const std::string what = "M=" + std::to_string(mm) + " " + plan_skinny(mm, n, k, o).describe();
            const TensorView av{mm == m ? ad.data() : abd.data(), DType::bf16, mm, k};
            const MutableTensorView cv{mm == m ? cd.data() : cbd.data(), DType::bf16, mm, n};
            ASSERT_EQ(cudaMemset(cv.data, 0xff, size_t(mm * n) * 2), cudaSuccess);
            // 64 rows + 16..32 tokens of 512 columns in 3 slots exceed 227 KB
            const bool too_big = (16 * stripes + mm) * kslice * 2 * stages + 128 > 227 * 1024;
            if (too_big) {
              test::expect_error([&] { skinny_gemm(av, TensorView{wd.data(), DType::bf16, n, k}, cv, nullptr, o); },
                                 "shared memory");
              continue;
            }
            skinny_gemm(av, TensorView{wd.data(), DType::bf16, n, k}, cv, nullptr, o);
            const auto first = download16(cv.data, size_t(mm * n));
            EXPECT_LE(relative_error(DType::bf16, first, mm == m ? ref : ref_big, mm * n), 1e-2) << what;
            skinny_gemm(av, TensorView{wd.data(), DType::bf16, n, k}, cv, nullptr, o);
            EXPECT_EQ(download16(cv.data, size_t(mm * n)), first) << what;
          }
  }
  // The streaming kernel: every instantiated shape at M = 16 (it stops there; M = 24 is
  // a clear error) and, for 128-column batches, M = 8; with and without a cluster split.
  for (SkinnyLoader loader : {SkinnyLoader::registers, SkinnyLoader::staged})
    for (int warps : {4, 8})
      for (auto [stages, kslice] : {std::pair{2, 64}, std::pair{3, 64}, std::pair{2, 128}})
        for (int splits : {1, 2, 8}) {
          SkinnyOptions o;
          o.loader = loader, o.warps = warps, o.stages = stages, o.kslice = kslice, o.splits = splits;
          // A's first 8 rows as an M = 8 problem: C's first 8 rows of the reference.
          const int64_t mm = kslice == 128 ? 8 : m;
          const std::string what = "M=" + std::to_string(mm) + " " + plan_skinny(mm, n, k, o).describe();
          const MutableTensorView cv{cd.data(), DType::bf16, mm, n};
          ASSERT_EQ(cudaMemset(cv.data, 0xff, size_t(m * n) * 2), cudaSuccess);
          skinny_gemm(TensorView{ad.data(), DType::bf16, mm, k}, TensorView{wd.data(), DType::bf16, n, k}, cv, nullptr, o);
          const auto first = download16(cv.data, size_t(mm * n));
          EXPECT_LE(relative_error(DType::bf16, first, ref, mm * n), 1e-2) << what;
          skinny_gemm(TensorView{ad.data(), DType::bf16, mm, k}, TensorView{wd.data(), DType::bf16, n, k}, cv, nullptr, o);
          EXPECT_EQ(download16(cv.data, size_t(mm * n)), first) << what;
          if (kslice == 128) {
            test::expect_error([&] { skinny_gemm(TensorView{ad.data(), DType::bf16, m, k},
                                                 TensorView{wd.data(), DType::bf16, n, k},
                                                 MutableTensorView{cd.data(), DType::bf16, m, n}, nullptr, o); },
                               "M <= 8 only");
            continue;
          }
          test::expect_error([&] {
            skinny_gemm(TensorView{abd.data(), DType::bf16, 24, k}, TensorView{wd.data(), DType::bf16, n, k},
                        MutableTensorView{cbd.data(), DType::bf16, 24, n}, nullptr, o);
          }, "at most 16");
        }
}

// Its own test so that compute-sanitizer can take the async loader (A copied into the ring
// next to W) alone: `--gtest_filter=GpuSkinny.AsyncLoader*`.
TEST(GpuSkinny, AsyncLoaderShapesAgreeBitForBitRunToRun) {
  KBIT_SKIP_WITHOUT_GPU();
  KimiM16 kimi;
  const int64_t n = kimi.n, k = kimi.k, m = kimi.m;
  const HostMatrix& w = kimi.w;
  Buffer &wd = kimi.wd, &ad = kimi.ad, &cd = kimi.cd;
  const auto& ref = kimi.ref;
  // The async loader (a run-time ring per warp) at M = 16: one and two 16-row stripes,
  // rings of 2..8 tiles of 64 and 128 columns; one too large for shared memory is a clear
  // error.
  for (int stripes : {1, 2})
  for (int warps : {4, 8})
    for (int stages : {2, 5, 8})
      for (int kslice : {64, 128})
        for (int splits : {1, 2}) {
          SkinnyOptions o;
          o.loader = SkinnyLoader::async, o.stripes = stripes, o.warps = warps, o.stages = stages, o.kslice = kslice;
          o.splits = splits;
          const MutableTensorView cv{cd.data(), DType::bf16, m, n};
          ASSERT_EQ(cudaMemset(cv.data, 0xff, size_t(m * n) * 2), cudaSuccess);
          const TensorView av{ad.data(), DType::bf16, m, k}, wv{wd.data(), DType::bf16, n, k};
          if (stripes == 2 && kslice == 128) {  // not instantiated (it would spill): the plan refuses it
            test::expect_error([&] { skinny_gemm(av, wv, cv, nullptr, o); }, "two stripes need kslice 64");
            continue;
          }
          const std::string what = "M=16 " + plan_skinny(m, n, k, o).describe();
          if (size_t(warps) * stages * (16 * stripes + 16) * kslice * 2 > 227 * 1024) {  // W and A rows
            test::expect_error([&] { skinny_gemm(av, wv, cv, nullptr, o); }, "shared memory");
            continue;
          }
          skinny_gemm(av, wv, cv, nullptr, o);
          const auto first = download16(cv.data, size_t(m * n));
          EXPECT_LE(relative_error(DType::bf16, first, ref, m * n), 1e-2) << what;
          skinny_gemm(av, wv, cv, nullptr, o);
          EXPECT_EQ(download16(cv.data, size_t(m * n)), first) << what;
        }
}

TEST(GpuSkinny, ActivationsWithoutSixteenByteAlignmentMatchToo) {
  KBIT_SKIP_WITHOUT_GPU();
  // A at a 2-byte offset (and with an odd row stride): the producer warp copies it
  // element by element instead of with bulk copies. K = 3592 ends in an 8-column slice.
  const int64_t n = 100, k = 3592, lda = k + 1;
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t m : {1, 5, 16, 32}) {
      const HostMatrix w = random_matrix(n, k, dt, 40 + uint64_t(m), 0.05f);
      const HostMatrix a = random_matrix(m, lda, dt, 60 + uint64_t(m));
      HostMatrix a_used = random_matrix(m, k, dt, 1);
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(&a_used.bytes[size_t(i * k) * 2], &a.bytes[size_t(i * lda + 1) * 2], size_t(k) * 2);
      const auto ref = reference(a_used, w, nullptr, m);
      Buffer wd = upload(w), ad = upload(a), cd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
      for (SkinnyLoader loader : {SkinnyLoader::tma, SkinnyLoader::registers, SkinnyLoader::staged, SkinnyLoader::async})
      for (int splits : {1, 4}) {
        if (m > 16 && loader != SkinnyLoader::tma) continue;
        const std::string what = std::string(dtype_name(dt)) + " M=" + std::to_string(m) + " splits " +
                                 std::to_string(splits) + " loader " + skinny_loader_name(loader);
        ASSERT_EQ(cudaMemset(cd.data(), 0xff, cd.size()), cudaSuccess);
        SkinnyOptions o;
        o.loader = loader;
        o.splits = splits;
        TensorView av{static_cast<const uint16_t*>(ad.data()) + 1, dt, m, k};
        av.row_stride = lda;
        ASSERT_NO_THROW(skinny_gemm(av, TensorView{wd.data(), dt, n, k}, MutableTensorView{cd.data(), dt, m, n},
                                    nullptr, o))
            << what;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        EXPECT_LE(relative_error(dt, download16(cd.data(), size_t(m * n)), ref, m * n), tolerance(dt)) << what;
      }
    }
}

TEST(GpuSkinny, BiasAndResidualReadsStayInsideTheirBuffers) {
  KBIT_SKIP_WITHOUT_GPU();
  // The stream kernels load bias and R before their loop, for rows and tokens past N and M
  // too (clamped): buffers of exactly N and M x N elements, N not a multiple of 16, M not
  // of 8 (memcheck: `--gtest_filter=GpuSkinny.BiasAndResidual*`).
  const int64_t n = 100, k = 64;
  for (int64_t m : {1, 3, 9, 16}) {
    const HostMatrix w = random_matrix(n, k, DType::bf16, 70 + uint64_t(m), 0.05f);
    const HostMatrix a = random_matrix(m, k, DType::bf16, 80 + uint64_t(m));
    const HostMatrix r = random_matrix(m, n, DType::bf16, 90 + uint64_t(m));
    const HostMatrix bias = random_matrix(1, n, DType::bf16, 100 + uint64_t(m));
    const auto ref = reference(a, w, &r, m, &bias);
    Buffer wd = upload(w), ad = upload(a), rd = upload(r), bd = upload(bias);
    Buffer cd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
    for (SkinnyLoader loader : {SkinnyLoader::tma, SkinnyLoader::registers, SkinnyLoader::staged, SkinnyLoader::async}) {
      const std::string what = "M=" + std::to_string(m) + " loader " + skinny_loader_name(loader);
      ASSERT_EQ(cudaMemset(cd.data(), 0xff, cd.size()), cudaSuccess);
      SkinnyOptions o;
      o.loader = loader;
      o.residual = TensorView{rd.data(), DType::bf16, m, n};
      o.bias = bd.data();
      ASSERT_NO_THROW(skinny_gemm(TensorView{ad.data(), DType::bf16, m, k}, TensorView{wd.data(), DType::bf16, n, k},
                                  MutableTensorView{cd.data(), DType::bf16, m, n}, nullptr, o))
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      EXPECT_LE(relative_error(DType::bf16, download16(cd.data(), size_t(m * n)), ref, m * n), tolerance(DType::bf16))
          << what;
    }
  }
}

TEST(GpuSkinny, ProgrammaticDependentLaunchKeepsAChainExact) {
  KBIT_SKIP_WITHOUT_GPU();
  // y_{i+1} = y_i W^T + y_i: each call reads what the previous one wrote. One CTA per row
  // group (the grid resident at once: the trigger at entry) and clusters of 4 (the trigger
  // after the main loop).
  const int64_t n = 1024, m = 4;
  const HostMatrix w = random_matrix(n, n, DType::bf16, 21, 0.02f), x = random_matrix(m, n, DType::bf16, 22);
  Buffer wd = upload(w);
  for (int splits : {1, 4})
  for (SkinnyLoader loader : {SkinnyLoader::tma, SkinnyLoader::registers, SkinnyLoader::staged, SkinnyLoader::async}) {
  std::vector<uint16_t> results[2];
  for (int pdl = 0; pdl < 2; ++pdl) {
    Buffer a = upload(x), b = Buffer::allocate(Memory::device, size_t(m * n) * 2);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
    for (int i = 0; i < 6; ++i) {
      SkinnyOptions o;
      o.loader = loader;
      o.splits = splits;
      o.pdl = pdl == 1;
      o.residual = TensorView{a.data(), DType::bf16, m, n};
      skinny_gemm(TensorView{a.data(), DType::bf16, m, n}, TensorView{wd.data(), DType::bf16, n, n},
                  MutableTensorView{b.data(), DType::bf16, m, n}, s, o);
      std::swap(a, b);
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaStreamDestroy(s);
    results[pdl] = download16(a.data(), size_t(m * n));
  }
  EXPECT_EQ(results[0], results[1]) << "loader " << skinny_loader_name(loader) << " splits " << splits;
  }
}

// PDL launches plan from the table's PDL entries where there are some (on the H200: the
// Kimi latent shape, 32-row CTAs with four 64-column tiles at M = 9-16): every M against
// the fp64 reference, poisoned rows past M untouched, two chained calls bit-identical.
TEST(GpuSkinny, PdlPlansOfTheKimiShapeMatchFp64AndRepeatBitForBit) {
  KBIT_SKIP_WITHOUT_GPU();
  KimiM16 kimi;
  const int64_t n = kimi.n, k = kimi.k;
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  Buffer second = Buffer::allocate(Memory::device, kimi.cd.size());
  for (int64_t m = 1; m <= 16; ++m) {
    SkinnyOptions o;
    o.pdl = true;
    const std::string what = "M=" + std::to_string(m) + " " + plan_skinny(m, n, k, o).describe();
    ASSERT_EQ(cudaMemset(kimi.cd.data(), 0xff, kimi.cd.size()), cudaSuccess);
    ASSERT_EQ(cudaMemset(second.data(), 0xff, second.size()), cudaSuccess);
    const TensorView av{kimi.ad.data(), DType::bf16, m, k}, wv{kimi.wd.data(), DType::bf16, n, k};
    ASSERT_NO_THROW(skinny_gemm(av, wv, MutableTensorView{kimi.cd.data(), DType::bf16, m, n}, s, o)) << what;
    ASSERT_NO_THROW(skinny_gemm(av, wv, MutableTensorView{second.data(), DType::bf16, m, n}, s, o)) << what;
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
    const auto got = download16(kimi.cd.data(), size_t(16 * n)), again = download16(second.data(), size_t(16 * n));
    EXPECT_LE(relative_error(DType::bf16, got, kimi.ref, m * n), tolerance(DType::bf16)) << what;
    EXPECT_EQ(got, again) << what;
    if (m < 16) EXPECT_EQ(got[size_t(m * n)], 0xffff) << what << ": wrote past M";
  }
  cudaStreamDestroy(s);
}

// The async loader's early tile refill, which PDL launches take for one wave of at least
// two CTAs per SM without a cluster (N = 5120: 320 row groups; launch_skinny_stream_nt):
// a chain of PDL calls gives the plain launches' bits, with one and two token tiles and
// with K not a multiple of the batch (a partly empty last batch).
TEST(GpuSkinny, EarlyRefillUnderPdlKeepsAChainExact) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 5120;
  const HostMatrix w = random_matrix(n, n, DType::bf16, 41, 0.01f);
  Buffer wd = upload(w);
  for (int64_t m : {3, 12})
    for (int kslice : {64, 128}) {
      if (m > 8 && kslice == 128) continue;  // not instantiated for two token tiles at 128 columns
      const HostMatrix x = random_matrix(m, n, DType::bf16, 42 + uint64_t(m));
      std::vector<uint16_t> results[2];
      for (int pdl = 0; pdl < 2; ++pdl) {
        Buffer a = upload(x), b = Buffer::allocate(Memory::device, size_t(m * n) * 2);
        cudaStream_t s;
        ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
        for (int i = 0; i < 4; ++i) {
          SkinnyOptions o;
          o.loader = SkinnyLoader::async, o.warps = 4, o.stripes = 1, o.stages = 2, o.kslice = kslice, o.splits = 1;
          o.pdl = pdl == 1;
          o.residual = TensorView{a.data(), DType::bf16, m, n};
          // K = 5112 in the even calls: the last batch is partly past K.
          const int64_t k = i % 2 ? n : n - 8;
          skinny_gemm(TensorView{a.data(), DType::bf16, m, k, n}, TensorView{wd.data(), DType::bf16, n, k, n},
                      MutableTensorView{b.data(), DType::bf16, m, n}, s, o);
          std::swap(a, b);
        }
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        cudaStreamDestroy(s);
        results[pdl] = download16(a.data(), size_t(m * n));
      }
      EXPECT_EQ(results[0], results[1]) << "M=" << m << " kslice=" << kslice;
    }
}

// kbit::linear on dense weights: the skinny kernel up to M = 16, cuBLASLt above; at
// M = 17..32 the skinny kernel where the workspace has no cuBLASLt scratch.
TEST(GpuLinearDense, SkinnyBelowAndCublasAboveMatchFp64) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t n = 272, k = 520, max_m = 100;
  const HostMatrix w = random_matrix(n, k, DType::bf16, 31, 0.05f), a = random_matrix(max_m, k, DType::bf16, 32);
  const HostMatrix r = random_matrix(max_m, n, DType::bf16, 33);
  const auto ref = reference(a, w, &r, max_m);
  Buffer wd = upload(w), ad = upload(a), rd = upload(r), cd = Buffer::allocate(Memory::device, size_t(max_m * n) * 2);
  LinearWorkspace ws({max_m, n, k, true});
  for (int64_t m : {1, 16, 17, 32, 33, 100}) {
    ASSERT_EQ(cudaMemset(cd.data(), 0xff, cd.size()), cudaSuccess);
    LinearOptions o;
    o.residual = TensorView{rd.data(), DType::bf16, m, n};
    ASSERT_NO_THROW(linear(TensorView{ad.data(), DType::bf16, m, k}, TensorView{wd.data(), DType::bf16, n, k},
                           MutableTensorView{cd.data(), DType::bf16, m, n}, ws, nullptr, o))
        << "M=" << m;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = download16(cd.data(), size_t(max_m * n));
    EXPECT_LE(relative_error(DType::bf16, got, ref, m * n), 1e-2) << "M=" << m;
    if (m < max_m) EXPECT_EQ(got[size_t(m * n)], 0xffff) << "M=" << m << ": wrote past M";
  }
  LinearWorkspace no_lt({max_m, n, k, false});
  for (int64_t m : {17, 32}) {
    ASSERT_EQ(cudaMemset(cd.data(), 0xff, cd.size()), cudaSuccess);
    LinearOptions o;
    o.residual = TensorView{rd.data(), DType::bf16, m, n};
    ASSERT_NO_THROW(linear(TensorView{ad.data(), DType::bf16, m, k}, TensorView{wd.data(), DType::bf16, n, k},
                           MutableTensorView{cd.data(), DType::bf16, m, n}, no_lt, nullptr, o))
        << "M=" << m << " without cuBLASLt scratch";
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = download16(cd.data(), size_t(max_m * n));
    EXPECT_LE(relative_error(DType::bf16, got, ref, m * n), 1e-2) << "M=" << m << " without cuBLASLt scratch";
    EXPECT_EQ(got[size_t(m * n)], 0xffff) << "M=" << m << ": wrote past M";
  }
  test::expect_error([&] {
    linear(TensorView{ad.data(), DType::bf16, 64, k}, TensorView{wd.data(), DType::bf16, n, k},
           MutableTensorView{cd.data(), DType::bf16, 64, n}, no_lt, nullptr);
  }, "dequant_path");
}

TEST(GpuSkinny, BadInputIsAClearError) {
  KBIT_SKIP_WITHOUT_GPU();
  Buffer buf = Buffer::allocate(Memory::device, 1 << 20);
  using test::expect_error;
  const TensorView a{buf.data(), DType::bf16, 4, 64}, w{buf.data(), DType::bf16, 32, 64};
  const MutableTensorView c{buf.data(), DType::bf16, 4, 32};
  expect_error([&] { skinny_gemm(TensorView{buf.data(), DType::bf16, 4, 60}, TensorView{buf.data(), DType::bf16, 32, 60},
                                 c, nullptr); }, "multiple of 8");
  expect_error([&] { skinny_gemm(a, TensorView{buf.data(), DType::f16, 32, 64}, c, nullptr); }, "one dtype");
  expect_error([&] { skinny_gemm(TensorView{buf.data(), DType::bf16, 33, 64}, w,
                                 MutableTensorView{buf.data(), DType::bf16, 33, 32}, nullptr); }, "1..32");
  expect_error([&] { skinny_gemm(a, TensorView{static_cast<char*>(buf.data()) + 2, DType::bf16, 32, 64}, c, nullptr); },
               "16-byte aligned");
  expect_error([&] { skinny_gemm(a, w, MutableTensorView{buf.data(), DType::bf16, 4, 31}, nullptr); }, "expected [4, 32]");
  SkinnyOptions o;
  o.splits = 3;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "cluster size");
  o = {};
  o.loader = SkinnyLoader::tma, o.stages = 9;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "stages must be 2..8");
  o.loader = SkinnyLoader::async;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "must be 2..8");
  o = {};
  o.loader = SkinnyLoader::tma, o.kslice = 64;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "kslice");
  o = {};
  o.loader = SkinnyLoader::registers, o.stripes = 2;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "stripes must be 1");
  o.stripes = 1, o.kslice = 256;
  expect_error([&] { skinny_gemm(a, w, c, nullptr, o); }, "must be 64 or 128");
}

}  // namespace
}  // namespace kbit
