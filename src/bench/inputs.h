// Inputs every kbit benchmark shares: reproducible bf16 data from a hash (never all
// zero, independent of the thread count) and uploads to the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit::bench {

// n values uniform in [-scale, scale), from a hash of (index, seed).
std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale);
Buffer upload(const void* p, size_t bytes);
inline Buffer upload(const std::vector<uint16_t>& v) { return upload(v.data(), v.size() * 2); }
Buffer copy_of(const Buffer& src);  // device to device

// E experts of N x K in bf16 on the device ([e * n, k]), every expert the same random
// values (copied on the device), which costs the kernels the same as distinct ones.
Buffer stacked_bf16(int64_t e, int64_t n, int64_t k, uint32_t seed);
// That stack quantized at `bits` (BNF codebook) in the mma16 layout the GEMVs and
// kbit::expert_linear read.
QuantizedMatrix quantize_stack(const Buffer& wd, int64_t e, int64_t n, int64_t k, int bits);

}  // namespace kbit::bench
