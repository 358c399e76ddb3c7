// Skinny GEMM on dense 16-bit weights: C[M, N] = A[M, K] W[N, K]^T (+ bias) (+ R),
// fp32 accumulation, for decode-sized M (1..32). The ring kernel (loader tma) of
// kbit::skinny_gemm: the default above M = 16; up to 16 the streaming kernel
// (skinny_stream_kernel.cuh) is faster (15.1 against 17.1 us at M = 1, ninth session).
// kbit::linear takes cuBLASLt above M = 16 instead: this kernel runs at 0.52-0.81x of
// cuBLAS bf16 at M = 24 and 32 on every dense projection (thirty-first session).
//
// Computes C^T = W A^T with mma.sync.m16n8k16: 16 rows of W are the A operand, 8
// tokens the B operand. A CTA owns 16 * R rows (R stripes) over its K range. Lane 0 of
// a producer warp streams W and A, `kslice` columns at a time, into a ring of `stages`
// shared-memory slots with TMA tensor copies (one box of 16 R rows x min(kslice, 256)
// columns of W, evict-first, and one of A's M rows, per 256 columns; mbarriers track
// them; A without 16-byte aligned rows is read by the consumers from global memory),
// so that the bytes in flight cost neither registers nor many instructions
// (one 1-D bulk copy per row and slot measured 16.5 us at best, the same); `warps`
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
// With the ring slot, phase and box index as counters / shifts instead of divisions by
// run-time values (H200, 2026-12-01, A/B in one session): w=4,r=2,p=3,c=256 M = 1 / 8 / 16
// 17.49 / 18.34 / 20.66 -> 16.73 / 17.91 / 19.63 us, M = 17 / 24 / 32 26.77 / 27.48 / 28.65
// -> 22.96 / 23.71 / 24.98 (cuBLAS addmm 15.5-15.9).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "../bulk_copy.cuh"
#include "../common.cuh"
#include "skinny_args.h"
#include "skinny_reduce.cuh"

