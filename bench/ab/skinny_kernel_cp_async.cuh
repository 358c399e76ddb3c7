// VARIANT (bench/ab, for an A/B on the GPU): slices copied by every thread with 16-byte
// cp.async instead of TMA boxes issued by a producer warp; see the VARIANT comment below.
// Skinny GEMM on dense 16-bit weights: C[M, N] = A[M, K] W[N, K]^T (+ bias) (+ R),
// fp32 accumulation, for decode-sized M (1..32). The kernel of kbit::skinny_gemm.
//
// Computes C^T = W A^T with mma.sync.m16n8k16: 16 rows of W are the A operand, 8
// tokens the B operand. A CTA owns 16 * R rows (R stripes) over its K range. Lane 0 of
// a producer warp streams W and A, `kslice` columns at a time, into a ring of `stages`
// shared-memory slots with TMA tensor copies (one box of 16 R rows x min(kslice, 256)
// columns of W, evict-first, and one of A's M rows, per 256 columns; mbarriers track
// them; A without 16-byte aligned rows is read by the consumers from global memory),
// so that the bytes in flight cost neither registers nor many instructions
// (1-D copies of one row each measured 16.5 us at best here: per-copy cost); `warps`
// consumer warps take the slot's 32-column steps in turn. Rows are dense in a box
// (the 2-way bank conflict of rows g, g + 1 is cheap at this arithmetic intensity).
// Lane (g = lane / 4, c = lane % 4) reads 16 bytes of rows g and g + 8 at columns
// 32 s + 8 c and 16 bytes of token g's row at the same columns; the MMA's k order is
// permuted the same way for both operands (k slots 2c, 2c+1, 2c+8, 2c+9 of MMA 0 hold
// columns 8c..8c+3, of MMA 1 columns 8c+4..8c+7), so each comes from one shared load.
// Launch: grid (row groups of 16 R rows, splits), (warps + 1) * 32 threads; a cluster
// of `splits` CTAs splits K further. Warps are reduced in shared memory in warp order,
// the cluster's CTAs through distributed shared memory in rank order: deterministic,
// no workspace, no atomics. With PDL the first slots' W copies are issued before
// griddepcontrol.wait.
// Measured (H200, 2026-11-30, commit 4604268, N = 7168, K = 3584, bf16 + residual, the
// tuned shapes): M = 1 17.1 us (3.0 TB/s; cuBLAS addmm 16.9), M = 8 18.1 us, M = 16
// 20.0 us (cuBLAS 15.3); the register-loading kernel it replaced (b8e9663): 17.1, 18.7,
// 24.6 us. A plain read of the same 51.4 MB takes 12.5-13 us: see BENCHMARKS.md.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../bulk_copy.cuh"
#include "../common.cuh"
#include "skinny_args.h"

