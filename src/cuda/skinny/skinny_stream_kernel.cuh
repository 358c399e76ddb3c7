// Skinny GEMM, streaming kernel: C[M, N] = A[M, K] W[N, K]^T (+ bias) (+ R), fp32
// accumulation, M = 1..32; the other kernel of kbit::skinny_gemm (loaders `registers` and
// `staged`; skinny_kernel.cuh is the TMA ring).
//
// Why: a plain kernel reads the Kimi-K3 latent weight (51.4 MB) in 12.9 us when its load
// instructions each cover 4 rows x 128 bytes or wider, with 448 CTAs (bench/calibration/
// read_floor.cu), while the TMA ring without any MMA streams it in 15.2 us (ninth session).
// So W goes straight from global memory into registers: no producer warp, no ring, no
// barriers, D batches of loads in flight per warp.
//
// Layout: C^T = W A^T with mma.sync.m16n8k16, 16 rows of W the A operand, 8 tokens the
// B operand (as in the ring kernel). A CTA owns 16 R rows; K is cut into batches of 64
// columns (128 bytes of a row), and warp w takes batches w, w + WARPS, ... Lane (g, c)
// multiplies 16 bytes of rows g and g + 8 at columns 32 j + 8 c of each 32-column step j
// with 16 bytes of token g at the same columns (the k order permuted alike for both
// operands). Loaders:
//  - registers: each lane loads exactly those 16 bytes (each load instruction covers 8
//    rows x 64 bytes);
//  - staged: lane (q = lane / 8, u = lane % 8) loads 16 bytes at column 8 u of rows 4 i + q
//    (4 rows x 128 bytes per instruction), stores them to the warp's own tile of shared
//    memory (16-byte chunks XOR-swizzled by 4 (row & 1): conflict-free both ways) and
//    reads the fragments back; only __syncwarp, no CTA barrier in the loop.
// A is read through L1 (all CTAs of an SM share it) as each batch is used. W loads carry
// L1::no_allocate and an L2 evict-first policy. With PDL the first D - 1 batches of W are requested before
// griddepcontrol.wait. Partial sums: skinny_reduce.cuh (warp order, cluster rank order).
// Launch: grid (row groups of 16 R rows, splits), WARPS * 32 threads, at most 128
// registers per thread (four CTAs of 4 warps per SM). Instantiated for R = 1 (R = 2 spills).
// Measured: see BENCHMARKS.md (not yet run when written).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../bulk_copy.cuh"
#include "../common.cuh"
#include "skinny_args.h"
#include "skinny_reduce.cuh"

namespace kbit::cuda::detail {

namespace skinny {

constexpr int kStreamBatchColumns = 64;  // one batch: 128 bytes of each of the CTA's rows

__host__ __device__ constexpr size_t stream_shared_bytes(int warps, int stripes, int n_tiles, bool staged) {
  const size_t tiles = staged ? size_t(warps) * 16 * stripes * kStreamBatchColumns * 2 : 0;
  const size_t red = reduction_bytes(warps, stripes, n_tiles);
  return tiles > red ? tiles : red;
}

// 16 bytes of W: no L1 allocation, evict-first in L2 (read once per call).
__device__ __forceinline__ uint4 load_w16(const uint16_t* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

}  // namespace skinny

template <typename T, int NT, int WARPS, int R, int D, bool STAGED>
__global__ void __launch_bounds__(WARPS * 32, 512 / (WARPS * 32)) skinny_stream_kernel(const __grid_constant__ SkinnyArgs a) {
  using namespace skinny;
  constexpr int kRows = 16 * R, kLoads = 4 * R;  // 16-byte W loads per lane per batch
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int splits = int(gridDim.y), split = int(blockIdx.y);
  const int batches = (a.K + kStreamBatchColumns - 1) / kStreamBatchColumns;
  // This CTA's batches [b0, b1): never empty (the host keeps splits <= batches).
  const int b0 = int(int64_t(batches) * split / splits), b1 = int(int64_t(batches) * (split + 1) / splits);
  const int mine = b1 - b0 > warp ? (b1 - b0 - warp + WARPS - 1) / WARPS : 0;
  const int row_base = int(blockIdx.x) * kRows;
  if (a.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const uint64_t policy = l2_evict_first_policy();

  // W pointers of this lane at column 0, and the row test of each load.
  const uint16_t* wp[kLoads];
  bool row_ok[kLoads];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) {
    // registers: load l = (stripe r, half h, step j); staged: rows 4 l + q, column 8 u.
    const int row = STAGED ? row_base + 4 * l + (lane >> 3) : row_base + 16 * (l >> 2) + g + 8 * ((l >> 1) & 1);
    const int col = STAGED ? 8 * (lane & 7) : 32 * (l & 1) + 8 * c;
    row_ok[l] = row < a.N;
    wp[l] = a.w + int64_t(row_ok[l] ? row : a.N - 1) * a.ldw + col;
  }
  const uint16_t* const xbase = static_cast<const uint16_t*>(a.x);

  uint4 wv[D][kLoads];
  auto load_w = [&](uint4(&dst)[kLoads], int i) {
    const int col0 = (b0 + warp + i * WARPS) * kStreamBatchColumns;
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int col = col0 + (STAGED ? 8 * (lane & 7) : 32 * (l & 1) + 8 * c);
      dst[l] = row_ok[l] && col < a.K ? load_w16(wp[l] + col0, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  // A comes from L1 (or L2 on first touch) as the batch is used: keeping it in flight as
  // long as W would cost 8 NT registers per batch in flight.
  auto load_x = [&](uint4(&dst)[2][NT], int i) {
    const int col0 = (b0 + warp + i * WARPS) * kStreamBatchColumns;
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int t = min(nt * 8 + g, a.M - 1), col = col0 + 32 * j + 8 * c;
        const uint16_t* p = xbase + int64_t(t) * a.ldx + col;
        dst[j][nt] = col >= a.K ? make_uint4(0, 0, 0, 0)
                     : a.x_vec  ? __ldg(reinterpret_cast<const uint4*>(p))
                                : load_x8(p);
      }
  };

  constexpr bool kTwoChains = R * NT <= 4;
  float acc[R][NT][4], acc_hi[R][NT][4];
  zero(acc);
  zero(acc_hi);
  unsigned char* const tile = smem + size_t(warp) * kRows * kStreamBatchColumns * 2;
  auto compute = [&](const uint4(&w)[kLoads], const uint4(&x)[2][NT]) {
    uint4 frag[R][2][2];  // [stripe][half][step]
    if constexpr (STAGED) {
      __syncwarp();  // the previous batch's fragments have been read
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int row = 4 * l + (lane >> 3), chunk = (lane & 7) ^ (4 * (row & 1));
        *reinterpret_cast<uint4*>(tile + row * 128 + chunk * 16) = w[l];
      }
      __syncwarp();
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int row = 16 * r + g + 8 * h, chunk = (4 * j + c) ^ (4 * (row & 1));
            frag[r][h][j] = *reinterpret_cast<const uint4*>(tile + row * 128 + chunk * 16);
          }
    } else {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) frag[l >> 2][(l >> 1) & 1][l & 1] = w[l];
    }
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint4 w0 = frag[r][0][j], w1 = frag[r][1][j];
        const uint32_t lo[4] = {w0.x, w1.x, w0.y, w1.y}, hi[4] = {w0.z, w1.z, w0.w, w1.w};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_16816<T>(acc[r][nt], lo, x[j][nt].x, x[j][nt].y);
          mma_16816<T>(kTwoChains ? acc_hi[r][nt] : acc[r][nt], hi, x[j][nt].z, x[j][nt].w);
        }
      }
  };

  // Weights first: they do not depend on the previous kernel.
