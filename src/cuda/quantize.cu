// GPU quantize: W[N, K] (f32/f16/bf16, device) -> flat kbit words + E4M4 scales.
//
// Two launches. absmax_kernel reduces max|w| (atomicMax on float bits, exact)
// into DeviceMeta; quantize_kernel derives the tensor scale from it and writes
// the bytes, using the same format functions as the CPU reference (identical
// rounding and tie-breaking, so the bytes match exactly). The index of each
// element comes from the codebook's tables (QuantizeRule in format.h) in shared
// memory: a 128-entry bucket of u plus one exact compare with the block code's
// y-threshold (built-in codebooks), else a binary search, else the definition.
// Bit planes are gathered with one multiply per 4 indices.
// Launch shape: absmax_kernel streams the input (four 16-byte loads in flight
// per thread); quantize_kernel runs one thread per 32-element block (four
// 16-byte loads for 16-bit input), so the block's absmax, E4M4 code and bit
// planes need no cross-lane traffic; consecutive threads write consecutive
// blocks' words. Both: 256 threads per CTA, up to 8 CTAs per SM, grid-stride.
// Measured (H200, 2026-11-29, 693ba55, 16384 x 16384, k=4): bf16 input 392 us =
// 1.74 TB/s counted (39% of 4.40), f32 input 625 us = 1.95 TB/s; BENCHMARKS.md.
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "common.cuh"
#include "kbit/cuda.h"

namespace kbit::cuda {
namespace {

using detail::Raw8;

constexpr int kThreads = 256;
constexpr int kSegmentBlocks = 8;  // blocks per warp segment
constexpr int kSegmentCols = kSegmentBlocks * kBlockSize;

struct Segments {
  int64_t per_row, total;
  __host__ __device__ Segments(const Geometry& g)
      : per_row((g.blocks_per_row() + kSegmentBlocks - 1) / kSegmentBlocks), total(g.rows * per_row) {}
};

template <typename T>
__global__ void __launch_bounds__(kThreads) absmax_kernel(const T* __restrict__ w, int64_t stride, Geometry g, bool vec,
                                                          DeviceMeta* meta) {
  const int lane = threadIdx.x & 31;
  uint32_t m = 0;
  auto fold = [&](const float (&v)[8]) {
#pragma unroll
    for (int i = 0; i < 8; ++i) m = max(m, __float_as_uint(v[i]) & 0x7fffffffu);
  };
  if (vec && stride == g.cols) {
    // Contiguous: one flat array of 8-element chunks, four independent loads in flight per thread.
    const int64_t n = g.rows * g.cols, chunks = n / 8;
    const int64_t threads = int64_t(gridDim.x) * kThreads;
    int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    for (; i + 3 * threads < chunks; i += 4 * threads) {
      Raw8<T> r[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) detail::load_raw8(w, (i + u * threads) * 8, n, true, r[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        float v[8];
        detail::unpack_raw8(r[u], v);
        fold(v);
      }
    }
    for (; i < chunks; i += threads) {
      float v[8];
      detail::load8(w, i * 8, n, true, v);
      fold(v);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0 && chunks * 8 < n) {  // the last n % 8 elements
      float v[8];
      detail::load8(w, chunks * 8, n, false, v);
      fold(v);
    }
  } else {
    const Segments seg(g);
    const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
    for (int64_t s = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5; s < seg.total; s += warps) {
      const int64_t r = s / seg.per_row, c0 = (s - r * seg.per_row) * kSegmentCols + lane * 8;
      float v[8];
      detail::load8(w + r * stride, c0, g.cols, vec, v);
      fold(v);
    }
  }
  m = __reduce_max_sync(0xffffffffu, m);
  if (lane == 0 && m) atomicMax(&meta->amax_bits, m);
}

// 32 consecutive elements (one block) of a row as floats; past `cols` reads 0.
template <typename T>
__device__ __forceinline__ void load_block(const T* row, int64_t c0, int64_t cols, bool vec, float (&v)[32]) {
#pragma unroll
  for (int j = 0; j < 32; j += 8) {
    float part[8];
    detail::load8(row, c0 + j, cols, vec, part);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[j + i] = part[i];
  }
}

template <typename T, int BITS>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const T* __restrict__ w, int64_t stride, Geometry g, bool vec,
                                                            QuantizeRule rule_param,
                                                            const float* __restrict__ thresholds_global,
                                                            DeviceMeta* meta, uint32_t* __restrict__ words,
                                                            uint8_t* __restrict__ scales) {
  constexpr int kLevels = 1 << BITS;
  extern __shared__ float4 thresholds4[];  // [256][kLevels] floats
  __shared__ QuantizeRule rule;
  for (int i = threadIdx.x; i < 256 * kLevels / 4; i += kThreads)
    thresholds4[i] = __ldg(reinterpret_cast<const float4*>(thresholds_global) + i);
  if (threadIdx.x == 0) rule = rule_param;
  __syncthreads();
  const float* thresholds = reinterpret_cast<const float*>(thresholds4);

  const uint32_t amax_bits = meta->amax_bits;
  const bool nonfinite = amax_bits >= 0x7f800000u;
  const float s = nonfinite ? 1.0f : tensor_scale_for_amax(__uint_as_float(amax_bits));
  const float inv_s = __fdiv_rn(1.0f, s);  // exact: a power of two
  const bool y_may_underflow = s > 1.0f;
  // Exact bucketed thresholds, sorted distinct levels, y = x/s exact: one bucket load,
  // one threshold compare per element.
  const bool hot_rule = rule.fast && rule.bucketed && rule.identity && !y_may_underflow;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    meta->tensor_scale = s;
    meta->status = nonfinite ? kStatusNonFinite : kStatusOk;
  }

