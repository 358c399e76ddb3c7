// Warpgroup MMA (Hopper wgmma.mma_async) for the fused kernel's wgmma items
// (fused_linear.cuh): D[64, N] += A[64, 16] B[16, N] with A, the dequantized weights of the
// warpgroup's four 16-row stripes, in registers (each warp's fragment laid out as the A
// operand of mma.m16n8k16) and B, 16 columns of N = 8 * NT tokens' activations, in shared
// memory without swizzle: 8 x 16-byte core matrices, the two K halves LBO bytes apart, the
// 8-token groups SBO bytes apart (K-major, imm-trans-b = 0). The accumulator fragment of each
// warp is that of NT mma.m16n8k16 n-tiles, acc[nt][i], so the fused kernel's epilogue takes it
// unchanged.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

// wgmma exists on sm_90a only: other targets compile these to a trap (the host never
// launches wgmma items there: device_has_wgmma).
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KBIT_WGMMA 1
#else
#define KBIT_WGMMA 0
#endif

namespace kbit::cuda::detail {

// Shared-memory matrix descriptor, no swizzle: address, leading (K) and stride (M/N) byte
// offsets, each encoded >> 4 (PTX ISA, "Matrix Descriptor Format").
__device__ __forceinline__ uint64_t wgmma_desc_no_swizzle(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((smem_addr & 0x3FFFFu) >> 4) | (uint64_t((lbo >> 4) & 0x3FFFu) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFFu) << 32);
}

// Shared-memory writes of the generic proxy (st.shared, cp.async) made visible to wgmma's
// async proxy: after the writes have landed, before the barrier that releases them.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() {
#if KBIT_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if KBIT_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

// Asm operands: the 4 accumulators of n-tile i of v (floats, read and written).
#define KBIT_WGMMA_F4(v, i) "+f"(v[i][0]), "+f"(v[i][1]), "+f"(v[i][2]), "+f"(v[i][3])
// One m64nNk16 step, N = 8 * NT (NT = 4 or 8), accumulating into d (TY: the PTX type).
#define KBIT_WGMMA_RS_N32(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, " \
               "{%16,%17,%18,%19}, %20, p, 1, 1, 0;\n}\n" \
               : KBIT_WGMMA_F4(d, 0), KBIT_WGMMA_F4(d, 1), KBIT_WGMMA_F4(d, 2), KBIT_WGMMA_F4(d, 3) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))
#define KBIT_WGMMA_RS_N64(TY) \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n" \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, " \
               "{%32,%33,%34,%35}, %36, p, 1, 1, 0;\n}\n" \
               : KBIT_WGMMA_F4(d, 0), KBIT_WGMMA_F4(d, 1), KBIT_WGMMA_F4(d, 2), KBIT_WGMMA_F4(d, 3), KBIT_WGMMA_F4(d, 4), KBIT_WGMMA_F4(d, 5), \
                 KBIT_WGMMA_F4(d, 6), KBIT_WGMMA_F4(d, 7) \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc))

template <typename T, int NT>
__device__ __forceinline__ void wgmma_rs(float (&d)[NT][4], const uint32_t (&a)[4], uint64_t desc) {
  static_assert(NT == 4 || NT == 8, "wgmma items take n_tiles 4 or 8");
#if KBIT_WGMMA
  if constexpr (std::is_same_v<T, __half> && NT == 4) {
    KBIT_WGMMA_RS_N32("f16");
  } else if constexpr (std::is_same_v<T, __half>) {
    KBIT_WGMMA_RS_N64("f16");
  } else if constexpr (NT == 4) {
    KBIT_WGMMA_RS_N32("bf16");
  } else {
    KBIT_WGMMA_RS_N64("bf16");
  }
#endif
}

// Waits for every committed wgmma of this warpgroup. The accumulators and the A fragments
// are operands, so that the compiler neither reads the former nor reuses the latter's
// registers before the asynchronous MMAs are done with them.
// The 4 words of A fragment i of a; all 8 fragments.
#define KBIT_WGMMA_AFR4(i) "+r"(a[i][0]), "+r"(a[i][1]), "+r"(a[i][2]), "+r"(a[i][3])
#define KBIT_WGMMA_AFR_ALL \
  KBIT_WGMMA_AFR4(0), KBIT_WGMMA_AFR4(1), KBIT_WGMMA_AFR4(2), KBIT_WGMMA_AFR4(3), KBIT_WGMMA_AFR4(4), \
      KBIT_WGMMA_AFR4(5), KBIT_WGMMA_AFR4(6), KBIT_WGMMA_AFR4(7)
template <int NT>
__device__ __forceinline__ void wgmma_wait_all(float (&acc)[NT][4], uint32_t (&a)[8][4]) {
  static_assert(NT == 4 || NT == 8, "wgmma items take n_tiles 4 or 8");
#if KBIT_WGMMA
  if constexpr (NT == 4) {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n"
                 : KBIT_WGMMA_F4(acc, 0), KBIT_WGMMA_F4(acc, 1), KBIT_WGMMA_F4(acc, 2), KBIT_WGMMA_F4(acc, 3), KBIT_WGMMA_AFR_ALL
                 :
                 : "memory");
  } else {
    asm volatile("wgmma.wait_group.sync.aligned 0;\n"
                 : KBIT_WGMMA_F4(acc, 0), KBIT_WGMMA_F4(acc, 1), KBIT_WGMMA_F4(acc, 2), KBIT_WGMMA_F4(acc, 3), KBIT_WGMMA_F4(acc, 4),
                   KBIT_WGMMA_F4(acc, 5), KBIT_WGMMA_F4(acc, 6), KBIT_WGMMA_F4(acc, 7), KBIT_WGMMA_AFR_ALL
                 :
                 : "memory");
  }
#endif
}
#undef KBIT_WGMMA_AFR_ALL
#undef KBIT_WGMMA_AFR4
#undef KBIT_WGMMA_RS_N64
#undef KBIT_WGMMA_RS_N32
#undef KBIT_WGMMA_F4

}  // namespace kbit::cuda::detail