#pragma unroll
  for (int d = 0; d + 1 < D; ++d)
    if (d < mine) load_w(wv[d], d);
  if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // Batch i sits in slot i % D; the W loads of batch i + D - 1 go out before batch i is used.
  for (int i0 = 0; i0 < mine; i0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int i = i0 + d;
      if (i < mine) {  // warp-uniform: mma.sync needs the whole warp
        uint4 xv[2][NT];
        load_x(xv, i);
        if (i + D - 1 < mine) load_w(wv[(d + D - 1) % D], i + D - 1);
        compute(wv[d], xv);
      }
    }
  }
  if constexpr (kTwoChains) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[r][nt][i] += acc_hi[r][nt][i];
  }
  // The tiles are free once every warp is past its loop (reduce_and_store begins with a
  // CTA barrier).
  reduce_and_store<T, NT, WARPS, R>(acc, reinterpret_cast<float*>(smem), a, row_base);
}

template <typename T, int NT, typename F>
auto with_stream_instance(const SkinnyShape& s, F&& f) {
  auto with_rest = [&]<int WARPS, int R>() {
    const bool staged = s.loader == SkinnyLoader::staged;
    if (s.stages == 2) return staged ? f.template operator()<T, NT, WARPS, R, 2, true>()
                                     : f.template operator()<T, NT, WARPS, R, 2, false>();
    return staged ? f.template operator()<T, NT, WARPS, R, 3, true>() : f.template operator()<T, NT, WARPS, R, 3, false>();
  };
  // One stripe only: with two, every shape but one spills at 128 registers.
  if (s.warps == 4) return with_rest.template operator()<4, 1>();
  return with_rest.template operator()<8, 1>();
}

// Not instantiated for 4 token tiles (M > 16): every shape spills there; the host checks
// (check_skinny_shape) keep such calls on the ring kernel.
template <typename T, int NT>
void launch_skinny_stream_nt(const SkinnyArgs& a, const SkinnyShape& s, cudaStream_t stream) {
  with_stream_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R, int D, bool STAGED>() {
    auto kernel = skinny_stream_kernel<TT, N_, WARPS, R, D, STAGED>;
    const size_t smem = skinny::stream_shared_bytes(WARPS, R, N_, STAGED);
    if (smem > 48 * 1024)
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                 "skinny stream kernel: shared memory size");
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
    check_cuda(cudaLaunchKernelEx(&cfg, kernel, a), "skinny stream kernel: launch");
  });
}

template <typename T, int NT>
SkinnyKernelInfo skinny_stream_info_nt(const SkinnyShape& s, int) {
  return with_stream_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R, int D, bool STAGED>() {
    cudaFuncAttributes attr{};
    check_cuda(cudaFuncGetAttributes(&attr, skinny_stream_kernel<TT, N_, WARPS, R, D, STAGED>),
               "skinny stream kernel: attributes");
    return SkinnyKernelInfo{attr.numRegs, int(attr.localSizeBytes), skinny::stream_shared_bytes(WARPS, R, N_, STAGED)};
  });
}

#define KBIT_INSTANTIATE_SKINNY_STREAM(T, NT)                                                          \
  template void launch_skinny_stream_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t); \
  template SkinnyKernelInfo skinny_stream_info_nt<T, NT>(const SkinnyShape&, int);

}  // namespace kbit::cuda::detail