namespace kbit::cuda::detail {

namespace skinny {

constexpr int kBarrierBytes = 128;  // full[stages] then empty[stages], 8 bytes each (stages <= 8)
constexpr int kMaxBoxColumns = 256;  // a TMA box spans at most 256 elements per dimension

__host__ __device__ constexpr int box_columns(int kslice) { return kslice < kMaxBoxColumns ? kslice : kMaxBoxColumns; }
__host__ __device__ constexpr uint32_t slot_bytes(int rows, int m, int kslice) { return uint32_t(rows + m) * kslice * 2; }
__host__ __device__ constexpr size_t reduction_bytes(int warps, int stripes, int n_tiles) {
  return size_t(warps) * stripes * n_tiles * 4 * 32 * sizeof(float);
}
__host__ __device__ constexpr size_t shared_bytes(int warps, int stripes, int n_tiles, int stages, int kslice, int m) {
  const size_t ring = size_t(stages) * slot_bytes(16 * stripes, m, kslice);
  const size_t red = reduction_bytes(warps, stripes, n_tiles);
  return kBarrierBytes + (ring > red ? ring : red);
}

// 8 activations from global memory as raw 16-bit pairs (A without 16-byte alignment).
__device__ __forceinline__ uint4 load_x8(const uint16_t* p) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) w[i] = uint32_t(__ldg(p + 2 * i)) | (uint32_t(__ldg(p + 2 * i + 1)) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

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

}  // namespace skinny

template <typename T, int NT, int WARPS, int R>
__global__ void __launch_bounds__((WARPS + 1) * 32, 1) skinny_kernel(const __grid_constant__ SkinnyArgs a) {
  using namespace skinny;
  constexpr int kRows = 16 * R, kAcc = R * NT * 4;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int stages = a.stages, kslice = a.kslice, box = box_columns(kslice);
  // Slot: W's boxes [kslice / box][kRows][box], then A's [kslice / box][M][box].
  const uint32_t slot = slot_bytes(kRows, a.M, kslice), box_row = uint32_t(box) * 2;
  const uint32_t w_box_bytes = uint32_t(kRows) * box_row, x_box_bytes = uint32_t(a.M) * box_row;
  const uint32_t x_region = uint32_t(kslice / box) * w_box_bytes;
  const uint32_t bars = shared_address(smem);
  unsigned char* const ring = smem + kBarrierBytes;
  auto full = [&](int i) { return bars + 8u * uint32_t(i); };
  auto empty = [&](int i) { return bars + 8u * uint32_t(stages + i); };

  const int splits = int(gridDim.y), split = int(blockIdx.y);
  const int k_steps = (a.K + 31) / 32;
  // This CTA's columns [k0, k1): never empty (the host keeps splits <= 32-column steps).
  const int k0 = 32 * int(int64_t(k_steps) * split / splits);
  const int k1 = min(32 * int(int64_t(k_steps) * (split + 1) / splits), a.K);
  const int slices = (k1 - k0 + kslice - 1) / kslice;
  const int row_base = int(blockIdx.x) * kRows;

  // VARIANT: every thread copies its share of each slice with 16-byte cp.async (LSU path),
  // tracked by one mbarrier per slot (cp.async.mbarrier.arrive.noinc from every thread);
  // a CTA barrier per slice before its slot is refilled. No producer warp of its own.
  const uint16_t* xbase = static_cast<const uint16_t*>(a.x);
  const int threads = (WARPS + 1) * 32, tid = int(threadIdx.x);
  const int chunks_per_row = kslice / 8;
  const int w_chunks = kRows * chunks_per_row, x_chunks = a.x_vec ? a.M * chunks_per_row : 0;
  if (threadIdx.x == 0) {
    for (int i = 0; i < stages; ++i) mbarrier_init(full(i), uint32_t(threads));
    mbarrier_init_fence();
  }
  __syncthreads();
  if (a.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const uint64_t policy = l2_evict_first_policy();
  auto copy_part = [&](int s, int first, int last) {
    const uint32_t dst_slot = shared_address(ring + size_t(s % stages) * slot);
    const int col0 = k0 + s * kslice;
    for (int i = first + tid; i < last; i += threads) {
      const bool is_w = i < w_chunks;
      const int j = is_w ? i : i - w_chunks;
      const int row = j / chunks_per_row, cc = (j - row * chunks_per_row) * 8;
      const int b = cc / box, col = col0 + cc;
      const bool inside = col < k1 && (!is_w || row_base + row < a.N);
      const uint32_t dst = dst_slot + (is_w ? 0u : x_region) + uint32_t(b) * (is_w ? w_box_bytes : x_box_bytes) +
                           uint32_t(row) * box_row + uint32_t(cc - b * box) * 2;
      const uint32_t src_bytes = inside ? 16u : 0u;
      if (is_w) {
        const uint16_t* src = inside ? a.w + int64_t(row_base + row) * a.ldw + col : a.w;
        asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst), "l"(src),
                     "r"(src_bytes), "l"(policy)
                     : "memory");
      } else {
        const uint16_t* src = inside ? xbase + int64_t(row) * a.ldx + col : xbase;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                     : "memory");
      }
    }
  };
  auto arrive_when_copied = [&](int s) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(full(s % stages)) : "memory");
  };
  const int ahead = min(stages - 1, slices);
  for (int s = 0; s < ahead; ++s) copy_part(s, 0, w_chunks);  // weights do not depend on the previous kernel
  if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  for (int s = 0; s < ahead; ++s) copy_part(s, w_chunks, w_chunks + x_chunks), arrive_when_copied(s);

  // Two accumulator chains where a step has few MMAs: the low and high 8 columns of each
  // 16-column MMA pair go to acc and acc_hi, so that a step's two MMAs do not wait on
  // each other (with 16 tiles there are chains enough, and registers too few).
  constexpr bool kTwoChains = R * NT <= 8;
  float acc[R][NT][4], acc_hi[R][NT][4];
  zero(acc);
  zero(acc_hi);
  {
    for (int s = 0; s < slices; ++s) {
      __syncthreads();  // slice s - 1 consumed: its slot may be refilled
      if (s + stages - 1 < slices) copy_part(s + stages - 1, 0, w_chunks + x_chunks), arrive_when_copied(s + stages - 1);
      const int sl = s % stages;
      mbarrier_wait(full(sl), uint32_t(s / stages) & 1u);
      if (warp >= WARPS) continue;
      const int cols = min(kslice, k1 - (k0 + s * kslice)), steps = (cols + 31) / 32;
      const unsigned char* base = ring + size_t(sl) * slot;
      // mma.sync needs the whole warp: the step test is warp-uniform; lanes past K
      // multiply zeros (TMA's fill for W, explicit for A).
      const int slice_col = k0 + s * kslice;
#pragma unroll 1
      for (int j = warp; j < steps; j += WARPS) {
        const int cc = 32 * j + 8 * c, b = (32 * j) / box;
        const bool ok = cc < cols;
        const uint32_t in_box = uint32_t(cc - b * box) * 2;
        const unsigned char* wb = base + uint32_t(b) * w_box_bytes + in_box;
        const unsigned char* xb = base + x_region + uint32_t(b) * x_box_bytes + in_box;
        uint4 xv[NT];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int t = min(nt * 8 + g, a.M - 1);
          if (!ok)
            xv[nt] = make_uint4(0, 0, 0, 0);
          else if (a.x_vec)
            xv[nt] = *reinterpret_cast<const uint4*>(xb + uint32_t(t) * box_row);
          else
            xv[nt] = load_x8(xbase + int64_t(t) * a.ldx + slice_col + cc);
        }
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const uint4 w0 = *reinterpret_cast<const uint4*>(wb + uint32_t(16 * r + g) * box_row);
          const uint4 w1 = *reinterpret_cast<const uint4*>(wb + uint32_t(16 * r + g + 8) * box_row);
          const uint32_t lo[4] = {w0.x, w1.x, w0.y, w1.y}, hi[4] = {w0.z, w1.z, w0.w, w1.w};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            mma_16816<T>(acc[r][nt], lo, xv[nt].x, xv[nt].y);
            mma_16816<T>(kTwoChains ? acc_hi[r][nt] : acc[r][nt], hi, xv[nt].z, xv[nt].w);
          }
        }
      }
    }
    if (warp < WARPS) if constexpr (kTwoChains) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[r][nt][i] += acc_hi[r][nt][i];
    }
  }
  // Every slice has been consumed, so every copy has landed: the ring's memory now holds
  // the consumer warps' partial sums [WARPS][kAcc][32].
  __syncthreads();
  float* red = reinterpret_cast<float*>(ring);

  // Warps 1.. publish, warp 0 sums in warp order.
  if (warp > 0 && warp < WARPS) {
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
  if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // R and C belong to the previous kernel too

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

template <typename T, int NT, typename F>
auto with_skinny_instance(const SkinnyShape& s, F&& f) {
  auto with_warps = [&]<int R>() {
    if (s.warps == 2) return f.template operator()<T, NT, 2, R>();
    if (s.warps == 4) return f.template operator()<T, NT, 4, R>();
    return f.template operator()<T, NT, 8, R>();
  };
  if (s.stripes == 1) return with_warps.template operator()<1>();
  if (s.stripes == 2) return with_warps.template operator()<2>();
  return with_warps.template operator()<4>();
}

template <typename T, int NT>
void launch_skinny_nt(const SkinnyArgs& a, const SkinnyShape& s, cudaStream_t stream) {
  with_skinny_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R>() {
    auto kernel = skinny_kernel<TT, N_, WARPS, R>;
    const size_t smem = skinny::shared_bytes(WARPS, R, N_, s.stages, s.kslice, a.M);
    if (smem > 48 * 1024)
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                 "skinny kernel: shared memory size");
    SkinnyArgs args = a;
    args.stages = s.stages, args.kslice = s.kslice;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned((a.N + 16 * R - 1) / (16 * R)), unsigned(s.splits));
    cfg.blockDim = dim3((WARPS + 1) * 32);
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
    check_cuda(cudaLaunchKernelEx(&cfg, kernel, args), "skinny kernel: launch");
  });
}

template <typename T, int NT>
SkinnyKernelInfo skinny_info_nt(const SkinnyShape& s, int m) {
  return with_skinny_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int R>() {
    cudaFuncAttributes attr{};
    check_cuda(cudaFuncGetAttributes(&attr, skinny_kernel<TT, N_, WARPS, R>), "skinny kernel: attributes");
    return SkinnyKernelInfo{attr.numRegs, int(attr.localSizeBytes),
                            skinny::shared_bytes(WARPS, R, N_, s.stages, s.kslice, m)};
  });
}

#define KBIT_INSTANTIATE_SKINNY(T, NT)                                                                   \
  template void launch_skinny_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t);         \
  template SkinnyKernelInfo skinny_info_nt<T, NT>(const SkinnyShape&, int);

}  // namespace kbit::cuda::detail
