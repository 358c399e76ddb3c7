// Warpgroup MMA with both operands in shared memory (Hopper wgmma.mma_async, "SS") for the
// tile kernel (tile_linear.cuh): D[64, N] += A[64, 16] B[16, N], N = 64, 128 or 256 tokens, fp32
// accumulators. A (dequantized weights) and B (activations) are K-major with the 128-byte
// swizzle: atoms of 8 rows x 64 elements (1024 bytes, 1024-byte aligned), the 16-byte chunk c
// of row r stored at chunk c ^ (r % 8); the descriptors step 8-row groups by 1024 bytes
// (stride byte offset) and a k16 step by 32 bytes inside the atom (PTX ISA, "Matrix
// Descriptor Format": swizzle mode 1 in bits 62-63, the leading byte offset unused).
// The accumulator fragment of each warp is that of N / 8 mma.m16n8k16 n-tiles, acc[nt][i].
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "wgmma.cuh"         // KBIT_WGMMA, wgmma_fence, wgmma_commit
#include "wgmma_layout.h"  // sw128_offset

namespace kbit::cuda::detail {

// Descriptor of a K-major, 128-byte-swizzled operand starting at smem_addr (an atom's start
// plus 32 bytes per k16 step), 8-row groups 1024 bytes apart.
// Built from two 32-bit halves: only the low one depends on the address, whose bits 4-17 are
// its start-address field. Shared addresses stay below 2^18, so a descriptor's low half plus
// (offset >> 4) is the descriptor of address + offset: a k16 step's descriptor is one add.
__device__ __forceinline__ uint32_t wgmma_desc_sw128_lo(uint32_t smem_addr) {
  return ((smem_addr & 0x3FFFFu) >> 4) | (1u << 16);
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128_from_lo(uint32_t lo) {
  const uint32_t hi = (kSw128AtomBytes >> 4) | (1u << 30);
  uint64_t d;
  asm("mov.b64 %0, {%1, %2};\n" : "=l"(d) : "r"(lo), "r"(hi));
  return d;
}
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t smem_addr) {
  return wgmma_desc_sw128_from_lo(wgmma_desc_sw128_lo(smem_addr));
}

#define KBIT_SS_F4(v, i) "+f"(v[i][0]), "+f"(v[i][1]), "+f"(v[i][2]), "+f"(v[i][3])
#define KBIT_SS_ACC8(v) \
  KBIT_SS_F4(v, 0), KBIT_SS_F4(v, 1), KBIT_SS_F4(v, 2), KBIT_SS_F4(v, 3), KBIT_SS_F4(v, 4), KBIT_SS_F4(v, 5), \
      KBIT_SS_F4(v, 6), KBIT_SS_F4(v, 7)
#define KBIT_SS_ACC16(v) \
  KBIT_SS_ACC8(v), KBIT_SS_F4(v, 8), KBIT_SS_F4(v, 9), KBIT_SS_F4(v, 10), KBIT_SS_F4(v, 11), KBIT_SS_F4(v, 12), \
      KBIT_SS_F4(v, 13), KBIT_SS_F4(v, 14), KBIT_SS_F4(v, 15)
#define KBIT_SS_N64(TY)                                                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                         \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
               "%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"                                               \
               : KBIT_SS_ACC8(d)                                                                                   \
               : "l"(desc_a), "l"(desc_b))
#define KBIT_SS_N128(TY)                                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " "                                        \
               "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26," \
               "%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,"   \
               "%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"               \
               : KBIT_SS_ACC16(d)                                                                                  \
               : "l"(desc_a), "l"(desc_b))

#define KBIT_SS_ACC32(v) \
  KBIT_SS_ACC16(v), KBIT_SS_F4(v, 16), KBIT_SS_F4(v, 17), KBIT_SS_F4(v, 18), KBIT_SS_F4(v, 19), KBIT_SS_F4(v, 20), \
      KBIT_SS_F4(v, 21), KBIT_SS_F4(v, 22), KBIT_SS_F4(v, 23), KBIT_SS_F4(v, 24), KBIT_SS_F4(v, 25), KBIT_SS_F4(v, 26), \
      KBIT_SS_F4(v, 27), KBIT_SS_F4(v, 28), KBIT_SS_F4(v, 29), KBIT_SS_F4(v, 30), KBIT_SS_F4(v, 31)
#define KBIT_SS_N256(TY)                                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                          \
               "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " {"                                       \
               "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,"   \
               "%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,"   \
               "%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,"   \
               "%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,"   \
               "%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,"   \
               "%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"   \
               "}, %128, %129, p, 1, 1, 0, 0;\n}\n"                                                             \
               : KBIT_SS_ACC32(d)                                                                                  \
               : "l"(desc_a), "l"(desc_b))

// One m64nNk16 step, N = 8 * NT (NT = 8, 16 or 32), both operands from shared memory.
template <typename T, int NT>
__device__ __forceinline__ void wgmma_ss(float (&d)[NT][4], uint64_t desc_a, uint64_t desc_b) {
  static_assert(NT == 8 || NT == 16 || NT == 32, "tile items take n_tiles 8, 16 or 32");
#if KBIT_WGMMA
  if constexpr (std::is_same_v<T, __half> && NT == 8) {
    KBIT_SS_N64("f16");
  } else if constexpr (std::is_same_v<T, __half> && NT == 16) {
    KBIT_SS_N128("f16");
  } else if constexpr (std::is_same_v<T, __half>) {
    KBIT_SS_N256("f16");
  } else if constexpr (NT == 8) {
    KBIT_SS_N64("bf16");
  } else if constexpr (NT == 16) {
    KBIT_SS_N128("bf16");
  } else {
    KBIT_SS_N256("bf16");
  }
#else
  __trap();
#endif
}

// Waits until at most PENDING committed wgmma groups of this warpgroup are in flight. The
// accumulators are operands so that the compiler keeps them in place until then.
template <int PENDING, int NT>
__device__ __forceinline__ void wgmma_wait_ss(float (&acc)[NT][4]) {
  static_assert(NT == 8 || NT == 16 || NT == 32, "tile items take n_tiles 8, 16 or 32");
  static_assert(PENDING == 0 || PENDING == 1, "wait for all or all but the last group");
#if KBIT_WGMMA
  if constexpr (NT == 32) {
    if constexpr (PENDING == 0) {
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" : KBIT_SS_ACC32(acc) : : "memory");
    } else {
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" : KBIT_SS_ACC32(acc) : : "memory");
    }
  } else if constexpr (NT == 8) {
    if constexpr (PENDING == 0) {
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" : KBIT_SS_ACC8(acc) : : "memory");
    } else {
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" : KBIT_SS_ACC8(acc) : : "memory");
    }
  } else {
    if constexpr (PENDING == 0) {
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" : KBIT_SS_ACC16(acc) : : "memory");
    } else {
      asm volatile("wgmma.wait_group.sync.aligned 1;\n" : KBIT_SS_ACC16(acc) : : "memory");
    }
  }
#endif
}
#undef KBIT_SS_N256
#undef KBIT_SS_N128
#undef KBIT_SS_ACC32
#undef KBIT_SS_N64
#undef KBIT_SS_ACC16
#undef KBIT_SS_ACC8
#undef KBIT_SS_F4

}  // namespace kbit::cuda::detail
