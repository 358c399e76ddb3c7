// KBIT_HD marks small inline functions shared by the CPU reference and the CUDA
// kernels, so both sides compute the format with literally the same code.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KBIT_HD __host__ __device__ __forceinline__
#else
#define KBIT_HD inline
#endif

namespace kbit::detail {

KBIT_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KBIT_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// IEEE round-to-nearest operations. On the device these are spelled out so that
// nvcc never contracts them into an FMA: the CPU and GPU must agree bit for bit.
KBIT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KBIT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
KBIT_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

}  // namespace kbit::detail
