// cpu::stack_rows: experts quantized one by one, stacked into one matrix under one tensor scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kbit/cpu.h"
#include "kbit/error.h"
#include "kbit/hadamard.h"
#include "support/test_support.h"

namespace kbit::cpu {
namespace {

std::vector<float> dequantized(const QuantizedMatrix& q) {
  std::vector<float> out(size_t(q.rows() * q.cols()));
  dequantize(q, MutableTensorView{out.data(), DType::f32, q.rows(), q.cols(), q.cols()});
  return out;
}

// Rows [row0, row0 + part rows) of the stack dequantize to exactly the part's weights.
void expect_rows_equal(const QuantizedMatrix& stack, int64_t row0, const QuantizedMatrix& part) {
  const auto s = dequantized(stack), p = dequantized(part);
  ASSERT_EQ(0, std::memcmp(s.data() + row0 * stack.cols(), p.data(), p.size() * sizeof(float)))
      << "rows " << row0 << ".. differ";
}

TEST(StackRows, EqualTensorScalesConcatenateTheBytes) {
  std::vector<QuantizedMatrix> parts;
  for (int e = 0; e < 3; ++e) {
    test::HostMatrix w = test::random_matrix(16 + 8 * e, 96, DType::bf16, e, 0.5f);
    w.set(0, 0, 3.5f);  // the same largest |w| in every part: the same tensor scale
    parts.push_back(quantize(w.view(), Codebook::bnf(4)));
  }
  ASSERT_EQ(parts[0].tensor_scale(), parts[2].tensor_scale());
  const std::vector<const QuantizedMatrix*> ptrs{&parts[0], &parts[1], &parts[2]};
  StackStats st;
  const QuantizedMatrix s = stack_rows(ptrs, &st);
  EXPECT_EQ(s.rows(), 16 + 24 + 32);
  EXPECT_EQ(s.cols(), 96);
  EXPECT_EQ(s.layout(), Layout::flat);
  EXPECT_EQ(s.tensor_scale(), parts[0].tensor_scale());
  EXPECT_EQ(st.blocks, s.scale_count());
  EXPECT_EQ(st.rescaled + st.requantized, 0);
  int64_t words = 0, scales = 0;
  for (const auto& p : parts) {  // flat rows are contiguous: the stack is the parts' bytes end to end
    EXPECT_EQ(0, std::memcmp(s.words() + words, p.words(), size_t(p.word_count()) * 4));
    EXPECT_EQ(0, std::memcmp(s.scales() + scales, p.scales(), size_t(p.scale_count())));
    words += p.word_count(), scales += p.scale_count();
  }
}

TEST(StackRows, SmallerTensorScalesKeepTheirWeightsBitForBit) {
  // Experts 8x and 1/4x the first one's size: three tensor scales. K = 70 leaves a padded block.
  for (int bits = 2; bits <= 5; ++bits) {
    const QuantizedMatrix a = quantize(test::random_matrix(20, 70, DType::f32, 1, 1.0f).view(), Codebook::bnf(bits));
    const QuantizedMatrix b = quantize(test::random_matrix(12, 70, DType::f32, 2, 8.0f).view(), Codebook::bnf(bits));
    const QuantizedMatrix c = quantize(test::random_matrix(7, 70, DType::f32, 3, 0.25f).view(), Codebook::bnf(bits));
    ASSERT_LT(a.tensor_scale(), b.tensor_scale());
    ASSERT_LT(c.tensor_scale(), a.tensor_scale());
    const std::vector<const QuantizedMatrix*> ptrs{&a, &b, &c};
    StackStats st;
    const QuantizedMatrix s = stack_rows(ptrs, &st);
    EXPECT_EQ(s.tensor_scale(), b.tensor_scale());
    EXPECT_EQ(st.requantized, 0) << "k = " << bits;  // Gaussian blocks stay in E4M4's normal range
    EXPECT_EQ(st.rescaled, a.scale_count() + c.scale_count()) << "k = " << bits;
    expect_rows_equal(s, 0, a);
    expect_rows_equal(s, 20, b);
    expect_rows_equal(s, 32, c);
  }
}

TEST(StackRows, BlocksBelowTheCommonScalesRangeAreQuantizedAgain) {
  // Part a's row 1 is 2^-12 of its row 0: under b's tensor scale, 2^7 larger, its blocks fall below E4M4's
  // smallest normal value and are quantized again; the rest of a keeps its weights exactly.
  test::HostMatrix wa = test::random_matrix(2, 64, DType::f32, 4);
  for (int c = 0; c < 64; ++c) wa.set(1, c, wa.at(1, c) * 0x1p-12f);
  const QuantizedMatrix a = quantize(wa.view(), Codebook::nf(4));
  test::HostMatrix wb = test::random_matrix(2, 64, DType::f32, 5);
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 64; ++c) wb.set(r, c, wa.at(0, c) * 128.0f);  // a's row 0, 2^7 larger
  const QuantizedMatrix b = quantize(wb.view(), Codebook::nf(4));
  ASSERT_EQ(b.tensor_scale(), a.tensor_scale() * 128.0f);
  const std::vector<const QuantizedMatrix*> ptrs{&a, &b};
  StackStats st;
  const QuantizedMatrix s = stack_rows(ptrs, &st);
  EXPECT_GE(st.requantized, 1);  // of row 1's two blocks
  EXPECT_EQ(st.rescaled + st.requantized, 4);
  const auto sv = dequantized(s), av = dequantized(a);
  EXPECT_EQ(0, std::memcmp(sv.data(), av.data(), 64 * sizeof(float)));  // row 0 exact
  // Quantized again from the dequantized row under the common scale: off by less than the format's resolution
  // there (E4M4's smallest step, 2^-14, times the tensor scale), as if it had been quantized with b from the start.
  float worst = 0;
  for (int c = 64; c < 128; ++c) worst = std::max(worst, std::fabs(sv[size_t(c)] - av[size_t(c)]));
  EXPECT_LE(worst, 0x1p-13f * s.tensor_scale());
  expect_rows_equal(s, 2, b);
}

TEST(StackRows, AllZeroPartsDoNotSetTheScaleAndOtherLayoutsAreRead) {
  std::vector<float> zeros(16 * 64, 0.0f);
  const QuantizedMatrix z = quantize(TensorView{zeros.data(), DType::f32, 16, 64, 64}, Codebook::bnf(3));
  EXPECT_EQ(z.tensor_scale(), 1.0f);
  const QuantizedMatrix a = quantize(test::random_matrix(16, 64, DType::f32, 6, 0.01f).view(), Codebook::bnf(3));
  const QuantizedMatrix a_mma16 = repack(a, Layout::mma16);
  const std::vector<const QuantizedMatrix*> ptrs{&z, &a_mma16};
  StackStats st;
  const QuantizedMatrix s = stack_rows(ptrs, &st);
  EXPECT_EQ(s.tensor_scale(), a.tensor_scale());
  EXPECT_EQ(st.rescaled + st.requantized, 0);  // zero blocks need no rescale
  expect_rows_equal(s, 0, z);
  expect_rows_equal(s, 16, a);
}

TEST(StackRows, RejectsMismatchedParts) {
  const auto m = test::random_matrix(16, 64, DType::f32, 7);
  const QuantizedMatrix a = quantize(m.view(), Codebook::bnf(4));
  const QuantizedMatrix k3 = quantize(m.view(), Codebook::bnf(3));
  const QuantizedMatrix nf = quantize(m.view(), Codebook::nf(4));
  const QuantizedMatrix wide = quantize(test::random_matrix(16, 96, DType::f32, 8).view(), Codebook::bnf(4));
  QuantizedMatrix rotated = quantize(m.view(), Codebook::bnf(4));
  rotated.set_rotation(Rotation::make(RotationMode::block, 64, 64, 3));
  auto stack = [](std::vector<const QuantizedMatrix*> v) { return stack_rows(v); };
  test::expect_error([&] { stack({}); }, "no matrices");
  test::expect_error([&] { stack({&a, nullptr}); }, "matrix 1 is null");
  test::expect_error([&] { stack({&a, &k3}); }, "matrix 1 has k = 3, matrix 0 has k = 4");
  test::expect_error([&] { stack({&a, &nf}); }, "has codebook");
  test::expect_error([&] { stack({&a, &wide}); }, "matrix 1 has K = 96, matrix 0 has K = 64");
  test::expect_error([&] { stack({&a, &rotated}); }, "has rotation");
  const std::vector<const QuantizedMatrix*> two{&a, &wide};
  const std::vector<std::string> one_name{"w.a"}, names{"w.a", "w.wide"};
  test::expect_error([&] { stack_rows(two, nullptr, one_name); }, "1 names for 2 matrices");
  test::expect_error([&] { stack_rows(two, nullptr, names); }, "'w.wide' has K = 96, 'w.a' has K = 64");
}

}  // namespace
}  // namespace kbit::cpu