  // One thread per block; (row, block) advance by a fixed step, no 64-bit division in the loop.
  const int64_t nb = g.blocks_per_row(), blocks = g.blocks();
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  const int64_t first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t step_rows = threads / nb, step_blocks = threads - step_rows * nb;
  int64_t r = first / nb, b = first - r * nb;
  for (int64_t slot = first; slot < blocks; slot += threads) {
    float v[32];
    load_block(w + r * stride, b * kBlockSize, g.cols, vec, v);
    float amax = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; ++j) amax = fmaxf(amax, fabsf(v[j]));
    const uint32_t code = block_scale_code(amax, inv_s);
    const float* row = thresholds + code * kLevels;
    float inv_dec;  // only steers the bucket choice (margin 2^-12): an approximate reciprocal is enough
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inv_dec) : "f"(e4m4_decode(code)));

    uint32_t idx4[8];  // indices as bytes, four per word: idx4[q] byte i = element 4q + i
    if (hot_rule && code != 0) {  // built-in codebooks: the whole block branch-free
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          word |= bucketed_position(rule.bucket, row, __fmul_rn(v[4 * q + i], inv_s), inv_dec) << (8 * i);
        idx4[q] = word;
      }
    } else {
      const float divisor = index_divisor(s, code);
#pragma unroll
      for (int q = 0; q < 8; ++q) {
        uint32_t word = 0;
#pragma unroll
        for (int i = 0; i < 4; ++i)
          word |= quantize_index<kLevels>(rule, row, code, v[4 * q + i], inv_s, y_may_underflow, divisor, inv_dec)
                  << (8 * i);
        idx4[q] = word;
      }
    }

    // plane t: bit t of each index byte, gathered 4 at a time into a nibble by one multiply
    uint32_t plane[BITS];
#pragma unroll
    for (int t = 0; t < BITS; ++t) {
      uint32_t p = 0;
#pragma unroll
      for (int q = 0; q < 8; ++q) p |= ((((idx4[q] >> t) & 0x01010101u) * 0x10204080u) >> 28) << (4 * q);
      plane[t] = nonfinite ? 0u : p;
    }
    uint32_t* out = words + slot * BITS;
    if constexpr (BITS == 4) {
      *reinterpret_cast<uint4*>(out) = make_uint4(plane[0], plane[1], plane[2], plane[3]);
    } else if constexpr (BITS == 2) {
      *reinterpret_cast<uint2*>(out) = make_uint2(plane[0], plane[1]);
    } else {
#pragma unroll
      for (int t = 0; t < BITS; ++t) out[t] = plane[t];
    }
    scales[slot] = nonfinite ? 0 : uint8_t(code);

    b += step_blocks;
    r += step_rows;
    if (b >= nb) b -= nb, ++r;
  }
}

