// Helpers shared by the test suites: random matrices, temp folders, GPU skips.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kbit/cuda.h"
#include "kbit/dtype.h"
#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "kbit/tensor.h"

namespace kbit::test {

// Host matrix of `dtype` with Gaussian values (sigma) and optional outliers.
struct HostMatrix {
  std::vector<uint8_t> bytes;
  DType dtype;
  int64_t rows, cols, stride;
  TensorView view() const { return {bytes.data(), dtype, rows, cols, stride}; }
  MutableTensorView mutable_view() { return {bytes.data(), dtype, rows, cols, stride}; }
  float at(int64_t r, int64_t c) const {
    const int64_t i = r * stride + c;
    if (dtype == DType::f32) return reinterpret_cast<const float*>(bytes.data())[i];
    const uint16_t h = reinterpret_cast<const uint16_t*>(bytes.data())[i];
    return dtype == DType::f16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
  }
  void set(int64_t r, int64_t c, float v) {
    const int64_t i = r * stride + c;
    if (dtype == DType::f32) reinterpret_cast<float*>(bytes.data())[i] = v;
    else reinterpret_cast<uint16_t*>(bytes.data())[i] = dtype == DType::f16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
  }
};

inline HostMatrix random_matrix(int64_t rows, int64_t cols, DType dtype, uint64_t seed, float sigma = 1.0f,
                                double outlier_rate = 0.0, int64_t stride = 0) {
  HostMatrix m{{}, dtype, rows, cols, stride ? stride : cols};
  m.bytes.assign(size_t(rows * m.stride) * dtype_size(dtype), 0);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float v = normal(rng);
      if (outlier_rate > 0 && u(rng) < outlier_rate) v *= 20.0f;
      m.set(r, c, v);
    }
  return m;
}

inline std::filesystem::path temp_dir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  auto p = std::filesystem::temp_directory_path() /
           ("kbit-test-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" + name);
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// A checkpoint tensor for write_checkpoint: name, shape and a float dtype.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::bf16;
};

// A safetensors file of Gaussian tensors (one seed per tensor, counting up from `seed`).
inline void write_checkpoint(const std::filesystem::path& p, const std::vector<TensorSpec>& specs, uint64_t seed = 1) {
  io::SafetensorsWriter w(p.string());
  for (const auto& s : specs) w.declare(s.name, s.dtype, s.shape);
  w.begin();
  for (const auto& s : specs) {
    const int64_t cols = s.shape.empty() ? 1 : s.shape.back();
    int64_t rows = 1;
    for (size_t d = 0; d + 1 < s.shape.size(); ++d) rows *= s.shape[d];
    const auto m = random_matrix(rows, cols, s.dtype, seed++);
    w.write(std::as_bytes(std::span(m.bytes)));
  }
  w.finish();
}

// Runs f and expects a kbit::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error, expected '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace kbit::test

#define KBIT_SKIP_WITHOUT_GPU()                                                           \
  do {                                                                                    \
    if (!::kbit::cuda::device_available()) GTEST_SKIP() << "no CUDA device: " << ::kbit::cuda::device_description(); \
  } while (0)
