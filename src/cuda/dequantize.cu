// GPU dequantize: kbit words + scales (flat or tiled_k64) -> W_hat[N, K] in
// f32/f16/bf16, w = T(cb[idx] * s * e4m4(e)) with one rounding, bit-identical to
// the CPU reference. Also the quantization-error reduction used by the tools.
//
// Launch shape: one thread per stored block slot, in storage order, so the
// k words of consecutive threads are consecutive (coalesced reads). The thread
// turns 4 indices at a time from bit planes into bytes with a multiply-spread
// (nibble * 0x00204081 & 0x01010101 puts bit i of the nibble at bit 8i) and
// looks levels up in shared memory. Its 32 outputs go to a swizzled per-warp
// staging area, from which the warp writes 16-byte chunks of 32 consecutive
// blocks together (coalesced writes). 256 threads per CTA, grid-stride.
// Measured (H200, 2026-11-29, 16384 x 16384, k=4, flat): bf16 output 187-189 us =
// 3.59-3.63 TB/s (82% of 4.40, 1.3x cudaMemcpy); f32 output 338-342 us; BENCHMARKS.md.
#include "common.cuh"
#include "kbit/cuda.h"
#include "mma16.h"

namespace kbit::cuda {
namespace {

constexpr int kThreads = 256;

// The 32 indices of one block, four per word as bytes: idx4[q] byte i = index of element 4q + i.
template <int BITS>
__device__ __forceinline__ void decode_indices(const uint32_t (&w)[BITS], uint32_t (&idx4)[8]) {
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    uint32_t acc = 0;
#pragma unroll
    for (int t = 0; t < BITS; ++t) acc |= (((w[t] >> (4 * q)) & 0xfu) * 0x00204081u & 0x01010101u) << t;
    idx4[q] = acc;
  }
}

template <int BITS>
__device__ __forceinline__ void load_words(const uint32_t* p, uint32_t (&w)[BITS]) {
  if constexpr (BITS == 4) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));  // slot * 16 bytes: always aligned
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (BITS == 2) {
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = v.x, w[1] = v.y;
  } else {
#pragma unroll
    for (int t = 0; t < BITS; ++t) w[t] = __ldg(p + t);
  }
}

// The 32 dequantized values of a block from its words and scale byte.
template <int BITS>
__device__ __forceinline__ void decode_block(const uint32_t (&w)[BITS], uint32_t code, float s, const float* cb,
                                             float (&v)[32]) {
  const float amax = decoded_block_amax(s, code);
  uint32_t idx4[8];
  decode_indices<BITS>(w, idx4);
#pragma unroll
  for (int q = 0; q < 8; ++q)
#pragma unroll
    for (int i = 0; i < 4; ++i) v[4 * q + i] = __fmul_rn(cb[(idx4[q] >> (8 * i)) & 0xffu], amax);
}

// Dequantized values of the block in `slot` into v[32]; returns false for padding slots.
template <int BITS>
__device__ __forceinline__ bool dequantize_slot(const uint32_t* __restrict__ words, const uint8_t* __restrict__ scales,
                                                const Geometry& g, Layout layout, float s, const float* cb,
                                                int64_t slot, int64_t& r, int64_t& b, float (&v)[32]) {
  g.block_of_slot(layout, slot, r, b);
  if (b >= g.blocks_per_row()) return false;
  uint32_t w[BITS];
  load_words<BITS>(words + slot * BITS, w);
  decode_block<BITS>(w, scales[slot], s, cb, v);
  return true;
}