namespace kbit::cuda::detail {

namespace skinny {

constexpr int kBarrierBytes = 128;  // full[stages] then empty[stages], 8 bytes each (stages <= 8)
constexpr int kMaxBoxColumns = 256;  // a TMA box spans at most 256 elements per dimension

__host__ __device__ constexpr int box_columns(int kslice) { return kslice < kMaxBoxColumns ? kslice : kMaxBoxColumns; }
__host__ __device__ constexpr uint32_t slot_bytes(int rows, int m, int kslice) { return uint32_t(rows + m) * kslice * 2; }
__host__ __device__ constexpr size_t shared_bytes(int warps, int stripes, int n_tiles, int stages, int kslice, int m) {
  const size_t ring = size_t(stages) * slot_bytes(16 * stripes, m, kslice);
  const size_t red = reduction_bytes(warps, stripes, n_tiles);
  return kBarrierBytes + (ring > red ? ring : red);
}

}  // namespace skinny

template <typename T, int NT, int WARPS, int R>
__global__ void __launch_bounds__((WARPS + 1) * 32, 1) skinny_kernel(const __grid_constant__ SkinnyArgs a) {
  using namespace skinny;
  constexpr int kRows = 16 * R;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int stages = a.stages, kslice = a.kslice, box = box_columns(kslice);
  // 32-column steps per box as a shift (boxes are 128 or 256 columns): (32 * j) / box by a
  // run-time box would be a division per step.
  const int box_step_shift = 31 - __clz(box >> 5);
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

  if (threadIdx.x == 0) {
    // full: the producer's lane 0, which also expects the copies' bytes.
    for (int i = 0; i < stages; ++i) mbarrier_init(full(i), 1), mbarrier_init(empty(i), WARPS);
    mbarrier_init_fence();
  }
  __syncthreads();
  skinny_pdl_trigger(a, true);

  if (warp == WARPS) {
    // Producer warp: slice s goes to slot s % stages once the consumers have released
    // the slice that held it before. Lane 0 issues the copies. The slot and its phase are
    // counters: s % stages by the run-time ring length would be a division per slice.
    auto cols_of = [&](int s) { return min(kslice, k1 - (k0 + s * kslice)); };
    auto boxes_of = [&](int s) { return (cols_of(s) + box - 1) >> (box_step_shift + 5); };
    auto issue_w = [&](int s, int sl) {
      if (lane != 0) return;
      const uint64_t policy = l2_evict_first_policy();
      const uint32_t dst = shared_address(ring + size_t(sl) * slot);
      for (int b = 0; b < boxes_of(s); ++b)
        tensor_copy_2d(dst + uint32_t(b) * w_box_bytes, &a.w_map, k0 + s * kslice + b * box, row_base, full(sl),
                       policy);
    };
    auto issue_x = [&](int s, int sl) {
      if (lane != 0) return;
      const uint32_t dst = shared_address(ring + size_t(sl) * slot) + x_region;
      for (int b = 0; b < boxes_of(s); ++b)
        tensor_copy_2d(dst + uint32_t(b) * x_box_bytes, &a.x_map, k0 + s * kslice + b * box, 0, full(sl));
    };
    // A's rows not 16-byte aligned (no TMA map): the consumers read A from global memory.
    auto arm = [&](int s, int sl) {
      if (lane == 0)
        mbarrier_arrive_expect_tx(full(sl), uint32_t(boxes_of(s)) * (w_box_bytes + (a.x_vec ? x_box_bytes : 0u)));
      __syncwarp();
    };
    const int first = min(stages, slices);
    for (int s = 0; s < first; ++s) arm(s, s), issue_w(s, s);  // weights do not depend on the previous kernel
    if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (a.x_vec)
      for (int s = 0; s < first; ++s) issue_x(s, s);
    // Slice s >= stages reuses slot s % stages after its (s / stages)-th release.
    int sl = 0;
    uint32_t released_phase = 0;
    for (int s = first; s < slices; ++s) {
      mbarrier_wait(empty(sl), released_phase);
      arm(s, sl), issue_w(s, sl);
      if (a.x_vec) issue_x(s, sl);
      if (++sl == stages) sl = 0, released_phase ^= 1u;
    }
  }

  // Two accumulator chains where a step has few MMAs: the low and high 8 columns of each
  // 16-column MMA pair go to acc and acc_hi, so that a step's two MMAs do not wait on
  // each other (with 16 tiles there are chains enough, and registers too few).
  constexpr bool kTwoChains = R * NT <= 8;
  float acc[R][NT][4], acc_hi[R][NT][4];
  zero(acc);
  zero(acc_hi);
  if (warp < WARPS) {
    const uint16_t* xbase = static_cast<const uint16_t*>(a.x);
    if (a.pdl && !a.x_vec) asm volatile("griddepcontrol.wait;\n" ::: "memory");  // A straight from global memory
    int sl = 0;  // slot s % stages and its fill phase (s / stages) & 1, kept as counters
    uint32_t filled_phase = 0;
    for (int s = 0; s < slices; ++s) {
      mbarrier_wait(full(sl), filled_phase);
      const int cols = min(kslice, k1 - (k0 + s * kslice)), steps = (cols + 31) / 32;
      const unsigned char* base = ring + size_t(sl) * slot;
      // mma.sync needs the whole warp: the step test is warp-uniform; lanes past K
      // multiply zeros (TMA's fill for W, explicit for A).
      const int slice_col = k0 + s * kslice;
#pragma unroll 1
      for (int j = warp; j < steps; j += WARPS) {
        const int cc = 32 * j + 8 * c, b = j >> box_step_shift;
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
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty(sl));
      if (++sl == stages) sl = 0, filled_phase ^= 1u;
    }
    if constexpr (kTwoChains) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[r][nt][i] += acc_hi[r][nt][i];
    }
  }
  // Every slice has been consumed, so every copy has landed: the ring's memory now holds
  // the consumer warps' partial sums.
  reduce_and_store<T, NT, WARPS, R>(acc, reinterpret_cast<float*>(ring), a, row_base);
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
    SkinnyArgs args = a;
    args.stages = s.stages, args.kslice = s.kslice;
    const auto kernel = skinny_kernel<TT, N_, WARPS, R>;
    const unsigned threads = (WARPS + 1) * 32;
    const size_t smem = skinny::shared_bytes(WARPS, R, N_, s.stages, s.kslice, a.M);
    const char* what = "skinny kernel: launch";
    allow_dynamic_smem(kernel, smem, what);  // before the occupancy query
    launch_skinny_grid(kernel, args, unsigned((a.N + 16 * R - 1) / (16 * R)), s.splits, threads, smem,
                       a.pdl ? resident_ctas_per_sm(kernel, threads, smem, what) : 0, -1, stream, what);
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
