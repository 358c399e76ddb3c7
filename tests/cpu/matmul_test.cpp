#include <gtest/gtest.h>

#include <cmath>

#include "kbit/cpu.h"
#include "kbit/error.h"
#include "support/test_support.h"

namespace kbit {
namespace {

TEST(CpuMatmul, MatchesDequantizeThenFp64Product) {
  const auto w = test::random_matrix(45, 130, DType::bf16, 1);
  const auto x = test::random_matrix(5, 130, DType::f16, 2);
  const QuantizedMatrix q = cpu::repack(cpu::quantize(w.view(), Codebook::bnf(4)), Layout::tiled_k64);
  std::vector<float> wd(45 * 130);
  cpu::dequantize(q, MutableTensorView{wd.data(), DType::f32, 45, 130});
  std::vector<float> y(5 * 45);
  cpu::matmul(x.view(), q, MutableTensorView{y.data(), DType::f32, 5, 45});
  const auto y64 = cpu::matmul_fp64(x.view(), q);
  double err = 0, ref = 0;
  for (int m = 0; m < 5; ++m)
    for (int n = 0; n < 45; ++n) {
      double exact = 0;
      for (int c = 0; c < 130; ++c) exact += double(x.at(m, c)) * double(wd[size_t(n * 130 + c)]);
      EXPECT_NEAR(y64[size_t(m * 45 + n)], exact, 1e-9 * (1 + std::fabs(exact)));
      err += std::pow(y[size_t(m * 45 + n)] - exact, 2);
      ref += exact * exact;
    }
  EXPECT_LT(std::sqrt(err / ref), 1e-6);
}

TEST(CpuMatmul, RejectsMismatchedShapes) {
  const auto w = test::random_matrix(8, 64, DType::f32, 1);
  const auto x = test::random_matrix(2, 63, DType::f32, 2);
  const QuantizedMatrix q = cpu::quantize(w.view(), Codebook::bnf(2));
  std::vector<float> y(16);
  EXPECT_THROW(cpu::matmul(x.view(), q, MutableTensorView{y.data(), DType::f32, 2, 8}), Error);
}

}  // namespace
}  // namespace kbit