template <typename T>
__device__ __forceinline__ void store32(T* row, int64_t c0, int64_t cols, bool vec, const float (&v)[32]) {
  if (vec && c0 + 32 <= cols) {
    constexpr int kPerVec = 16 / sizeof(T);
#pragma unroll
    for (int j = 0; j < 32; j += kPerVec) {
      T tmp[kPerVec];
#pragma unroll
      for (int i = 0; i < kPerVec; ++i) tmp[i] = detail::Element<T>::from_float(v[j + i]);
      uint4 packed;
      memcpy(&packed, tmp, 16);
      *reinterpret_cast<uint4*>(row + c0 + j) = packed;
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < 32; ++j)
    if (c0 + j < cols) row[c0 + j] = detail::Element<T>::from_float(v[j]);
}

template <typename T, int BITS>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const uint32_t* __restrict__ words,
                                                              const uint8_t* __restrict__ scales, Geometry g,
                                                              Layout layout, const DeviceMeta* meta, T* out,
                                                              int64_t stride, bool vec) {
  constexpr int kChunk = 16 / int(sizeof(T));       // elements per 16-byte chunk
  constexpr int kChunksPerBlock = 32 / kChunk;      // 4 for 16-bit output, 8 for f32
  constexpr int kBlocksPerSpan = 8 / kChunksPerBlock;  // blocks per 128-byte bank span
  constexpr int kWarps = kThreads / 32;
  __shared__ float cb[kMaxLevels];
  __shared__ uint4 stage[kWarps][32 * kChunksPerBlock];
  if (threadIdx.x < kMaxLevels) cb[threadIdx.x] = meta->codebook[threadIdx.x];
  __syncthreads();
  const float s = meta->tensor_scale;
  const int64_t slots = g.block_slots(layout);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // Swizzled chunk position within a warp's staging area: conflict-free both when
  // each lane writes its own block and when the warp reads consecutive chunks.
  auto position = [](int block, int chunk) {
    return block * kChunksPerBlock + (chunk ^ ((block / kBlocksPerSpan) & (kChunksPerBlock - 1)));
  };
  const int64_t step = int64_t(gridDim.x) * kWarps * 32;
  // The next slot's words and scale are loaded one iteration ahead (software prefetch).
  uint32_t next_w[BITS] = {};
  uint32_t next_code = 0;
  int64_t base = (int64_t(blockIdx.x) * kWarps + warp) * 32;
  if (base + lane < slots) {
    load_words<BITS>(words + (base + lane) * BITS, next_w);
    next_code = scales[base + lane];
  }
  for (; base < slots; base += step) {
    const int64_t slot = base + lane;
    uint32_t w[BITS];
#pragma unroll
    for (int t = 0; t < BITS; ++t) w[t] = next_w[t];
    const uint32_t code = next_code;
    if (slot + step < slots) {
      load_words<BITS>(words + (slot + step) * BITS, next_w);
      next_code = scales[slot + step];
    }
    int64_t r = 0, b = 0;
    if (slot < slots) g.block_of_slot(layout, slot, r, b);
    const bool valid = slot < slots && b < g.blocks_per_row();
    float v[32];
    decode_block<BITS>(w, code, s, cb, v);
    const bool full = valid && vec && b * kBlockSize + kBlockSize <= g.cols;
    if (valid && !full) store32(out + r * stride, b * kBlockSize, g.cols, false, v);  // row tail or unaligned
    if (full) {
#pragma unroll
      for (int q = 0; q < kChunksPerBlock; ++q) {
        T tmp[kChunk];
#pragma unroll
        for (int i = 0; i < kChunk; ++i) tmp[i] = detail::Element<T>::from_float(v[q * kChunk + i]);
        memcpy(&stage[warp][position(lane, q)], tmp, 16);
      }
    }
    const unsigned full_mask = __ballot_sync(0xffffffffu, full);
    __syncwarp();
    // The warp writes its staged blocks together: 512 contiguous bytes per store in the flat layout.
#pragma unroll
    for (int it = 0; it < kChunksPerBlock; ++it) {
      const int c = it * 32 + lane, j = c / kChunksPerBlock, q = c % kChunksPerBlock;
      const int64_t rj = __shfl_sync(0xffffffffu, r, j), bj = __shfl_sync(0xffffffffu, b, j);
      if ((full_mask >> j) & 1u)
        *reinterpret_cast<uint4*>(out + rj * stride + bj * kBlockSize + q * kChunk) = stage[warp][position(j, q)];
    }
    __syncwarp();
  }
}

