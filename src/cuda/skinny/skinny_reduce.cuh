// The end of both skinny GEMM kernels (skinny_kernel.cuh, skinny_stream_kernel.cuh): the
// warps' partial sums of a CTA reduced in warp order through shared memory, the CTAs of a
// cluster (K splits) in rank order through distributed shared memory, then bias, residual
// and the store of C. Deterministic: fixed order, no atomics, no workspace.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "../common.cuh"
#include "skinny_args.h"

namespace kbit::cuda::detail {

namespace skinny {

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

// Shared memory the reduction needs: [warps][R * NT * 4][32] floats.
__host__ __device__ constexpr size_t reduction_bytes(int warps, int stripes, int n_tiles) {
  return size_t(warps) * stripes * n_tiles * 4 * 32 * sizeof(float);
}

}  // namespace skinny

// The PDL trigger of both skinny kernels: at entry when the whole grid is resident at once,
// else (SkinnyArgs::pdl_trigger_at_entry) once the CTA's main loop is done.
__device__ __forceinline__ void skinny_pdl_trigger(const SkinnyArgs& a, bool at_entry) {
  if (a.pdl && a.pdl_trigger_at_entry == at_entry) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// Launches one of the skinny kernels over (row groups, splits) with its dynamic shared
// memory, a cluster of `splits` CTAs along y when K is split, and PDL when asked: the
// trigger at entry only when the whole grid is resident at once (`resident_per_sm` CTAs
// per SM; clusters may place fewer, so only one-CTA clusters count). carveout_percent >= 0:
// the shared memory carveout of this launch (a launch attribute, so that each node of a
// captured graph keeps its own). The caller has allowed the kernel `smem`
// (allow_dynamic_smem).
template <typename Kernel>
void launch_skinny_grid(Kernel kernel, const SkinnyArgs& in_args, unsigned row_groups, int splits, unsigned threads,
                        size_t smem, int resident_per_sm, int carveout_percent, cudaStream_t stream, const char* what) {
  SkinnyArgs args = in_args;
  args.pdl_trigger_at_entry = args.pdl && splits == 1 && int64_t(row_groups) <= int64_t(resident_per_sm) * sm_count();
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(row_groups, unsigned(splits));
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[3]{};
  int n = 0;
  if (carveout_percent >= 0) {
    attr[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attr[n].val.sharedMemCarveout = unsigned(carveout_percent);
    ++n;
  }
  if (splits > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 1, attr[n].val.clusterDim.y = unsigned(splits), attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (args.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = attr, cfg.numAttrs = unsigned(n);
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, args), what);
}

// Bias and residual of warp 0's outputs (C^T rows 16 r + g + 8 h, tokens 8 nt + 2 c + j),
// loaded into registers before the main loop so that the last CTAs do not wait a DRAM
// round trip for R after their last MMA. Kept as loaded, in 16-bit pairs, and added in
// the order of the late path ((acc + bias) + R). Outputs past N or M read a valid element
// that is never stored; absent bias or R read as 0. Only after the previous kernel is
// complete (griddepcontrol.wait under PDL).
template <typename T, int NT, int R>
struct EpilogueAddends {
  using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  Pair residual[R][2][NT];  // .x: token 8 nt + 2 c, .y: the next token, of row 16 r + g + 8 h
  Pair bias[R];             // .x: row 16 r + g, .y: row 16 r + g + 8
};

template <typename T, int NT, int R>
__device__ __forceinline__ void load_epilogue_addends(EpilogueAddends<T, NT, R>& e, const SkinnyArgs& a,
                                                      int row_base) {
  const int lane = int(threadIdx.x & 31), g = lane >> 2, c = lane & 3;
  const T* bias = static_cast<const T*>(a.bias);
  const T* res = static_cast<const T*>(a.residual);
  const T zero = Element<T>::from_float(0.0f);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = min(row_base + 16 * r + g + 8 * h, a.N - 1);
      const T bv = bias ? bias[row] : zero;
      (h == 0 ? e.bias[r].x : e.bias[r].y) = bv;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int t0 = min(nt * 8 + 2 * c, a.M - 1), t1 = min(nt * 8 + 2 * c + 1, a.M - 1);
        e.residual[r][h][nt].x = res ? res[int64_t(t0) * a.ldr + row] : zero;
        e.residual[r][h][nt].y = res ? res[int64_t(t1) * a.ldr + row] : zero;
      }
    }
}

// acc: C^T rows (16 r + g, 16 r + g + 8) x tokens (8 nt + 2 c, + 1) of warp `warp`'s K
// range; warps 0..WARPS-1 hold partial sums, any further warps (the ring kernel's
// producer) only take part in the barriers. `red`: reduction_bytes() of shared memory
// that nothing else uses any more. kAddendsLoaded: warp 0 has `add` from
// load_epilogue_addends (the stream kernel); otherwise it reads bias and R here, after
// the last MMA (the ring kernel: its 2-4 stripes would hold up to 32 more registers
// through its loop). Every thread of the CTA must call it.
template <typename T, int NT, int WARPS, int R, bool kAddendsLoaded = false>
__device__ __forceinline__ void reduce_and_store(float (&acc)[R][NT][4], float* red, const SkinnyArgs& a,
                                                 int row_base, const EpilogueAddends<T, NT, R>& add = {}) {
  using namespace skinny;
  constexpr int kAcc = R * NT * 4;
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int splits = int(gridDim.y);
  skinny_pdl_trigger(a, false);  // grids of more than one wave: the next kernel once the loops are done
  __syncthreads();

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
      const float bv = kAddendsLoaded ? Element<T>::to_float(h == 0 ? add.bias[r].x : add.bias[r].y)
                       : bias         ? Element<T>::to_float(bias[row])
                                      : 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int tok = nt * 8 + 2 * c + j;
          if (tok >= a.M) continue;
          float v = acc[r][nt][2 * h + j] + bv;
          if constexpr (kAddendsLoaded)
            v += Element<T>::to_float(j == 0 ? add.residual[r][h][nt].x : add.residual[r][h][nt].y);
          else if (res)
            v += Element<T>::to_float(res[int64_t(tok) * a.ldr + row]);
          y[int64_t(tok) * a.ldy + row] = Element<T>::from_float(v);
        }
    }
}

}  // namespace kbit::cuda::detail
