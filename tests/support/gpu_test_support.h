// Helpers of the GPU tests that check 16-bit outputs against fp64 references.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace kbit::test {

inline Buffer upload(const HostMatrix& m) {
  Buffer b = Buffer::allocate(Memory::device, m.bytes.size());
  EXPECT_EQ(cudaMemcpy(b.data(), m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return b;
}

inline std::vector<uint16_t> download16(const void* p, size_t count) {
  std::vector<uint16_t> v(count);
  EXPECT_EQ(cudaMemcpy(v.data(), p, count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

// ||got - ref||_F / ||ref||_F over the first `count` values (f16 or bf16 bits); any
// non-finite output makes it infinite.
inline double relative_error(DType t, const std::vector<uint16_t>& got, const std::vector<double>& ref, int64_t count) {
  double e = 0, r = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double y = t == DType::f16 ? half_bits_to_float(got[size_t(i)]) : bf16_bits_to_float(got[size_t(i)]);
    if (!std::isfinite(y)) return INFINITY;
    e += (y - ref[size_t(i)]) * (y - ref[size_t(i)]);
    r += ref[size_t(i)] * ref[size_t(i)];
  }
  return std::sqrt(e / std::max(r, 1e-300));
}

// The dense-issue bounds on relative Frobenius error: fp16 3e-3, bf16 1e-2.
inline double tolerance(DType t) { return t == DType::f16 ? 3e-3 : 1e-2; }

// Runs `call` twice into the NaN-poisoned 16-bit output `out` (count values): each run
// must finish, be within tolerance(t) of ref, and the second equal the first bit for bit.
template <typename Call>
void expect_accurate_and_deterministic(Call&& call, const Buffer& out, DType t, const std::vector<double>& ref,
                                       int64_t count, const std::string& what) {
  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {
    ASSERT_EQ(cudaMemset(out.data(), 0xff, size_t(count) * 2), cudaSuccess);
    ASSERT_NO_THROW(call()) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const auto got = download16(out.data(), size_t(count));
    EXPECT_LE(relative_error(t, got, ref, count), tolerance(t)) << what;
    if (run == 1) EXPECT_EQ(got, first) << what << ": differs run to run";
    first = got;
  }
}

}  // namespace kbit::test
