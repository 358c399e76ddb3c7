// GPU quantize: W[N, K] (f32/f16/bf16, device) -> flat kbit words + E4M4 scales.
//
// Two launches. absmax_kernel reduces max|w| (atomicMax on float bits, exact)
// into DeviceMeta; quantize_kernel derives the tensor scale from it and writes
// the bytes, using the same format functions as the CPU reference (identical
// rounding and tie-breaking, so the bytes match exactly).
// Launch shape: one warp per segment of 256 elements (8 blocks) of a row; lane L
// holds elements 8L..8L+7 (one 16-byte load for 16-bit input), the 4 lanes of a
// block reduce its absmax and assemble its bit planes with two xor-shuffles.
// Grid: 8 CTAs of 256 threads per SM, grid-stride over segments.
// Speed: see BENCHMARKS.md ("format kernels").
#include "common.cuh"
#include "kbit/cuda.h"

namespace kbit::cuda {
namespace {

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
  const Segments seg(g);
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  uint32_t m = 0;
  for (int64_t s = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5; s < seg.total; s += warps) {
    const int64_t r = s / seg.per_row, c0 = (s - r * seg.per_row) * kSegmentCols + lane * 8;
    float v[8];
    detail::load8(w + r * stride, c0, g.cols, vec, v);
#pragma unroll
    for (int i = 0; i < 8; ++i) m = max(m, __float_as_uint(v[i]) & 0x7fffffffu);
  }
  m = __reduce_max_sync(0xffffffffu, m);
  if (lane == 0 && m) atomicMax(&meta->amax_bits, m);
}

template <typename T, int BITS>
__global__ void __launch_bounds__(kThreads) quantize_kernel(const T* __restrict__ w, int64_t stride, Geometry g, bool vec,
                                                            NearestLevel nearest_param, DeviceMeta* meta,
                                                            uint32_t* __restrict__ words, uint8_t* __restrict__ scales) {
  __shared__ NearestLevel nearest;
  if (threadIdx.x == 0) nearest = nearest_param;
  __syncthreads();

  const uint32_t amax_bits = meta->amax_bits;
  const bool nonfinite = amax_bits >= 0x7f800000u;
  const float s = nonfinite ? 1.0f : tensor_scale_for_amax(__uint_as_float(amax_bits));
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    meta->tensor_scale = s;
    meta->status = nonfinite ? kStatusNonFinite : kStatusOk;
  }

  const int lane = threadIdx.x & 31, quad = lane & 3;
  const int64_t nb = g.blocks_per_row();
  const Segments seg(g);
  const int64_t warps = int64_t(gridDim.x) * (kThreads / 32);
  for (int64_t sg = (int64_t(blockIdx.x) * kThreads + threadIdx.x) >> 5; sg < seg.total; sg += warps) {
    const int64_t r = sg / seg.per_row, seg_in_row = sg - r * seg.per_row;
    const int64_t c0 = seg_in_row * kSegmentCols + lane * 8;
    float v[8];
    detail::load8(w + r * stride, c0, g.cols, vec, v);

    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const uint8_t code = block_scale_code(amax, s);
    const float divisor = index_divisor(s, code);

    uint32_t idx[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) idx[i] = nearest(kbit::detail::div_rn(v[i], divisor));

    uint32_t plane[BITS];
#pragma unroll
    for (int t = 0; t < BITS; ++t) {
      uint32_t byte = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) byte |= ((idx[i] >> t) & 1u) << i;
      uint32_t part = byte << (8 * quad);
      part |= __shfl_xor_sync(0xffffffffu, part, 1);
      part |= __shfl_xor_sync(0xffffffffu, part, 2);
      plane[t] = nonfinite ? 0u : part;
    }

    const int64_t b = seg_in_row * kSegmentBlocks + (lane >> 2);
    if (b < nb) {
      const int64_t slot = r * nb + b;
#pragma unroll
      for (int t = 0; t < BITS; ++t)
        if ((t & 3) == quad) words[slot * BITS + t] = plane[t];
      if (quad == 0) scales[slot] = nonfinite ? 0 : code;
    }
  }
}

}  // namespace

void quantize_into(const TensorView& w, QuantizedMatrix& out, cudaStream_t stream) {
  detail::check_device_view(w, "quantize");
  kbit::detail::check_matrix(out, "quantize", Memory::device);
  kbit::detail::check_same_shape(out, w, "quantize");
  KBIT_REQUIRE(out.layout() == Layout::flat, "quantize_into: the output must use the flat layout");
  const Geometry g = out.geometry();
  const NearestLevel nearest = out.codebook().nearest_level();
  const bool vec = detail::aligned16(w.data, w.stride(), dtype_size(w.dtype));
  const Segments seg(g);
  const unsigned grid = detail::grid_for(seg.total * 32, kThreads);
  DeviceMeta* meta = out.device_meta();
  detail::check_cuda(cudaMemsetAsync(&meta->amax_bits, 0, sizeof(uint32_t), stream), "quantize: clearing absmax");
  detail::dispatch_float(w.dtype, [&]<typename T>() {
    const T* data = static_cast<const T*>(w.data);
    absmax_kernel<T><<<grid, kThreads, 0, stream>>>(data, w.stride(), g, vec, meta);
    detail::check_launch("quantize: absmax kernel");
    detail::dispatch_bits(g.bits, [&]<int BITS>() {
      quantize_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(data, w.stride(), g, vec, nearest, meta, out.words(),
                                                              out.scales());
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
