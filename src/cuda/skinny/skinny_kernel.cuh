// Skinny GEMM on dense 16-bit weights: C[M, N] = A[M, K] W[N, K]^T (+ bias) (+ R),
// fp32 accumulation, for decode-sized M (1..32). The kernel of kbit::skinny_gemm.
//
// Computes C^T = W A^T with mma.sync.m16n8k16: 16 rows of W are the A operand, 8
// tokens the B operand. Lane (g = lane / 4, c = lane % 4) loads 16 contiguous bytes
// of rows g and g + 8 at columns 32 s + 8 c of each 32-column step s, and 16 bytes of
// token g's activations at the same columns. The MMA's k order is permuted the same
// way for both operands (k slots 2c, 2c+1, 2c+8, 2c+9 of MMA 0 hold columns 8c..8c+3,
// of MMA 1 columns 8c+4..8c+7), so both come straight from one 16-byte load each,
// with no shuffles and no shared-memory staging. A warp's loads of a row are 64
// contiguous bytes per step, `unroll` steps per batch of loads.
// Launch: grid (row groups of 16 * stripes rows, splits); CTAs of `warps` warps share
// a row group's K range (batches interleaved), a cluster of `splits` CTAs splits K
// further. Warps are reduced in shared memory in warp order, the cluster's CTAs
// through distributed shared memory in rank order: deterministic, no workspace, no
// atomics. W is read once with evict-first loads; A stays in L1/L2. With PDL the
// first batch of W loads is issued before griddepcontrol.wait.
// Measured (H200, 2026-11-29, commit b8e9663, N = 7168, K = 3584, bf16 + residual,
// w=8 r=2 u=2): M = 1 17.1 us (3.0 TB/s; cuBLAS addmm 17.0), M = 8 18.7 us, M = 16
// 24.6 us (cuBLAS 15.5). Far from the 11.7 us floor: see NOTES.md.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../common.cuh"
#include "skinny_args.h"

namespace kbit::cuda::detail {

namespace skinny {

__device__ __forceinline__ uint4 load_evict_first(const uint16_t* p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 8 activations [col, col + 8) of one row as raw 16-bit pairs (col + 8 <= K always).
__device__ __forceinline__ uint4 load_x8(const uint16_t* row, int col, bool vec) {
  if (vec) return __ldg(reinterpret_cast<const uint4*>(row + col));
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = uint32_t(__ldg(row + col + 2 * i)) | (uint32_t(__ldg(row + col + 2 * i + 1)) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

constexpr int accumulators(int nt, int stripes) { return stripes * nt * 4; }

// Shared memory: the partial sums of warps 1..WARPS-1 (warp 0 keeps its own), then
// the CTA's sum read by the cluster's rank 0.
// Sets every accumulator of a [R][NT][4] tile to 0.
template <int R, int NT>
__device__ __forceinline__ void zero(float (&acc)[R][NT][4]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][nt][i] = 0.0f;
}

template <int NT, int WARPS, int R>
constexpr size_t smem_bytes() {
  return size_t(WARPS) * accumulators(NT, R) * 32 * sizeof(float);
}

}  // namespace skinny

template <typename T, int NT, int WARPS, int R, int U>
__global__ void __launch_bounds__(WARPS * 32) skinny_kernel(const SkinnyArgs a) {
  using namespace skinny;
  constexpr int kAcc = accumulators(NT, R);
  extern __shared__ float red[];  // [WARPS][kAcc][32]
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int splits = int(gridDim.y), split = int(blockIdx.y);
  const int k_steps = (a.K + 31) / 32;
  // This CTA's 32-column steps [s0, s1): never empty (the host keeps splits <= steps).
  const int s0 = int(int64_t(k_steps) * split / splits), s1 = int(int64_t(k_steps) * (split + 1) / splits);
  const int batches = (s1 - s0 + U - 1) / U;
  const int row_base = int(blockIdx.x) * 16 * R;

  const uint16_t* wrow[R][2];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wrow[r][h] = a.w + int64_t(min(row_base + 16 * r + g + 8 * h, a.N - 1)) * a.ldw + 8 * c;

  // One batch of W loads in flight per warp (two batches, double-buffered, measured slower on
  // the H200: more registers, fewer resident warps).
  using Batch = uint4[R][2][U];
  auto load_batch = [&](Batch& wv, int b) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int step = s0 + b * U + u;
      const int col = step * 32;
      const bool ok = step < s1 && col + 8 * c < a.K;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) wv[r][h][u] = ok ? load_evict_first(wrow[r][h] + col) : make_uint4(0, 0, 0, 0);
    }
  };

  float acc[R][NT][4];
  zero(acc);

