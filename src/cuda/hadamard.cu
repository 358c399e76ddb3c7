// GPU Hadamard rotation of rows (spec: "Hadamard rotation"): y = (1/sqrt(B)) H_B D x
// per chunk of B elements, in place or out of place, f32/f16/bf16.
//
// Layout: a chunk of B = p * q elements (q = 2^m, p in {1, 12, 20, 28}) is held in
// shared memory as fp32, element (a, b) at a * q + b. Launch: one CTA per chunk
// (rows x chunks per row), 256 threads; signs applied on load, fast Walsh-Hadamard
// over each q-run with a barrier per stage, then the order-p mix done by one
// thread per column b (p values in registers, H_p broadcast from the kernel
// parameters), scaled and stored. Shared memory 4 B per element: B <= 57344.
// NOT YET RUN ON A GPU: written after this session's device time was spent;
// tests/cuda/hadamard_gpu_test.cpp checks it against the CPU reference.
#include "common.cuh"
#include "kbit/cuda.h"
#include "kbit/hadamard.h"

namespace kbit::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxChunk = 57344;           // 224 KB of fp32 in shared memory
constexpr int kMaxSignWords = int(kMaxChunk / 32);

struct HadamardParams {
  int64_t chunk;      // B
  int64_t q;          // power-of-two factor
  int p;              // 1, 12, 20 or 28
  int has_signs;
  int inverse;
  float scale;        // 1/sqrt(B)
  int8_t h[28 * 28];  // H_p, row-major (forward) -- the kernel transposes for the inverse
  uint32_t signs[kMaxSignWords];
};

template <typename T>
__global__ void __launch_bounds__(kThreads) hadamard_kernel(const T* __restrict__ in, T* out, int64_t in_stride,
                                                            int64_t out_stride, int64_t chunks_per_row,
                                                            const __grid_constant__ HadamardParams prm) {
  extern __shared__ float buf[];
  const int64_t row = blockIdx.x / chunks_per_row, chunk = blockIdx.x - row * chunks_per_row;
  const T* src = in + row * in_stride + chunk * prm.chunk;
  T* dst = out + row * out_stride + chunk * prm.chunk;
  auto negated = [&](int64_t i) { return prm.has_signs && ((prm.signs[i >> 5] >> (i & 31)) & 1u); };

  for (int64_t i = threadIdx.x; i < prm.chunk; i += kThreads) {
    float v = detail::Element<T>::to_float(src[i]);
    if (!prm.inverse && negated(i)) v = -v;
    buf[i] = v;
  }
  __syncthreads();
  // Walsh-Hadamard along each q-run: stage h pairs (j, j + h) inside blocks of 2h
  for (int64_t h = 1; h < prm.q; h *= 2) {
    for (int64_t t = threadIdx.x; t < prm.chunk / 2; t += kThreads) {
      const int64_t run = t / (prm.q / 2), u = t - run * (prm.q / 2);
      const int64_t j = run * prm.q + (u / h) * 2 * h + (u % h);
      const float a = buf[j], b = buf[j + h];
      buf[j] = a + b;
      buf[j + h] = a - b;
    }
    __syncthreads();
  }
  if (prm.p > 1) {  // mix across the p runs: one thread per column b
    for (int64_t b = threadIdx.x; b < prm.q; b += kThreads) {
      float col[28];
#pragma unroll
      for (int c = 0; c < 28; ++c)
        if (c < prm.p) col[c] = buf[c * prm.q + b];
      for (int a = 0; a < prm.p; ++a) {
        float acc = 0.0f;
#pragma unroll
        for (int c = 0; c < 28; ++c)
          if (c < prm.p) {
            const int8_t s = prm.inverse ? prm.h[c * prm.p + a] : prm.h[a * prm.p + c];
            acc += s > 0 ? col[c] : -col[c];
          }
        buf[a * prm.q + b] = acc;  // this thread owns column b
      }
    }
    __syncthreads();
  }
  for (int64_t i = threadIdx.x; i < prm.chunk; i += kThreads) {
    float v = buf[i] * prm.scale;
    if (prm.inverse && negated(i)) v = -v;
    dst[i] = detail::Element<T>::from_float(v);
  }
}

}  // namespace

void hadamard_rotate(const TensorView& in, const MutableTensorView& out, const Rotation& r, bool inverse,
                     cudaStream_t stream) {
  detail::check_device_view(in, "hadamard_rotate input");
  detail::check_device_view(out, "hadamard_rotate output");
  KBIT_REQUIRE(in.rows == out.rows && in.cols == out.cols, "hadamard_rotate: input [", in.rows, ", ", in.cols,
               "] and output [", out.rows, ", ", out.cols, "] differ");
  KBIT_REQUIRE(in.dtype == out.dtype, "hadamard_rotate: input and output dtypes differ");
  require_supported_rotation(r, in.cols);
  KBIT_REQUIRE(r.size <= kMaxChunk, "GPU Hadamard chunks are limited to ", kMaxChunk, " elements, got ", r.size);
  HadamardParams prm{};
  prm.chunk = r.size;
  prm.p = 1;
  for (int p : {12, 20, 28})
    if (r.size % p == 0 && ((r.size / p) & (r.size / p - 1)) == 0) prm.p = p;
  prm.q = r.size / prm.p;
  prm.has_signs = r.signs.empty() ? 0 : 1;
  prm.inverse = inverse ? 1 : 0;
  prm.scale = float(1.0 / std::sqrt(double(r.size)));
  if (prm.p > 1) {
    const auto& h = hadamard_small(prm.p);
    for (size_t i = 0; i < h.size(); ++i) prm.h[i] = h[i];
  }
  for (size_t i = 0; i < r.signs.size(); ++i) prm.signs[i] = r.signs[i];
  const int64_t chunks_per_row = in.cols / r.size;
  const int64_t blocks = in.rows * chunks_per_row;
  KBIT_REQUIRE(blocks <= int64_t(0x7fffffff), "hadamard_rotate: too many chunks (", blocks, ")");
  const size_t smem = size_t(r.size) * sizeof(float);
  detail::dispatch_float(in.dtype, [&]<typename T>() {
    auto kernel = hadamard_kernel<T>;
    if (smem > 48 * 1024)
      detail::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                         "hadamard_rotate: shared memory limit");
    kernel<<<unsigned(blocks), kThreads, smem, stream>>>(static_cast<const T*>(in.data), static_cast<T*>(out.data),
                                                         in.stride(), out.stride(), chunks_per_row, prm);
    detail::check_launch("hadamard kernel");
  });
}

}  // namespace kbit::cuda
