#include "bench/inputs.h"

#include <cuda_runtime_api.h>

#include "cpu/parallel.h"
#include "kbit/cuda.h"
#include "kbit/dtype.h"
#include "kbit/error.h"

namespace kbit::bench {
namespace {

float hash_uniform(uint64_t i, uint32_t seed, float scale) {
  uint64_t h = i * 0x9e3779b97f4a7c15ull ^ (uint64_t(seed) << 32 | seed);
  h ^= h >> 31, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 29, h *= 0x94d049bb133111ebull, h ^= h >> 32;
  return (float(h & 0xffffff) / 8388608.0f - 1.0f) * scale;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(detail::concat("bench: ", what, ": ", cudaGetErrorString(e)));
  }
}

}  // namespace

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed, float scale) {
  std::vector<uint16_t> v(n);
  cpu::detail::parallel_for(int64_t(n), 1 << 16, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) v[size_t(i)] = float_to_bf16_bits(hash_uniform(uint64_t(i), seed, scale));
  });
  return v;
}

Buffer upload(const void* p, size_t bytes) {
  Buffer b = Buffer::allocate(Memory::device, bytes);
  check(cudaMemcpy(b.data(), p, bytes, cudaMemcpyHostToDevice), "upload");
  return b;
}

Buffer copy_of(const Buffer& src) {
  Buffer b = Buffer::allocate(Memory::device, src.size());
  check(cudaMemcpy(b.data(), src.data(), src.size(), cudaMemcpyDeviceToDevice), "device copy");
  return b;
}

Buffer stacked_bf16(int64_t e, int64_t n, int64_t k, uint32_t seed) {
  Buffer one = upload(random_bf16(size_t(n * k), seed, 0.05f));
  if (e == 1) return one;
  Buffer wd = Buffer::allocate(Memory::device, size_t(e * n * k) * 2);
  for (int64_t i = 0; i < e; ++i)
    check(cudaMemcpy(static_cast<char*>(wd.data()) + size_t(i * n * k) * 2, one.data(), one.size(),
                     cudaMemcpyDeviceToDevice),
          "expert stack");
  return wd;
}

QuantizedMatrix quantize_stack(const Buffer& wd, int64_t e, int64_t n, int64_t k, int bits) {
  const QuantizedMatrix flat = cuda::quantize(TensorView{wd.data(), DType::bf16, e * n, k}, Codebook::bnf(bits), nullptr);
  return cuda::repack(flat, Layout::mma16, nullptr);
}

}  // namespace kbit::bench