// Per-CTA partial sums of (w - w_hat)^2 and w^2; the host adds the partials in
// order, so the total is deterministic.
template <typename T, int BITS>
__global__ void __launch_bounds__(kThreads) error_kernel(const uint32_t* __restrict__ words,
                                                         const uint8_t* __restrict__ scales, Geometry g, Layout layout,
                                                         const DeviceMeta* meta, const T* __restrict__ ref,
                                                         int64_t stride, bool vec, double2* partial) {
  __shared__ float cb[kMaxLevels];
  __shared__ double2 warp_sums[kThreads / 32];
  if (threadIdx.x < kMaxLevels) cb[threadIdx.x] = meta->codebook[threadIdx.x];
  __syncthreads();
  const float s = meta->tensor_scale;
  const int64_t slots = g.block_slots(layout);
  double err = 0, sig = 0;
  for (int64_t slot = int64_t(blockIdx.x) * kThreads + threadIdx.x; slot < slots; slot += int64_t(gridDim.x) * kThreads) {
    int64_t r, b;
    float v[32];
    if (!dequantize_slot<BITS>(words, scales, g, layout, s, cb, slot, r, b, v)) continue;
#pragma unroll
    for (int j = 0; j < 32; j += 8) {
      float x[8];
      detail::load8(ref + r * stride, b * kBlockSize + j, g.cols, vec, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (b * kBlockSize + j + i >= g.cols) continue;
        const double d = double(x[i]) - double(v[j + i]);
        err += d * d;
        sig += double(x[i]) * double(x[i]);
      }
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    err += __shfl_xor_sync(0xffffffffu, err, o);
    sig += __shfl_xor_sync(0xffffffffu, sig, o);
  }
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = make_double2(err, sig);
  __syncthreads();
  if (threadIdx.x == 0) {
    double2 t = make_double2(0, 0);
    for (int i = 0; i < kThreads / 32; ++i) t.x += warp_sums[i].x, t.y += warp_sums[i].y;
    partial[blockIdx.x] = t;
  }
}

}  // namespace

void dequantize(const QuantizedMatrix& q, const MutableTensorView& out, cudaStream_t stream) {
  kbit::detail::check_matrix(q, "dequantize", Memory::device);
  detail::check_device_view(out, "dequantize output");
  kbit::detail::check_same_shape(q, out, "dequantize");
  if (q.layout() == Layout::mma16) return detail::dequantize_mma16(q, out, stream);
  const Geometry g = q.geometry();
  const bool vec = detail::aligned16(out.data, out.stride(), dtype_size(out.dtype));
  const unsigned grid = detail::grid_for(g.block_slots(q.layout()), kThreads);
  detail::dispatch_float(out.dtype, [&]<typename T>() {
    detail::dispatch_bits(g.bits, [&]<int BITS>() {
      dequantize_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(q.words(), q.scales(), g, q.layout(), q.device_meta(),
                                                                static_cast<T*>(out.data), out.stride(), vec);
      detail::check_launch("dequantize kernel");
    });
  });
}

cpu::ErrorStats quantization_error(const TensorView& original, const QuantizedMatrix& q, cudaStream_t stream) {
  kbit::detail::check_matrix(q, "quantization_error", Memory::device);
  detail::check_device_view(original, "quantization_error original");
  kbit::detail::check_same_shape(q, original, "quantization_error");
  KBIT_REQUIRE(q.layout() != Layout::mma16, "quantization_error: repack the mma16 matrix to flat first");
  q.tensor_scale();  // surfaces a NaN/Inf status from quantize
  const Geometry g = q.geometry();
  const bool vec = detail::aligned16(original.data, original.stride(), dtype_size(original.dtype));
  const unsigned grid = detail::grid_for(g.block_slots(q.layout()), kThreads, 4);
  Buffer partial = Buffer::allocate(Memory::device, sizeof(double2) * grid);
  detail::dispatch_float(original.dtype, [&]<typename T>() {
    detail::dispatch_bits(g.bits, [&]<int BITS>() {
      error_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(q.words(), q.scales(), g, q.layout(), q.device_meta(),
                                                           static_cast<const T*>(original.data), original.stride(), vec,
                                                           static_cast<double2*>(partial.data()));
      detail::check_launch("quantization_error kernel");
    });
  });
  std::vector<double2> host(grid);
  detail::check_cuda(cudaMemcpyAsync(host.data(), partial.data(), sizeof(double2) * grid, cudaMemcpyDeviceToHost, stream),
                     "quantization_error: reading partial sums");
  detail::check_cuda(cudaStreamSynchronize(stream), "quantization_error");
  cpu::ErrorStats e;
  for (const auto& p : host) e.sum_sq_error += p.x, e.sum_sq_ref += p.y;
  e.count = g.rows * g.cols;
  return e;
}

}  // namespace kbit::cuda