  const uint16_t* xbase = static_cast<const uint16_t*>(a.x);
  const uint16_t* xrow[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) xrow[nt] = xbase + int64_t(min(nt * 8 + g, a.M - 1)) * a.ldx + 8 * c;
  // mma.sync needs the whole warp: the step test is warp-uniform; lanes past K multiply
  // zero weights by zero activations.
  auto compute_batch = [&](const Batch& wv, int b) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int step = s0 + b * U + u;
      if (step < s1) {
        const int col = step * 32;
        const bool ok = col + 8 * c < a.K;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint4 xv = ok ? load_x8(xrow[nt], col, a.x_vec) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int r = 0; r < R; ++r) {
            const uint4 w0 = wv[r][0][u], w1 = wv[r][1][u];
            const uint32_t lo[4] = {w0.x, w1.x, w0.y, w1.y}, hi[4] = {w0.z, w1.z, w0.w, w1.w};
            mma_16816<T>(acc[r][nt], lo, xv.x, xv.y);
            mma_16816<T>(acc[r][nt], hi, xv.z, xv.w);
          }
        }
      }
    }
  };

  Batch wv;
  int b = warp;
  if (b < batches) load_batch(wv, b);
  if (a.pdl) {
    // Weights do not depend on the previous kernel; A, R and C do.
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
  }
  for (; b < batches; b += WARPS) {
    compute_batch(wv, b);
    if (b + WARPS < batches) load_batch(wv, b + WARPS);
  }

  // Warps 1.. publish, warp 0 sums in warp order.
  if (warp > 0) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[(warp * kAcc + (r * NT + nt) * 4 + i) * 32 + lane] = acc[r][nt][i];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int w = 1; w < WARPS; ++w)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[r][nt][i] += red[(w * kAcc + (r * NT + nt) * 4 + i) * 32 + lane];
  }
  if (splits > 1) {
    // The CTA's sum into slot 0 of its shared memory; rank 0 adds the ranks in order.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    if (warp == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) red[((r * NT + nt) * 4 + i) * 32 + lane] = acc[r][nt][i];
    }
    cluster.sync();
    const bool leader = cluster.block_rank() == 0;
    if (leader && warp == 0) {
      zero(acc);
      for (int rank = 0; rank < splits; ++rank) {
        const float* part = cluster.map_shared_rank(red, rank);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][nt][i] += part[((r * NT + nt) * 4 + i) * 32 + lane];
      }
    }
    cluster.sync();  // the other ranks' shared memory stays valid until rank 0 has read it
    if (!leader) return;
  }
  if (warp != 0) return;

  // Epilogue: acc[r][nt] = C^T rows (g, g + 8) x tokens (2c, 2c + 1) of tile nt.
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = static_cast<const T*>(a.residual);
  T* y = static_cast<T*>(a.y);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row_base + 16 * r + g + 8 * h;
      if (row >= a.N) continue;
      const float bv = bias ? Element<T>::to_float(bias[row]) : 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int tok = nt * 8 + 2 * c + j;
          if (tok >= a.M) continue;
          float v = acc[r][nt][2 * h + j] + bv;
          if (res) v += Element<T>::to_float(res[int64_t(tok) * a.ldr + row]);
          y[int64_t(tok) * a.ldy + row] = Element<T>::from_float(v);
        }
    }
}

// Calls f.template operator()<R, U>() for the (stripes, unroll) pairs instantiated at NT.
template <int NT, typename F>
auto with_stripes_unroll(const SkinnyShape& s, F&& f) {
  constexpr int kLow = NT <= 2 ? 4 : 2, kHigh = 2 * kLow;  // stripes * unroll
  if (s.stripes == 1 && s.unroll == kLow) return f.template operator()<1, kLow>();
  if (s.stripes == 1 && s.unroll == kHigh) return f.template operator()<1, kHigh>();
  if (s.stripes == 2 && s.unroll == kLow / 2) return f.template operator()<2, kLow / 2>();
  if (s.stripes == 2 && s.unroll == kHigh / 2) return f.template operator()<2, kHigh / 2>();
  throw Error(kbit::detail::concat("skinny kernel: stripes=", s.stripes, " unroll=", s.unroll,
                                   " is not instantiated (stripes * unroll must be ", kLow, " or ", kHigh, ")"));
}

template <typename T, int NT, typename F>
auto with_skinny_instance(const SkinnyShape& s, F&& f) {
  return with_stripes_unroll<NT>(s, [&]<int R, int U>() {
    if (s.warps == 8) return f.template operator()<T, NT, 8, R, U>();
    return f.template operator()<T, NT, 4, R, U>();
  });
}

template <typename T, int NT>
void launch_skinny_nt(const SkinnyArgs& a, const SkinnyShape& s, cudaStream_t stream) {
  with_skinny_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R, int U>() {
    auto kernel = skinny_kernel<TT, N_, WARPS, R, U>;
    const size_t smem = skinny::smem_bytes<N_, WARPS, R>();
    if (smem > 48 * 1024)
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                 "skinny kernel: shared memory size");
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned((a.N + 16 * R - 1) / (16 * R)), unsigned(s.splits));
    cfg.blockDim = dim3(WARPS * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[2]{};
    int n = 0;
    if (s.splits > 1) {
      attr[n].id = cudaLaunchAttributeClusterDimension;
      attr[n].val.clusterDim.x = 1, attr[n].val.clusterDim.y = unsigned(s.splits), attr[n].val.clusterDim.z = 1;
      ++n;
    }
    if (a.pdl) {
      attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    cfg.attrs = attr, cfg.numAttrs = unsigned(n);
    check_cuda(cudaLaunchKernelEx(&cfg, kernel, a), "skinny kernel: launch");
  });
}

template <typename T, int NT>
SkinnyKernelInfo skinny_info_nt(const SkinnyShape& s) {
  return with_skinny_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R, int U>() {
    cudaFuncAttributes attr{};
    check_cuda(cudaFuncGetAttributes(&attr, skinny_kernel<TT, N_, WARPS, R, U>), "skinny kernel: attributes");
    return SkinnyKernelInfo{attr.numRegs, int(attr.localSizeBytes)};
  });
}

#define KBIT_INSTANTIATE_SKINNY(T, NT)                                                                   \
  template void launch_skinny_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t);         \
  template SkinnyKernelInfo skinny_info_nt<T, NT>(const SkinnyShape&);

}  // namespace kbit::cuda::detail
