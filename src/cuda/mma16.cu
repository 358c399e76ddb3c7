// The mma16 runtime layout on the GPU (layout.h defines it): repack from and to
// the other layouts, and dequantize from it. Load-time operations.
//
// Packing: one thread per (stripe, supertile, lane) unit of 2k words: it reads
// the k plane words of the 8 block-rows its lane covers, moves the index bits of
// its 64 elements to their mma16 code positions, and writes its words and (lanes
// with c = 0) the 8 scale bytes of rows g and g+8. Unpacking: one thread per
// destination block, gathering the block's 32 indices from 4 lanes.
// Dequantize: one thread per unit, 8 runs of 8 consecutive outputs (16-byte stores).
#include "common.cuh"
#include "kbit/cuda.h"
#include "mma16.h"

namespace kbit::cuda::detail {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) pack_mma16_kernel(const uint32_t* __restrict__ src_words,
                                                              const uint8_t* __restrict__ src_scales, Layout from,
                                                              uint32_t* __restrict__ dst_words,
                                                              uint8_t* __restrict__ dst_scales, Geometry g) {
  const int64_t units = g.stripes() * g.supertiles() * 32;
  const int k = g.bits;
  for (int64_t id = int64_t(blockIdx.x) * kThreads + threadIdx.x; id < units; id += int64_t(gridDim.x) * kThreads) {
    const int lane = int(id % 32);
    const int64_t unit = id / 32, stripe = unit / g.supertiles(), st = unit % g.supertiles();
    const int gg = lane / 4, c = lane % 4;
    uint32_t out[10] = {};
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < kSupertileBlocks; ++j) {
        const int r16 = gg + 8 * half;
        const int64_t n = stripe * kStripeRows + r16, b = st * kSupertileBlocks + j;
        const bool real = n < g.rows && b < g.blocks_per_row();
        uint32_t planes[5] = {};
        uint8_t scale = 0;
        if (real) {
          const int64_t slot = g.slot(from, n, b);
          for (int t = 0; t < k; ++t) planes[t] = src_words[slot * k + t];
          scale = src_scales[slot];
        }
        for (int i = 8 * c; i < 8 * c + 8; ++i) {
          const Mma16Pair p = mma16_pair(r16, j, i);
          for (int t = 0; t < k; ++t) {
            const int pos = mma16_code_bit(k, p.q, p.e * k + t);
            out[pos / 32] |= ((planes[t] >> i) & 1u) << (pos % 32);
          }
        }
        if (c == 0) dst_scales[unit * 64 + gg * 8 + half * 4 + j] = scale;
      }
    for (int w = 0; w < 2 * k; ++w) dst_words[g.mma16_word(stripe, st, lane, w)] = out[w];
  }
}

__global__ void __launch_bounds__(kThreads) unpack_mma16_kernel(const uint32_t* __restrict__ src_words,
                                                                const uint8_t* __restrict__ src_scales,
                                                                uint32_t* __restrict__ dst_words,
                                                                uint8_t* __restrict__ dst_scales, Layout to, Geometry g) {
  const int64_t slots = g.block_slots(to);
  for (int64_t slot = int64_t(blockIdx.x) * kThreads + threadIdx.x; slot < slots; slot += int64_t(gridDim.x) * kThreads) {
    int64_t n, b;
    g.block_of_slot(to, slot, n, b);
    uint32_t* dst = dst_words + slot * g.bits;
    if (b >= g.blocks_per_row()) {
      for (int t = 0; t < g.bits; ++t) dst[t] = 0;
      dst_scales[slot] = 0;
      continue;
    }
    uint8_t idx[kBlockSize];
    read_block_indices(g, Layout::mma16, src_words, n, b, idx);
    pack_block(idx, g.bits, dst);
    dst_scales[slot] = src_scales[g.slot(Layout::mma16, n, b)];
  }
}

