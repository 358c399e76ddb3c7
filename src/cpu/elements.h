// Reading and writing f32/f16/bf16 elements on the host.
#pragma once

#include <cstdint>

#include "kbit/dtype.h"

namespace kbit::cpu::detail {

// Row `r` of a view as floats into out[0..cols), zero-filled up to `padded`.
inline void load_row(const void* base, DType t, int64_t stride, int64_t r, int64_t cols, int64_t padded, float* out) {
  switch (t) {
    case DType::f32: {
      const float* p = static_cast<const float*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) out[c] = p[c];
      break;
    }
    case DType::f16: {
      const uint16_t* p = static_cast<const uint16_t*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) out[c] = half_bits_to_float(p[c]);
      break;
    }
    default: {
      const uint16_t* p = static_cast<const uint16_t*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) out[c] = bf16_bits_to_float(p[c]);
      break;
    }
  }
  for (int64_t c = cols; c < padded; ++c) out[c] = 0.0f;
}

inline void store_row(void* base, DType t, int64_t stride, int64_t r, int64_t cols, const float* in) {
  switch (t) {
    case DType::f32: {
      float* p = static_cast<float*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) p[c] = in[c];
      break;
    }
    case DType::f16: {
      uint16_t* p = static_cast<uint16_t*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) p[c] = float_to_half_bits(in[c]);
      break;
    }
    default: {
      uint16_t* p = static_cast<uint16_t*>(base) + r * stride;
      for (int64_t c = 0; c < cols; ++c) p[c] = float_to_bf16_bits(in[c]);
      break;
    }
  }
}

}  // namespace kbit::cpu::detail
