// GPU repack between layouts (flat <-> tiled_k64 here, mma16 in mma16.cu), bit-exact
// with the CPU.
// One thread per destination slot: it copies the k words and the scale byte of
// the block that slot holds, or writes zeros for a padding slot, so every byte
// of the destination is written. Measured (H200, 2026-11-29, 16384 x 16384):
// 93-255 us for k = 2..5, 1.4-1.9 TB/s; a load-time operation, not tuned further.
#include "common.cuh"
#include "kbit/cuda.h"
#include "mma16.h"

namespace kbit::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) repack_kernel(const uint32_t* __restrict__ src_words,
                                                          const uint8_t* __restrict__ src_scales, Layout from,
                                                          uint32_t* __restrict__ dst_words, uint8_t* __restrict__ dst_scales,
                                                          Layout to, Geometry g) {
  const int64_t slots = g.block_slots(to);
  const int k = g.bits;
  for (int64_t slot = int64_t(blockIdx.x) * kThreads + threadIdx.x; slot < slots; slot += int64_t(gridDim.x) * kThreads) {
    int64_t r, b;
    g.block_of_slot(to, slot, r, b);
    if (b >= g.blocks_per_row()) {
      for (int t = 0; t < k; ++t) dst_words[slot * k + t] = 0;
      dst_scales[slot] = 0;
      continue;
    }
    const int64_t src = g.slot(from, r, b);
    for (int t = 0; t < k; ++t) dst_words[slot * k + t] = __ldg(src_words + src * k + t);
    dst_scales[slot] = src_scales[src];
  }
}

}  // namespace

void repack_into(const QuantizedMatrix& src, QuantizedMatrix& dst, cudaStream_t stream) {
  kbit::detail::check_matrix(src, "repack source", Memory::device);
  kbit::detail::check_matrix(dst, "repack destination", Memory::device);
  KBIT_REQUIRE(src.rows() == dst.rows() && src.cols() == dst.cols() && src.bits() == dst.bits(),
               "repack: source [", src.rows(), ", ", src.cols(), "] k=", src.bits(), " and destination [", dst.rows(),
               ", ", dst.cols(), "] k=", dst.bits(), " differ");
  KBIT_REQUIRE(src.codebook() == dst.codebook(), "repack: source and destination codebooks differ");
  const Geometry g = src.geometry();
  if (src.layout() == Layout::mma16 || dst.layout() == Layout::mma16) {
    detail::repack_mma16(src, dst, stream);
  } else {
    const unsigned grid = detail::grid_for(g.block_slots(dst.layout()), kThreads);
    repack_kernel<<<grid, kThreads, 0, stream>>>(src.words(), src.scales(), src.layout(), dst.words(), dst.scales(),
                                                 dst.layout(), g);
    detail::check_launch("repack kernel");
  }
  detail::check_cuda(cudaMemcpyAsync(dst.device_meta(), src.device_meta(), sizeof(DeviceMeta), cudaMemcpyDeviceToDevice,
                                     stream),
                     "repack: copying metadata");
}

QuantizedMatrix repack(const QuantizedMatrix& q, Layout to, cudaStream_t stream) {
  kbit::detail::check_matrix(q, "repack", Memory::device);
  QuantizedMatrix out = QuantizedMatrix::allocate(q.rows(), q.cols(), q.codebook(), to, Memory::device);
  out.set_rotation(q.rotation());
  repack_into(q, out, stream);
  return out;
}

}  // namespace kbit::cuda