// The codebook's threshold table on the current device, uploaded once and kept.
const float* device_thresholds(const Codebook& cb, cudaStream_t stream) {
  static std::mutex m;
  static std::map<std::tuple<int, int, std::vector<float>>, Buffer> cache;
  int dev = 0;
  detail::check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  const std::vector<float> key_values(cb.values().begin(), cb.values().end());
  std::lock_guard<std::mutex> lock(m);
  auto it = cache.find({dev, cb.bits(), key_values});
  if (it != cache.end()) return static_cast<const float*>(it->second.data());
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  detail::check_cuda(cudaStreamIsCapturing(stream, &capturing), "quantize");
  KBIT_REQUIRE(capturing == cudaStreamCaptureStatusNone,
               "quantize: the first GPU quantize with a codebook uploads its tables and cannot be captured into a "
               "CUDA graph; run one quantize with this codebook before capturing");
  const std::vector<float>& host = cb.quantize_tables().thresholds;
  Buffer b = Buffer::allocate(Memory::device, host.size() * sizeof(float));
  detail::check_cuda(cudaMemcpy(b.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
                     "quantize: uploading the threshold table");
  const float* p = static_cast<const float*>(b.data());
  cache.emplace(std::tuple{dev, cb.bits(), key_values}, std::move(b));
  return p;
}

}  // namespace

void quantize_into(const TensorView& w, QuantizedMatrix& out, cudaStream_t stream) {
  detail::check_device_view(w, "quantize");
  kbit::detail::check_matrix(out, "quantize", Memory::device);
  kbit::detail::check_same_shape(out, w, "quantize");
  KBIT_REQUIRE(out.layout() == Layout::flat, "quantize_into: the output must use the flat layout");
  const Geometry g = out.geometry();
  const QuantizeTables& tables = out.codebook().quantize_tables();
  const float* thresholds = device_thresholds(out.codebook(), stream);
  const bool vec = detail::aligned16(w.data, w.stride(), dtype_size(w.dtype));
  const Segments seg(g);
  const unsigned grid_absmax = detail::grid_for(seg.total * 32, kThreads);
  const unsigned grid = detail::grid_for(g.blocks(), kThreads);
  DeviceMeta* meta = out.device_meta();
  detail::check_cuda(cudaMemsetAsync(&meta->amax_bits, 0, sizeof(uint32_t), stream), "quantize: clearing absmax");
  detail::dispatch_float(w.dtype, [&]<typename T>() {
    const T* data = static_cast<const T*>(w.data);
    absmax_kernel<T><<<grid_absmax, kThreads, 0, stream>>>(data, w.stride(), g, vec, meta);
    detail::check_launch("quantize: absmax kernel");
    detail::dispatch_bits(g.bits, [&]<int BITS>() {
      const size_t smem = sizeof(float) * 256 * (1 << BITS);  // 32 KB at k = 5: under the default 48 KB
      quantize_kernel<T, BITS><<<grid, kThreads, smem, stream>>>(data, w.stride(), g, vec, tables.rule, thresholds,
                                                                 meta, out.words(), out.scales());
      detail::check_launch("quantize kernel");
    });
  });
}

QuantizedMatrix quantize(const TensorView& w, const Codebook& codebook, cudaStream_t stream, Layout layout) {
  detail::check_device_view(w, "quantize");
  QuantizedMatrix q = QuantizedMatrix::allocate(w.rows, w.cols, codebook, Layout::flat, Memory::device);
  quantize_into(w, q, stream);
  return layout == Layout::flat ? std::move(q) : repack(q, layout, stream);
}

}  // namespace kbit::cuda
