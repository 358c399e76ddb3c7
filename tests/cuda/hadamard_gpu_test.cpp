// GPU Hadamard rotation against the CPU reference: all dtypes, block and row
// modes (12, 20, 28 x 2^m too), signs, inverse, in place and out of place,
// poisoned outputs, bad input. Labelled gpu; skips without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/hadamard.h"
#include "support/test_support.h"

namespace kbit {
namespace {

Buffer to_device(const test::HostMatrix& m) {
  Buffer b = Buffer::allocate(Memory::device, m.bytes.size());
  cudaMemcpy(b.data(), m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice);
  return b;
}

void expect_close(const test::HostMatrix& want, const std::vector<uint8_t>& got_bytes, const std::string& what) {
  test::HostMatrix got = want;
  got.bytes = got_bytes;
  const double tol = want.dtype == DType::f32 ? 1e-6 : (want.dtype == DType::f16 ? 1e-3 : 8e-3);
  for (int64_t r = 0; r < want.rows; ++r)
    for (int64_t c = 0; c < want.cols; ++c) {
      const double a = want.at(r, c), b = got.at(r, c);
      ASSERT_TRUE(std::isfinite(b)) << what << " unwritten at " << r << "," << c;
      ASSERT_NEAR(b, a, tol * (1 + std::fabs(a))) << what << " at " << r << "," << c;
    }
}

// One rotation of `rows` random rows against the CPU reference, every dtype, without
// signs, with signs from the launch and with signs in device memory, forward and
// inverse, in place and out of place (poisoned output).
void check_rotation(const std::string& spec, int64_t rows, int64_t cols, uint64_t& seed, const std::string& tag) {
  enum class Signs { none, launch, device };
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Signs signs : {Signs::none, Signs::launch, Signs::device})
      for (bool inverse : {false, true})
        for (bool in_place : {false, true}) {
          const auto m = test::random_matrix(rows, cols, dt, seed++);
          const Rotation r =
              Rotation::parse(spec, cols, signs != Signs::none ? std::optional<uint64_t>(seed) : std::nullopt);
          auto want = m;
          hadamard_rotate(want.mutable_view(), r, inverse);
          Buffer in = to_device(m);
          Buffer out = in_place ? Buffer() : Buffer::allocate(Memory::device, m.bytes.size());
          if (!in_place) cudaMemset(out.data(), 0xff, m.bytes.size());  // NaN poison
          Buffer device_signs;
          if (signs == Signs::device) {
            device_signs = Buffer::allocate(Memory::device, r.signs.size() * sizeof(uint32_t));
            cudaMemcpy(device_signs.data(), r.signs.data(), device_signs.size(), cudaMemcpyHostToDevice);
          }
          void* dst = in_place ? in.data() : out.data();
          cuda::hadamard_rotate(TensorView{in.data(), dt, rows, cols}, MutableTensorView{dst, dt, rows, cols}, r,
                                inverse, nullptr, static_cast<const uint32_t*>(device_signs.data()));
          std::vector<uint8_t> got(m.bytes.size());
          ASSERT_EQ(cudaMemcpy(got.data(), dst, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
          const char* signs_name = signs == Signs::none ? "" : (signs == Signs::launch ? " signs" : " device signs");
          expect_close(want, got,
                       detail::concat(tag, spec, " rows=", rows, " cols=", cols, " ", dtype_name(dt), signs_name,
                                      inverse ? " inverse" : "", in_place ? " in place" : ""));
        }
}

TEST(GpuHadamard, MatchesCpuForAllModesAndDtypes) {
  KBIT_SKIP_WITHOUT_GPU();
  struct Case {
    std::string spec;
    int64_t cols;
  };
  const Case cases[] = {{"block:32", 96},  {"block:64", 256},  {"block:128", 3584}, {"block:256", 7168},
                        {"row", 96},       {"row", 896},       {"row", 3584},       {"row", 7168},
                        {"row", 1024},     {"row", 32768},     {"row", 20 * 64},    {"row", 28 * 2048},
                        // every step-1 width of the CTA kernel: q < 8, 8..256, 512, 1024, 2048, 4096
                        {"row", 12},       {"row", 24},        {"row", 28 * 4},     {"row", 20 * 512},
                        {"row", 28 * 1024}, {"row", 12 * 2048}, {"row", 12 * 4096}, {"row", 2048},
                        {"row", 8192},     {"row", 16384},     {"row", 16},         {"row", 4096}};
  uint64_t seed = 1;
  for (const Case& c : cases) check_rotation(c.spec, c.cols > 8192 ? 3 : 17, c.cols, seed, "");
}

// Decode-sized p * q rows (q = 32..256): 1, 3 and 16 rows on the one-CTA-per-row kernel;
// 100 rows go to the CTA kernel.
TEST(GpuHadamard, DecodeRowsMatchCpu) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 1000;
  for (int64_t cols : {12 * 32, 20 * 64, 28 * 128, 12 * 256, 20 * 256, 28 * 256})
    for (int64_t rows : {1, 3, 16}) check_rotation("row", rows, cols, seed, "");
  check_rotation("row", 100, 28 * 256, seed, "many rows: ");
}

// More 16-bit power-of-two rows than the GPU holds CTAs at once: the persistent kernel
// that stages the next row while it transforms this one (some CTAs take one row more
// than others; f32 and in place take the one-row-per-CTA kernel).
TEST(GpuHadamard, ManyPowerOfTwoRowsMatchCpu) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 2000;
  check_rotation("row", 300, 16384, seed, "streamed rows: ");
  check_rotation("row", 5000, 2048, seed, "streamed rows: ");
}

TEST(GpuHadamard, RejectsBadInput) {
  KBIT_SKIP_WITHOUT_GPU();
  const auto m = test::random_matrix(2, 28 * 4096, DType::f32, 1);
  Buffer in = to_device(m);
  const TensorView v{in.data(), DType::f32, 2, 28 * 4096};
  const MutableTensorView o{in.data(), DType::f32, 2, 28 * 4096};
  EXPECT_THROW(cuda::hadamard_rotate(v, o, Rotation::parse("row", 28 * 4096, std::nullopt), false, nullptr), Error);
  const Rotation r = Rotation::parse("block:64", 28 * 4096, std::nullopt);
  EXPECT_THROW(cuda::hadamard_rotate(m.view(), o, r, false, nullptr), Error);  // host input
  EXPECT_THROW(cuda::hadamard_rotate(v, MutableTensorView{in.data(), DType::f16, 2, 28 * 4096}, r, false, nullptr),
               Error);
  EXPECT_THROW(cuda::hadamard_rotate(v, MutableTensorView{in.data(), DType::f32, 1, 28 * 4096}, r, false, nullptr),
               Error);
  // device_signs: for a rotation without signs, on the host, misaligned.
  const TensorView row{in.data(), DType::f32, 2, 7168};
  const MutableTensorView row_out{in.data(), DType::f32, 2, 7168};
  const Rotation signed_row = Rotation::parse("row", 7168, 5);
  Buffer signs = Buffer::allocate(Memory::device, signed_row.signs.size() * 4 + 4);
  const auto* device_words = static_cast<const uint32_t*>(signs.data());
  EXPECT_THROW(cuda::hadamard_rotate(row, row_out, Rotation::parse("row", 7168, std::nullopt), false, nullptr,
                                     device_words),
               Error);
  EXPECT_THROW(cuda::hadamard_rotate(row, row_out, signed_row, false, nullptr, signed_row.signs.data()), Error);
  EXPECT_THROW(cuda::hadamard_rotate(row, row_out, signed_row, false, nullptr,
                                     reinterpret_cast<const uint32_t*>(static_cast<const char*>(signs.data()) + 2)),
               Error);
  EXPECT_NO_THROW(cuda::hadamard_rotate(row, row_out, signed_row, false, nullptr, device_words));
}

}  // namespace
}  // namespace kbit