// Bit positions are compile-time constants (BITS fixed, loops unrolled), so each index
// costs a few shifts; each (row, block) run of 8 outputs is one 16-byte store where aligned.
template <typename T, int BITS>
__global__ void __launch_bounds__(kThreads) dequantize_mma16_kernel(const uint32_t* __restrict__ words,
                                                                    const uint8_t* __restrict__ scales, Geometry g,
                                                                    const DeviceMeta* meta, T* out, int64_t stride,
                                                                    bool vec) {
  __shared__ float cb[kMaxLevels];
  if (threadIdx.x < kMaxLevels) cb[threadIdx.x] = meta->codebook[threadIdx.x];
  __syncthreads();
  const float s = meta->tensor_scale;
  const int64_t units = g.stripes() * g.supertiles() * 32;
  for (int64_t id = int64_t(blockIdx.x) * kThreads + threadIdx.x; id < units; id += int64_t(gridDim.x) * kThreads) {
    const int lane = int(id % 32);
    const int64_t unit = id / 32, stripe = unit / g.supertiles(), st = unit % g.supertiles();
    const int gg = lane / 4, c = lane % 4;
    uint32_t w[2 * BITS];
    const uint2* p = reinterpret_cast<const uint2*>(words) + (unit * BITS) * 32 + lane;
#pragma unroll
    for (int u = 0; u < BITS; ++u) {
      const uint2 v = __ldg(p + u * 32);
      w[2 * u] = v.x, w[2 * u + 1] = v.y;
    }
    const uint2 sc = __ldg(reinterpret_cast<const uint2*>(scales) + unit * 8 + gg);
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int j = 0; j < kSupertileBlocks; ++j) {
        const int r16 = gg + 8 * half;
        const int64_t n = stripe * kStripeRows + r16, b = st * kSupertileBlocks + j;
        if (n >= g.rows || b >= g.blocks_per_row()) continue;
        const float amax = decoded_block_amax(s, ((half ? sc.y : sc.x) >> (8 * j)) & 0xffu);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          // element 8c + i of the block: pair 4c + i/2 -> s = (i/2)/2, r = 2 * ((i/2) % 2) + half
          const int q = 8 * j + 4 * ((i / 2) / 2) + 2 * ((i / 2) % 2) + half, e = i % 2;
          uint32_t idx = 0;
#pragma unroll
          for (int t = 0; t < BITS; ++t) {
            const int pos = mma16_code_bit(BITS, q, e * BITS + t);
            idx |= ((w[pos / 32] >> (pos % 32)) & 1u) << t;
          }
          v[i] = __fmul_rn(cb[idx], amax);
        }
        const int64_t col = b * kBlockSize + 8 * c;
        T* dst = out + n * stride + col;
        if (sizeof(T) == 2 && vec && col + 8 <= g.cols) {
          T tmp[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) tmp[i] = Element<T>::from_float(v[i]);
          uint4 packed;
          memcpy(&packed, tmp, 16);
          *reinterpret_cast<uint4*>(dst) = packed;
        } else {
#pragma unroll
          for (int i = 0; i < 8; ++i)
            if (col + i < g.cols) dst[i] = Element<T>::from_float(v[i]);
        }
      }
  }
}

}  // namespace

void repack_mma16(const QuantizedMatrix& src, QuantizedMatrix& dst, cudaStream_t stream) {
  const Geometry g = src.geometry();
  if (dst.layout() == Layout::mma16) {
    KBIT_REQUIRE(src.layout() != Layout::mma16, "repack: source and destination are both mma16");
    pack_mma16_kernel<<<grid_for(g.stripes() * g.supertiles() * 32, kThreads), kThreads, 0, stream>>>(
        src.words(), src.scales(), src.layout(), dst.words(), dst.scales(), g);
    check_launch("repack to mma16");
  } else {
    unpack_mma16_kernel<<<grid_for(g.block_slots(dst.layout()), kThreads), kThreads, 0, stream>>>(
        src.words(), src.scales(), dst.words(), dst.scales(), dst.layout(), g);
    check_launch("repack from mma16");
  }
}

void dequantize_mma16(const QuantizedMatrix& q, const MutableTensorView& out, cudaStream_t stream) {
  const Geometry g = q.geometry();
  const unsigned grid = grid_for(g.stripes() * g.supertiles() * 32, kThreads);
  const bool vec = aligned16(out.data, out.stride(), dtype_size(out.dtype));
  dispatch_float(out.dtype, [&]<typename T>() {
    dispatch_bits(g.bits, [&]<int BITS>() {
      dequantize_mma16_kernel<T, BITS><<<grid, kThreads, 0, stream>>>(q.words(), q.scales(), g, q.device_meta(),
                                                                      static_cast<T*>(out.data), out.stride(), vec);
      check_launch("dequantize mma16 kernel");
    });
  });
}

}  // namespace kbit::cuda::detail
