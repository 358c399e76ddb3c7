// Inputs every kbit benchmark shares: reproducible bf16 data from a hash (never all
// zero, independent of the thread count) and uploads to the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kbit/tensor.h"

namespace kbit::bench {

// n values uniform in [-scale, scale), from a hash of (index, seed).
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale);
Buffer upload(const void* p, size_t bytes);
inline Buffer upload(const std::vector<uint16_t>& v) { return upload(v.data(), v.size() * 2); }
Buffer copy_of(const Buffer& src);  // device to device

}  // namespace kbit::bench
