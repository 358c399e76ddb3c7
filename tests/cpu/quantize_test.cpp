// CPU reference quantize / dequantize / repack.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kbit/cpu.h"
#include "kbit/error.h"
#include "support/test_support.h"

namespace kbit {
namespace {

using test::random_matrix;

std::vector<float> dequantize_f32(const QuantizedMatrix& q) {
  std::vector<float> out(static_cast<size_t>(q.rows() * q.cols()));
  cpu::dequantize(q, MutableTensorView{out.data(), DType::f32, q.rows(), q.cols()});
  return out;
}

TEST(CpuQuantize, ElementErrorWithinTheSpecBound) {
  for (int k = 2; k <= 5; ++k)
    for (const auto& cb : {Codebook::bnf(k), Codebook::nf(k)}) {
      const auto m = random_matrix(37, 101, DType::f32, uint64_t(k), 0.5f, 0.01);
      const QuantizedMatrix q = cpu::quantize(m.view(), cb);
      const auto w_hat = dequantize_f32(q);
      std::vector<float> sorted(cb.values().begin(), cb.values().end());
      std::sort(sorted.begin(), sorted.end());
      double half_gap = 0;
      for (size_t i = 1; i < sorted.size(); ++i) half_gap = std::max(half_gap, (sorted[i] - sorted[i - 1]) / 2.0);
      const float s = q.tensor_scale();
      for (int64_t r = 0; r < m.rows; ++r)
        for (int64_t c = 0; c < m.cols; ++c) {
          const uint8_t code = q.scales()[q.geometry().slot(Layout::flat, r, c / 32)];
          const double x = m.at(r, c), got = w_hat[size_t(r * m.cols + c)];
          const double a = decoded_block_amax(s, code);
          if (a == 0) {
            ASSERT_EQ(got, 0.0);
            ASSERT_LE(std::fabs(x), std::ldexp(double(s), -15));
            continue;
          }
          const double u = x / a;
          const double beyond = std::max({0.0, u - sorted.back(), sorted.front() - u});
          ASSERT_LE(std::fabs(x - got), std::max(half_gap, beyond) * a * (1 + 1e-6) + 1e-30)
              << "k=" << k << " " << cb.name() << " at " << r << "," << c;
        }
    }
}

// Spec: MSE per element on N(0,1) data (262144 samples).
TEST(CpuQuantize, GaussianMseMatchesTheSpecTable) {
  const double bnf[] = {0.1126, 0.0282, 0.00666, 0.00161};
  const double nf[] = {0.1800, 0.0314, 0.00759, 0.00237};
  const auto m = random_matrix(512, 512, DType::f32, 2024);
  for (int k = 2; k <= 5; ++k)
    for (bool is_nf : {false, true}) {
      const Codebook cb = is_nf ? Codebook::nf(k) : Codebook::bnf(k);
      const auto w_hat = dequantize_f32(cpu::quantize(m.view(), cb));
      double se = 0;
      for (int64_t i = 0; i < 512 * 512; ++i) {
        const double d = m.at(i / 512, i % 512) - w_hat[size_t(i)];
        se += d * d;
      }
      const double mse = se / (512.0 * 512.0), expected = (is_nf ? nf : bnf)[k - 2];
      EXPECT_NEAR(mse / expected, 1.0, 0.05) << cb.name() << " k=" << k << " mse " << mse;
    }
}

TEST(CpuQuantize, SameBytesForAnyThreadCountAndInputDtype) {
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const auto matrix = random_matrix(300, 257, dt, 11);
    const auto* m = &matrix;
    cpu::set_num_threads(1);
    const QuantizedMatrix a = cpu::quantize(m->view(), Codebook::bnf(3));
    cpu::set_num_threads(7);
    const QuantizedMatrix b = cpu::quantize(m->view(), Codebook::bnf(3));
    cpu::set_num_threads(0);
    ASSERT_EQ(a.tensor_scale(), b.tensor_scale());
    ASSERT_EQ(0, std::memcmp(a.words(), b.words(), size_t(a.word_count()) * 4));
    ASSERT_EQ(0, std::memcmp(a.scales(), b.scales(), size_t(a.scale_count())));
  }
}

TEST(CpuQuantize, StridedViewEqualsContiguous) {
  const auto strided = random_matrix(20, 70, DType::bf16, 3, 1.0f, 0, 96);
  test::HostMatrix packed{{}, DType::bf16, 20, 70, 70};
  packed.bytes.resize(20 * 70 * 2);
  for (int64_t r = 0; r < 20; ++r)
    for (int64_t c = 0; c < 70; ++c) packed.set(r, c, strided.at(r, c));
  const QuantizedMatrix a = cpu::quantize(strided.view(), Codebook::bnf(4));
  const QuantizedMatrix b = cpu::quantize(packed.view(), Codebook::bnf(4));
  EXPECT_EQ(0, std::memcmp(a.words(), b.words(), size_t(a.word_count()) * 4));
}

TEST(CpuQuantize, PaddingGetsTheLevelNearestZero) {
  const auto m = random_matrix(4, 33, DType::f32, 8);
  for (int k = 2; k <= 5; ++k) {
    const Codebook cb = Codebook::nf(k);
    const QuantizedMatrix q = cpu::quantize(m.view(), cb);
    const uint32_t zero_idx = nearest_level_scan(cb.values().data(), cb.levels(), 0.0f);
    for (int64_t r = 0; r < 4; ++r) {
      uint8_t idx[32];
      unpack_block(q.words() + q.geometry().slot(Layout::flat, r, 1) * k, k, idx);
      for (int j = 1; j < 32; ++j) ASSERT_EQ(idx[j], zero_idx);
    }
  }
}

TEST(CpuQuantize, ZeroMatrixAndZeroBlocks) {
  test::HostMatrix z{std::vector<uint8_t>(8 * 64 * 4, 0), DType::f32, 8, 64, 64};
  const QuantizedMatrix q = cpu::quantize(z.view(), Codebook::bnf(4));
  EXPECT_EQ(q.tensor_scale(), 1.0f);
  for (int64_t i = 0; i < q.scale_count(); ++i) EXPECT_EQ(q.scales()[i], 0);
  for (float v : dequantize_f32(q)) EXPECT_EQ(v, 0.0f);

  auto m = random_matrix(2, 96, DType::f32, 4);
  for (int c = 32; c < 64; ++c) m.set(1, c, 0.0f);
  const QuantizedMatrix q2 = cpu::quantize(m.view(), Codebook::bnf(4));
  EXPECT_EQ(q2.scales()[q2.geometry().slot(Layout::flat, 1, 1)], 0);
  const auto w = dequantize_f32(q2);
  for (int c = 32; c < 64; ++c) EXPECT_EQ(w[size_t(96 + c)], 0.0f);
}

TEST(CpuQuantize, RejectsBadInput) {
  auto m = random_matrix(3, 40, DType::f32, 1);
  m.set(2, 17, NAN);
  try {
    cpu::quantize(m.view(), Codebook::bnf(4));
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 2, column 17"), std::string::npos) << e.what();
  }
  m.set(2, 17, INFINITY);
  EXPECT_THROW(cpu::quantize(m.view(), Codebook::bnf(4)), Error);
  std::vector<int32_t> ints(100);
  EXPECT_THROW(cpu::quantize(TensorView{ints.data(), DType::i32, 10, 10}, Codebook::bnf(4)), Error);
  EXPECT_THROW(cpu::quantize(TensorView{ints.data(), DType::f32, 0, 10}, Codebook::bnf(4)), Error);
  EXPECT_THROW(cpu::quantize(TensorView{nullptr, DType::f32, 10, 10}, Codebook::bnf(4)), Error);
  EXPECT_THROW(cpu::quantize(TensorView{ints.data(), DType::f32, 10, 10, 5}, Codebook::bnf(4)), Error);
  const auto ok = random_matrix(3, 40, DType::f32, 1);
  const QuantizedMatrix q = cpu::quantize(ok.view(), Codebook::bnf(4));
  std::vector<float> out(3 * 41);
  EXPECT_THROW(cpu::dequantize(q, MutableTensorView{out.data(), DType::f32, 3, 41}), Error);
  EXPECT_THROW(cpu::dequantize(q, MutableTensorView{out.data(), DType::i32, 3, 40}), Error);
}

TEST(CpuDequantize, HalfAndBf16AreOneRoundingOfFloat) {
  const auto m = random_matrix(17, 77, DType::bf16, 21);
  const QuantizedMatrix q = cpu::quantize(m.view(), Codebook::bnf(5));
  const auto f = dequantize_f32(q);
  std::vector<uint16_t> h(f.size()), b(f.size());
  cpu::dequantize(q, MutableTensorView{h.data(), DType::f16, 17, 77});
  cpu::dequantize(q, MutableTensorView{b.data(), DType::bf16, 17, 77});
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_EQ(h[i], float_to_half_bits(f[i]));
    ASSERT_EQ(b[i], float_to_bf16_bits(f[i]));
  }
}

