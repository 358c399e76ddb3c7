// The mma16 runtime layout on the GPU (layout.h defines it): repack from and to
// the other layouts, and dequantize from it. Load-time operations.
//
// Packing: one thread per (stripe, supertile, lane) unit of 2k words: it reads
// the k plane words of the 8 block-rows its lane covers, moves the index bits of
// its 64 elements to their mma16 code positions, and writes its words and (lanes
// with c = 0) the 8 scale bytes of rows g and g+8. Unpacking: one thread per
// destination block, gathering the block's 32 indices from 4 lanes.
// Dequantize: one thread per unit, 8 runs of 8 consecutive outputs.
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

template <typename T>
__global__ void __launch_bounds__(kThreads) dequantize_mma16_kernel(const uint32_t* __restrict__ words,
                                                                    const uint8_t* __restrict__ scales, Geometry g,
                                                                    const DeviceMeta* meta, T* out, int64_t stride) {
  __shared__ float cb[kMaxLevels];
  if (threadIdx.x < kMaxLevels) cb[threadIdx.x] = meta->codebook[threadIdx.x];
  __syncthreads();
  const float s = meta->tensor_scale;
  const int k = g.bits;
  const int64_t units = g.stripes() * g.supertiles() * 32;
  for (int64_t id = int64_t(blockIdx.x) * kThreads + threadIdx.x; id < units; id += int64_t(gridDim.x) * kThreads) {
    const int lane = int(id % 32);
    const int64_t unit = id / 32, stripe = unit / g.supertiles(), st = unit % g.supertiles();
    const int gg = lane / 4, c = lane % 4;
    uint32_t w[10];
    for (int i = 0; i < 2 * k; ++i) w[i] = __ldg(words + g.mma16_word(stripe, st, lane, i));
    for (int half = 0; half < 2; ++half)
      for (int j = 0; j < kSupertileBlocks; ++j) {
        const int r16 = gg + 8 * half;
        const int64_t n = stripe * kStripeRows + r16, b = st * kSupertileBlocks + j;
        if (n >= g.rows || b >= g.blocks_per_row()) continue;
        const float amax = decoded_block_amax(s, scales[unit * 64 + gg * 8 + half * 4 + j]);
        for (int i = 8 * c; i < 8 * c + 8; ++i) {
          const int64_t col = b * kBlockSize + i;
          if (col >= g.cols) break;
          const Mma16Pair p = mma16_pair(r16, j, i);
          uint32_t v = 0;
          for (int t = 0; t < k; ++t) {
            const int pos = mma16_code_bit(k, p.q, p.e * k + t);
            v |= ((w[pos / 32] >> (pos % 32)) & 1u) << t;
          }
          out[n * stride + col] = Element<T>::from_float(__fmul_rn(cb[v], amax));
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
  dispatch_float(out.dtype, [&]<typename T>() {
    dequantize_mma16_kernel<T><<<grid, kThreads, 0, stream>>>(q.words(), q.scales(), g, q.device_meta(),
                                                              static_cast<T*>(out.data), out.stride());
    check_launch("dequantize mma16 kernel");
  });
}

}  // namespace kbit::cuda::detail