TEST(CpuRepack, TiledRoundTripsBitExactly) {
  for (int64_t cols : {1, 32, 33, 64, 65, 100, 256})
    for (int k = 2; k <= 5; ++k) {
      const auto m = random_matrix(9, cols, DType::f32, uint64_t(cols * 10 + k));
      const QuantizedMatrix flat = cpu::quantize(m.view(), Codebook::bnf(k));
      const QuantizedMatrix tiled = cpu::repack(flat, Layout::tiled_k64);
      EXPECT_EQ(tiled.word_count(), flat.geometry().packed_words(Layout::tiled_k64));
      const QuantizedMatrix back = cpu::repack(tiled, Layout::flat);
      ASSERT_EQ(0, std::memcmp(back.words(), flat.words(), size_t(flat.word_count()) * 4));
      ASSERT_EQ(0, std::memcmp(back.scales(), flat.scales(), size_t(flat.scale_count())));
      EXPECT_EQ(dequantize_f32(tiled), dequantize_f32(flat));
      const QuantizedMatrix direct = cpu::quantize(m.view(), Codebook::bnf(k), Layout::tiled_k64);
      ASSERT_EQ(0, std::memcmp(direct.words(), tiled.words(), size_t(tiled.word_count()) * 4));
    }
}

TEST(CpuQuantize, QuantizationErrorReport) {
  const auto m = random_matrix(64, 128, DType::f32, 5);
  const QuantizedMatrix q = cpu::quantize(m.view(), Codebook::bnf(4));
  const cpu::ErrorStats e = cpu::quantization_error(m.view(), q);
  EXPECT_EQ(e.count, 64 * 128);
  EXPECT_GT(e.sqnr_db(), 18.0);  // ~ -10 log10(0.00666 * 3) for absmax-normalised Gaussian
  EXPECT_LT(e.sqnr_db(), 24.0);
}

}  // namespace
}  // namespace kbit
