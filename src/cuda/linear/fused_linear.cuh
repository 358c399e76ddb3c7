// Fused dequantize + tensor-core GEMM: y[M, N] = x[M, K] W^T (+ bias) (+ residual),
// W in the mma16 layout (layout.h), x and y fp16 or bf16, fp32 accumulation.
//
// Computes y^T = W x^T with mma.sync.m16n8k16: the decoded weights are the A
// operand (16 rows of W), the tokens the narrow n = 8 dimension (B operand, read
// straight from x in global memory: the mma16 layout puts each lane's k positions
// on 8 consecutive elements of x, one 16-byte load per block and n-tile).
// Per lane and supertile (16 rows x 128 columns): k 8-byte weight loads (streamed,
// evict-first), one 8-byte scale load; 32 pairs decoded into half2/bfloat162 A
// registers, each multiplied by its block scale (one mul.f16x2/bf16x2 per pair),
// 8 MMAs per n-tile accumulating straight into fp32.
// Decode: k=2 looks a pair up with one prmt from a 4-level codebook held in two
// registers (selector = index * 0x11 + 0x40 per byte: lo byte from pool 0-3, hi
// byte from pool 4-7); k=3..5 look a pair code (2k bits) up in a shared-memory
// table of packed pairs, replicated per lane (k=5: per 8 lanes) so that lookups
// never conflict on a bank (k=5: a pair code's high bits sit in the byte of its low
// bits' byte index, so one shift and one mask serve a k-step's four pairs; this kernel's
// table items still take a shift and a mask per pair, see decode_pairs). Scales as exact packed pairs: fp16
// bits byte << 6 are E4M4 / 16 (subnormals included); bf16 bits byte << 3 are E4M4 * 16 * 2^-116, the
// levels carrying 2^116 (scale_bits_pair_bf16; scale_pair's fp32 route where excluded).
// Launch: persistent CTAs (SMs x resident CTAs) of WARPS warps sharing the table; a PDL
// launch of a one-wave grid gets shared memory room for its even share of CTAs per SM only
// (Qwen3 k = 4, M = 8..16, chained: up to 28% faster, 2026-12-01).
// Items are (stripe, K split, token tile), handed out by FusedShape::items: a CTA shares
// each item among its warps (cta: supertiles interleaved, warps reduced through shared
// memory in warp order), each warp runs whole items on its own (warp), or a CTA takes
// WARPS adjacent stripes, one per warp, in lock step with the activations copied once per
// CTA into a shared-memory ring (stripes). D supertiles of weight loads in flight per
// warp (clamped, branch-free); the activations one supertile ahead in registers for
// n_tiles = 1 (M <= 8) in warp and cta modes, in a per-warp shared-memory ring at n_tiles 2
// for items without a pair table (fused_warp_x_ring). wgmma items (sm_90a, n_tiles 4 or 8): stripes
// items of one or two warpgroups whose ring holds x as wgmma core matrices (each 16-byte chunk of x
// scattered as four pairs to match the mma16 k order); per supertile each warp decodes its 8
// A fragments and each warpgroup issues 8 wgmma.mma_async m64nNk16 (N = 32 or 64 tokens)
// that read B from the ring (wgmma.cuh). Splits are reduced through an fp32 workspace by
// the last warp to arrive (a counter, not float atomics), in split order, so
// results are bit-identical run to run. Empty splits never exist (host side).
// Grouped mode (kbit::expert_linear, FusedArgs::expert_offsets set): W stacks the
// experts, each CTA first tabulates the token tiles of every expert from the device
// offsets, and items are (tile, stripe) over non-empty experts only (no splits);
// checked against the CPU reference on the H200 (tests/cuda/moe_gpu_test.cpp).
// Measured (H200, 2026-12-04, fifty-ninth session, commits 5c8ff98 / a809c48, cuBLAS bf16 in the same
// run; BENCHMARKS.md): every dense projection of shapes.json at every k faster than cuBLAS bf16 at M = 8,
// 9, 12 and 16 (72 of 72 rows each). M = 16: glm47 q k = 2 / 3 / 4 / 5 20.56 / 21.13 / 21.45 / 28.13 us
// (cuBLAS 34.22; 1.59x at k = 4), shared_gu k = 4 35.29 (1.69x), glm47 moe_dn k = 5 6.68 (6.79), Kimi
// latent k = 5 15.00 (15.48). Latency-bound at n_tiles 2 (ncu: ~2.4 active warps per scheduler, the
// MMA and decode chains of each warp set the pace). Each change and its A/B: docs/KERNEL_HISTORY.md.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>

#include "../bulk_copy.cuh"
#include "../common.cuh"
#include "kbit/cuda.h"
#include "fused_args.h"
#include "wgmma.cuh"
#include "wgmma_layout.h"

namespace kbit::cuda::detail {

// k = 3: 256 entries indexed by a whole byte whose bits 6-7 belong to other pairs
// (layout.h), so the table repeats its 64 pairs four times and no mask is needed.
template <int KB>
struct PairLut {
  static constexpr int entries = KB == 2 ? 0 : KB == 3 ? 256 : 1 << (2 * KB);
  static constexpr int replicas = KB == 5 ? 8 : 32;
  static constexpr int words = entries * replicas;  // 32 KB at most
};

__device__ __forceinline__ uint2 load_stream(const uint2* p) {
  uint2 v;
  asm volatile("ld.global.cs.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

// a * s on packed pairs (fp16x2 or bf16x2), one rounding.
template <typename T>
__device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t s) {
  uint32_t d;
  if constexpr (std::is_same_v<T, __half>) {
    asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(s));
  } else {
    asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(s));
  }
  return d;
}

// Block scale byte j of a lane's scale word as an fp32 value, exact (subnormals included):
// E4M4 * 16, the value scale_pair<bf16> packs (so its tensor-scale factor is 1).
__device__ __forceinline__ float scale_float(uint32_t word, int j) {
  return __uint_as_float(__byte_perm(word, 0u, 0x4440u + j) << 19) * 0x1p116f;
}
// Block scale byte j of a lane's scale word as a packed pair (s, s), exact:
// fp16 holds E4M4 / 16 as the bits byte << 6 (E4M4 subnormals become fp16
// subnormals; the 16 goes into the tensor scale), bf16 goes through fp32.
template <typename T>
__device__ __forceinline__ uint32_t scale_pair(uint32_t word, int j) {
  if constexpr (std::is_same_v<T, __half>) {
    return __byte_perm(word, 0u, 0x4440u + j) * 0x00400040u;
  } else {
    const float f = scale_float(word, j);
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;\n" : "=r"(d) : "f"(f));
    return d;
  }
}
template <typename T>
constexpr float kScalePairFactor = std::is_same_v<T, __half> ? 16.0f : 1.0f;
// bf16 in two instructions where scale_pair takes four (prmt, shift, fmul, cvt): the bits
// byte << 3 of both halves, read as bf16, are E4M4 * 16 * 2^-116 (the fields line up as in
// scale_float; E4M4 subnormals become bf16 subnormals, which mul.bf16x2 keeps:
// GpuLinear.SubnormalBlockScales), so the levels it multiplies carry the 2^116
// (scaled_level), and each product level * E4M4 * 16 is the one scale_pair gives, rounded once.
__device__ __forceinline__ uint32_t scale_bits_pair_bf16(uint32_t word, int j) {
  return __byte_perm(word, 0u, 0x4040u + 0x0101u * uint32_t(j)) << 3;
}
// A level (x's 16-bit type, bits) for scale_bits_pair_bf16: bf16 times 2^116, exact (|level| <= 1,
// so no overflow); unchanged otherwise.
template <bool kScaled>
__device__ __forceinline__ uint32_t scaled_level(uint32_t bits) {
  if constexpr (kScaled) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(__uint_as_float(bits << 16) * 0x1p116f));
  } else {
    return bits;
  }
}


__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;\n" ::"r"(addr), "r"(v));
}
__device__ __forceinline__ void sts128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

// One entry: the levels of the pair code's low and high KB bits, as a packed pair (bits of the
// code above 2 KB are ignored: k = 3's codes are bytes).
template <int KB>
__device__ __forceinline__ uint32_t pair_table_entry(const uint32_t (&cb16)[32], int code) {
  return cb16[code & ((1 << KB) - 1)] | cb16[(code >> KB) & ((1 << KB) - 1)] << 16;
}

// k >= 3's pair table at shared address lut (the fused kernel's PairLut: the levels of two
// codes per 32-bit entry, 32 replicas so that every lane reads its own bank, k = 5 8): one
// load + one prmt + one multiply-add per pair where shuffles take two of each and a prmt.
// Every thread of the CTA calls it; the caller's next barrier publishes the table.
template <int KB>
__device__ __forceinline__ void fill_pair_table(uint32_t lut, const uint16_t (&codebook16)[32], uint32_t (&cb16)[32]) {
  using Lut = PairLut<KB>;
  if (threadIdx.x < (1 << KB)) cb16[threadIdx.x] = codebook16[threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.x; i < Lut::words / 4; i += int(blockDim.x)) {
    const uint32_t v = pair_table_entry<KB>(cb16, i * 4 / Lut::replicas);
    sts128(lut + uint32_t(i) * 16, make_uint4(v, v, v, v));
  }
}

// k = 3, block 3: the four pair codes of k-step s, one per byte (bits 6-7 are noise):
// bit pair m of each code sits in bits 6-7 of the same byte of word 3s + m (layout.h).
__device__ __forceinline__ uint32_t k3_gathered_codes(const uint32_t (&w)[6], int s) {
  const uint32_t t0 = w[3 * s] >> 6, t1 = w[3 * s + 1] >> 4, t2 = w[3 * s + 2] >> 2;
  const uint32_t u = (t0 & 0x03030303u) | (t1 & ~0x03030303u);
  return (u & 0x0f0f0f0fu) | (t2 & ~0x0f0f0f0fu);
}

// k = 5: where k-step s of block j keeps its pairs' code bits 8-9: word k5_high_word(j), pair r's at
// bit 8 * r + k5_high_shift(j, s) (bit 9 above it). layout.h's mma16_code_bit(5, 8j + 4s + r, 8) written
// out in j and s, checked against it by Mma16.K5HighBitsSitInTheLowBytesIndex.
__device__ __forceinline__ int k5_high_word(int j) { return 8 + j / 2; }
__device__ __forceinline__ int k5_high_shift(int j, int s) { return 2 * (2 * (j % 2) + s); }
// k = 5: the high code bits (8-9) of k-step s of block j's four pairs, pair r's in byte r:
// one shift and one mask per k-step. Word and shift written out as in k5_high_word / k5_high_shift:
// through those helpers NVVM emitted other PTX for the GEMV at M = 2..4 (the timed code is this).
__device__ __forceinline__ uint32_t k5_high_bytes(const uint32_t (&w)[10], int j, int s) {
  return (w[8 + j / 2] >> (2 * (2 * (j % 2) + s))) & 0x03030303u;
}
// k = 5: pair r's 10-bit code from byte r of the low bytes and byte r of the high bytes, in one
// prmt (bytes 2-3 replicate the high byte's sign bit, which is zero).
__device__ __forceinline__ uint32_t k5_pair_code(uint32_t codes, uint32_t high, int r) {
  uint32_t v;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(v) : "r"(codes), "r"(high), "r"(0xcc40u + 0x1111u * uint32_t(r)));
  return v;
}

// The pair codes of k-step s of block j, one per byte (k = 5: their low 8 bits).
template <int KB>
__device__ __forceinline__ uint32_t pair_code_bytes(const uint32_t (&w)[2 * KB], int j, int s) {
  if constexpr (KB == 3) {
    return j < 3 ? w[2 * j + s] : k3_gathered_codes(w, s);
  } else {
    return w[2 * j + s];
  }
}

// A registers (a0..a3) of k-step s of block j from a lane's 2k words. lut_lane is the
// shared-memory address of this lane's replica of entry 0; entries are Replicas * 4 bytes apart.
// k = 5: kJoinHigh joins each pair code in one prmt (k5_pair_code; GEMV at M = 1, 4: 6-14%
// faster, H200 2026-12-04); without it each pair's high bits take a shift and a mask of
// their own, and the k-step keeps no extra register: the fused kernel's table items, where
// the joined form measured -1.1..+1.7% by plan class and spilled 8 bytes in cta items at
// n_tiles 1 (127 -> 128 registers).
template <int KB, int Replicas = PairLut<KB>::replicas, bool kJoinHigh = true>
__device__ __forceinline__ void decode_pairs(const uint32_t (&w)[2 * KB], int j, int s, uint32_t lut_lane,
                                             uint32_t pool_lo, uint32_t pool_hi, uint32_t (&a)[4]) {
  constexpr uint32_t stride = Replicas * 4;
  if constexpr (KB == 2) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t idx = (w[j] >> (4 * s + 2 * h)) & 0x03030303u;
      const uint32_t sel = idx * 0x11u + 0x40404040u;
      a[2 * h] = __byte_perm(pool_lo, pool_hi, sel);
      a[2 * h + 1] = __byte_perm(pool_lo, pool_hi, sel >> 16);
    }
  } else {
    [[maybe_unused]] uint32_t high = 0;
    if constexpr (KB == 5 && kJoinHigh) high = k5_high_bytes(w, j, s);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      uint32_t addr;
      if constexpr (KB == 4) {
        addr = __byte_perm(w[2 * j + s], 0u, 0x4440u + r) * stride + lut_lane;  // PRMT + IMAD
      } else if constexpr (KB == 3) {
        addr = __byte_perm(j < 3 ? w[2 * j + s] : k3_gathered_codes(w, s), 0u, 0x4440u + r) * stride + lut_lane;
      } else if constexpr (kJoinHigh) {
        addr = k5_pair_code(w[2 * j + s], high, r) * stride + lut_lane;  // PRMT + IMAD, as k = 4
      } else {
        const uint32_t lo = __byte_perm(w[2 * j + s], 0u, 0x4440u + r);
        const uint32_t hi = (w[k5_high_word(j)] >> (8 * r + k5_high_shift(j, s))) & 3u;
        addr = lo * stride + (hi * (256 * stride) + lut_lane);
      }
      a[r] = lds32(addr);
    }
  }
}

// The same A registers with no table (cta_shuffle items): lane l holds level l mod 2^k in
// cb_lane (x's 16-bit type in the low half) and each element's level comes from the
// lane its code names. shfl.idx reads only bits 0-4 of the lane index, so a code needs no
// mask when the bits above it are another code's (k = 3, 4: the lane index may carry up
// to 5 - k bits of the neighbour, and lanes l and l + 2^k hold the same level).
// k = 5, kMergedHigh: element 1's indices of the k-step's four pairs in one word (below);
// otherwise one prmt per pair joins its code (k5_pair_code). Merged, cta_shuffle items at
// n_tiles 2 ran 1.2-1.4% faster and at n_tiles 1 3-5.5% slower (H200, 2026-12-04, M = 12, 16).
template <int KB, bool kMergedHigh = false>
__device__ __forceinline__ void decode_pairs_shuffle(const uint32_t (&w)[2 * KB], int j, int s, uint32_t cb_lane,
                                                     uint32_t (&a)[4]) {
  static_assert(KB >= 3 && KB <= 5, "k = 2 decodes from its register pool");
  const uint32_t codes = pair_code_bytes<KB>(w, j, s);
  // k = 5: element 1's index of pair r in bits 0-4 of byte r of one word (bits 5-7 are the
  // shuffles' don't-care): code bits 5-7 from byte r of the codes, bits 8-9 from byte r of the
  // high word (k5_high_shift), merged by one lop3. Three instructions per k-step where a prmt and
  // a shift per pair took eight.
  [[maybe_unused]] uint32_t hi_indices = 0, high = 0;
  if constexpr (KB == 5 && !kMergedHigh) high = k5_high_bytes(w, j, s);
  if constexpr (KB == 5 && kMergedHigh) {
    constexpr uint32_t kHighBits = 0x18181818u;  // bits 3-4 of each byte
    const int bit = k5_high_shift(j, s);  // pair 0's bit 8, in byte 0
    const uint32_t hw = w[k5_high_word(j)];
    const uint32_t shifted = bit < 3 ? hw << (3 - bit) : hw >> (bit - 3);  // bits 8-9 -> bits 3-4 of each byte
    hi_indices = (shifted & kHighBits) | ((codes >> 5) & ~kHighBits);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const uint32_t lo_index = codes >> (8 * r);  // element 0: bits 0..k-1 of byte r
    uint32_t hi_index;                           // element 1: bits k..2k-1 of the pair code
    if constexpr (KB == 5 && kMergedHigh) {
      hi_index = hi_indices >> (8 * r);
    } else if constexpr (KB == 5) {
      hi_index = k5_pair_code(codes, high, r) >> 5;  // the 10-bit code, zero above
    } else {
      hi_index = codes >> (8 * r + KB);
    }
    const uint32_t lo = __shfl_sync(0xffffffffu, cb_lane, int(lo_index));
    const uint32_t hi = __shfl_sync(0xffffffffu, cb_lane, int(hi_index));
    a[r] = __byte_perm(lo, hi, 0x5410u);
  }
}

// 8 consecutive activations (raw 16-bit values) of token t from column col; zeros past M or K.
__device__ __forceinline__ uint4 load_x8(const uint16_t* x, int64_t ldx, int M, int K, bool vec, int t, int col) {
  uint4 v = make_uint4(0, 0, 0, 0);
  if (t < M) {
    const uint16_t* p = x + int64_t(t) * ldx + col;
    if (vec && col + 8 <= K) {
      v = __ldg(reinterpret_cast<const uint4*>(p));
    } else {
      uint32_t e[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) e[i] = col + i < K ? p[i] : 0u;
      v = make_uint4(e[0] | e[1] << 16, e[2] | e[3] << 16, e[4] | e[5] << 16, e[6] | e[7] << 16);
    }
  }
  return v;
}

// Grouped mode: table[e] = token tiles of experts before e (tiles of `rows` rows),
// table[E] = all tiles. Every thread turns one expert's offsets into its tile count
// (all loads in flight at once, where one warp used to walk E / 32 offsets per lane,
// one global latency each; measured on the H200 at b216b93 this did not change the
// grouped calls' fixed cost, NOTES.md). Then warp 0 scans the counts: lane l sums a run
// of `per` experts (per odd, so the 32 lanes' reads fall in 32 banks), one warp scan of
// the 32 sums, and each lane writes its run's prefixes. It was a scan of 32 experts at a
// time, E / 32 dependent rounds of five shuffles: ~0.6 us more before the first weight
// load with Qwen3's 512 experts than with GLM-4.7's 160 (the probe, 39483e9).
__device__ __forceinline__ void build_tile_table(const int32_t* offsets, int experts, int rows, int32_t* table) {
  for (int e = int(threadIdx.x); e < experts; e += int(blockDim.x))
    table[e] = (offsets[e + 1] - offsets[e] + rows - 1) / rows;
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = int(threadIdx.x);
    const int per = ((experts + 31) / 32) | 1;
    const int e0 = min(lane * per, experts), e1 = min(e0 + per, experts);
    int sum = 0;
    for (int e = e0; e < e1; ++e) sum += table[e];
    const int incl = warp_inclusive_sum(sum, lane);
    int run = incl - sum;
    for (int e = e0; e < e1; ++e) {
      const int count = table[e];
      table[e] = run;
      run += count;
    }
    if (lane == 31) table[experts] = incl;
  }
  __syncthreads();
}

// Items = stripes: the WARPS warps of a CTA take adjacent 16-row stripes over the same
// K range, in lock step, and read the activations from a ring of kFusedXSlots tiles in
// shared memory that the whole CTA fills with cp.async one supertile ahead of use (every
// warp loading its own copy of x read 2-4x W's bytes per supertile from L1/L2 at M = 16:
// ncu, 46% of stalls on L1TEX, L1 hit rate 47%). Tile rows of 256 bytes (128 columns),
// 16-byte chunks XOR-swizzled by 4 (row & 1): conflict-free fragment reads.
constexpr int kFusedXSlots = 3;
constexpr int kFusedXRowBytes = 128 * 2;
// Items without a pair table at n_tiles 2 (cta_shuffle, and cta at k = 2; M = 9..16): each
// warp copies its own supertiles' activations into a ring of two slots in the same tile
// layout, one supertile ahead, where they loaded x when they used it (registers for a
// prefetch: 64 of 128), an L2 round trip per supertile on each warp's path (ncu, glm47 moe_dn
// M = 16 k = 4: 42% of the stall samples long-scoreboard, on the MMAs waiting for x; 13% at
// M = 8, which prefetches into registers). A/B on the H200 (2026-12-04, every dense M = 16 row):
// glm47 moe_dn k = 4 7.01 -> 6.35 us, kv k = 5 10.36 -> 9.15, Qwen3 q k = 2 6.53 -> 5.37. With
// the pair table (cta, k >= 3) the ring's 64 KB per CTA of 8 warps leaves L1 too little of x:
// 11-16% slower, so those items keep their loads. History: three slots, and a lane per row
// copying 8 chunks (32 lines per copy instruction), made these rows 1.5-2.3x slower.
// The next supertile's copy is issued before this one's is waited for (H200, 2026-12-04, A/B
// of every dense row at M = 12, 16, two rounds): ring plans 1.1-1.7% faster by plan class
// (Qwen3 lin_k k = 2 M = 16 4.21 -> 4.06 us), geomean 0.992 over all rows, none slower than
// noise. Three slots with the early copy: 1.8-5.1% slower by class (48 KB of ring per CTA
// of 4 warps leaves L1, which serves x to the SM's other CTAs, ~28 KB).
template <int KB, int NT, FusedItems ITEMS>
constexpr bool fused_warp_x_ring() {
  return NT == 2 && (ITEMS == FusedItems::cta_shuffle || (ITEMS == FusedItems::cta && KB == 2));
}
constexpr int kFusedWarpXSlots = 2;
template <int KB, int NT, FusedItems ITEMS>
constexpr int fused_warp_x_slots() {
  return fused_warp_x_ring<KB, NT, ITEMS>() ? kFusedWarpXSlots : 0;
}
template <int KB, int NT, int WARPS, FusedItems ITEMS>
constexpr size_t fused_x_ring_bytes() {
  if constexpr (items_share_x(ITEMS)) return size_t(kFusedXSlots) * NT * 8 * kFusedXRowBytes;
  return size_t(fused_warp_x_slots<KB, NT, ITEMS>()) * WARPS * NT * 8 * kFusedXRowBytes;
}

template <int KB>
struct Stage {
  uint2 w[KB];
  uint2 scales;
};

// k = 2's four levels (x's 16-bit type) as two byte pools for decode_pairs' prmt: low
// bytes in pool_lo, high bytes in pool_hi.
// kScaled: the levels times 2^116 (scaled_level).
template <bool kScaled = false>
__device__ __forceinline__ void k2_level_pools(const uint16_t (&codebook16)[32], uint32_t& pool_lo, uint32_t& pool_hi) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t v = scaled_level<kScaled>(codebook16[i]);
    pool_lo |= (v & 0xffu) << (8 * i);
    pool_hi |= (v >> 8) << (8 * i);
  }
}

// One supertile's weight words (streamed, evict-first) and block scales of a lane, from its
// stripe's words wbase and scales sbase. Never branches: supertiles past the warp's last
// are clamped to it (loaded again, not used).
template <int KB>
__device__ __forceinline__ void load_weight_stage(Stage<KB>& sg, const uint2* wbase, const uint2* sbase, int st,
                                                  int st_last) {
  const int sc = min(st, st_last);
  const uint2* p = wbase + sc * (int64_t(KB) * 32);
#pragma unroll
  for (int u = 0; u < KB; ++u) sg.w[u] = load_stream(p + u * 32);
  sg.scales = __ldg(sbase + int64_t(sc) * 8);
}

// The end of an item, per warp: its accumulators (rows of `stripe`, tokens m0..) are a
// K split's partial when the item is one of several splits (the last split to arrive sums
// them in split order, no float atomics), then scaled, biased, added to the residual and
// stored. Shared by the fused kernel and the tile kernel (tile_linear.cuh), whose A rows
// are permuted (kPermutedRows: accumulator row r of each 8 holds the stripe's row
// tile_row_of(r); see there).
__host__ __device__ constexpr int tile_row_of(int r) { return ((r & 3) << 1) | (r >> 2); }
// Whether y, the bias and the residual allow store_full_tile's 4-byte pair stores.
__device__ __forceinline__ bool pair_stores_allowed(const FusedArgs& args) {
  auto aligned4 = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 3u) == 0; };
  return aligned4(args.y) && args.ldy % 2 == 0 && (!args.bias || aligned4(args.bias)) &&
         (!args.residual || (aligned4(args.residual) && args.ldr % 2 == 0));
}

// The epilogue for a tile whose 16 rows are all below N (K splits already summed), with y,
// the bias and the residual 4-byte aligned and their leading dimensions even
// (pair_stores_allowed): rows 2p and 2p + 1 of the stripe sit in lanes l and l ^ 4 (or
// l ^ 16 with kPermutedRows: lane G of a quarter warp holds row tile_row_of(G)); one
// shuffle hands each lane its neighbour's value, and the lane with the even row stores
// token t0's pair, the other token t1's, as one 4-byte store (tokens from m_end on: none).
// Every value goes through the same operations in the same order as finish_item's generic
// stores (scale, bias, residual, one rounding), so the results are bit-identical to them.
// The generic stores spent ~5000 instructions per item and warp (ncu, glm47 q M = 4096,
// 256 tokens).
template <typename T, int NT, bool kPermutedRows>
__device__ __forceinline__ void store_full_tile_general(const FusedArgs& args, const float (&acc)[NT][4], int stripe,
                                                        int m0, int m_end, float ts) {
  constexpr int kPartner = kPermutedRows ? 16 : 4;
  const int lane = threadIdx.x & 31, c = lane & 3;
  const bool odd = (lane & kPartner) != 0;  // this lane's row is 2p + 1
  const int g = kPermutedRows ? tile_row_of(lane >> 2) : lane >> 2;
  const int row0 = stripe * 16 + (g & ~1);  // the pair's even row (and + 8)
  const T* bias = static_cast<const T*>(args.bias);
  const T* res = static_cast<const T*>(args.residual);
  float b[2][2] = {};
  if (bias) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
#pragma unroll
      for (int e = 0; e < 2; ++e) b[hh][e] = Element<T>::to_float(bias[row0 + 8 * hh + e]);
  }
  const int t_first = m0 + 2 * c + (odd ? 1 : 0);  // the token this lane stores, n-tile 0
  T* y = static_cast<T*>(args.y) + int64_t(t_first) * args.ldy + row0;
  const T* r = res ? res + int64_t(t_first) * args.ldr + row0 : nullptr;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // rows row0 + 8 hh, + 1
      const float v0 = acc[nt][2 * hh] * ts, v1 = acc[nt][2 * hh + 1] * ts;  // tokens t0, t1 of this lane's row
      const float recv = __shfl_xor_sync(0xffffffffu, odd ? v0 : v1, kPartner);
      if (t_first + nt * 8 >= m_end) continue;
      float lo = odd ? recv : v0, hi = odd ? v1 : recv;  // rows 2p, 2p + 1 of the stored token
      if (bias) lo += b[hh][0], hi += b[hh][1];
      if (r) {
        const T* rp = r + int64_t(nt) * 8 * args.ldr + 8 * hh;
        lo += Element<T>::to_float(rp[0]), hi += Element<T>::to_float(rp[1]);
      }
      T pair[2] = {Element<T>::from_float(lo), Element<T>::from_float(hi)};
      *reinterpret_cast<uint32_t*>(y + int64_t(nt) * 8 * args.ldy + 8 * hh) = *reinterpret_cast<const uint32_t*>(pair);
    }
  }
}

// (v0, v1) rounded to T and packed, v0 in the low half: the rounding of Element<T>::from_float.
template <typename T>
__device__ __forceinline__ uint32_t pack_rounded(float v0, float v1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "x and y are fp16 or bf16");
  uint32_t d;
  if constexpr (std::is_same_v<T, __half>) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(v1), "f"(v0));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(v1), "f"(v0));
  }
  return d;
}

// store_full_tile_general without a bias or a residual, in ~7 instructions per stored pair
// instead of ~35: each lane rounds its two tokens into one packed word, swaps it with its
// partner and picks its pair with one byte permute. Same values (one multiply, one rounding).
// The general form's ~2240 instructions per warp and 256-token tile ran cold from the
// instruction cache after every tile (ncu, glm47 q M = 512 k = 4: 29% of the epilogue's stall
// samples were no_inst, and the epilogue took 14% of the MMA warps' time; 7-9% with this one).
// A/B in one binary (H200, 2026-12-03, k = 4, all models' dense shapes, two rounds): geomean
// 0.986 at M = 16, 0.976 at M = 64, 0.989 at M = 128 (Qwen3 moe_dn / shared_dn -6%), none
// slower by more than 0.5%; M = 512 within the rounds' spread (tile_linear.cuh).
// The nt loop breaks on whole n-tiles past m_end (warp-uniform): with predicated stores
// only, ptxas hoisted enough of the unrolled body to spill the 256-token kernel.
template <typename T, int NT, bool kPermutedRows>
__device__ __forceinline__ void store_full_tile_plain(const FusedArgs& args, const float (&acc)[NT][4], int stripe,
                                                      int m0, int m_end, float ts) {
  constexpr int kPartner = kPermutedRows ? 16 : 4;
  // The lane read here, not hoisted with what derives from it into the caller's main loop,
  // where the 256-token kernel's MMA warps have no register to spare (it spilled).
  int lane;
  asm volatile("mov.u32 %0, %%laneid;\n" : "=r"(lane));
  const int c = lane & 3;
  const bool odd = (lane & kPartner) != 0;  // this lane's row is 2p + 1
  const int g = kPermutedRows ? tile_row_of(lane >> 2) : lane >> 2;
  const int row0 = stripe * 16 + (g & ~1);  // the pair's even row (and + 8)
  const int t_first = m0 + 2 * c + (odd ? 1 : 0);  // the token this lane stores, n-tile 0
  const int stored = (m_end - t_first + 7) / 8;    // n-tiles with this lane's token below m_end
  // Even row: (own t0, partner's t0), the low halves; odd row: (partner's t1, own t1), the high.
  const uint32_t select = odd ? 0x3276u : 0x5410u;
  uint32_t* y = reinterpret_cast<uint32_t*>(static_cast<T*>(args.y) + int64_t(t_first) * args.ldy + row0);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    if (m0 + nt * 8 >= m_end) break;  // warp-uniform
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // rows row0 + 8 hh, + 1
      const uint32_t own = pack_rounded<T>(acc[nt][2 * hh] * ts, acc[nt][2 * hh + 1] * ts);  // tokens t0, t1
      const uint32_t recv = __shfl_xor_sync(0xffffffffu, own, kPartner);
      if (nt < stored) y[4 * hh] = __byte_perm(own, recv, select);
    }
    y += int64_t(args.ldy) * 4;  // 8 tokens on, in 4-byte words
  }
}

template <typename T, int NT, bool kPermutedRows>
__device__ __forceinline__ void store_full_tile(const FusedArgs& args, const float (&acc)[NT][4], int stripe, int m0,
                                                int m_end, float ts) {
  if (!args.bias && !args.residual) {
    store_full_tile_plain<T, NT, kPermutedRows>(args, acc, stripe, m0, m_end, ts);
  } else {
    store_full_tile_general<T, NT, kPermutedRows>(args, acc, stripe, m0, m_end, ts);
  }
}

// kSplits = false: the caller never splits K (no partials code, for 256-token tiles).
// pair_stores: the caller checked pair_stores_allowed; stripes whose 16 rows are all below N
// then store through store_full_tile.
template <typename T, int NT, bool kPermutedRows = false, bool kSplits = true>
__device__ __forceinline__ void finish_item(const FusedArgs& args, float (&acc)[NT][4], int stripe, int split, int m0,
                                            int m_end, float ts, bool pair_stores = false) {
  const int lane = threadIdx.x & 31, c = lane & 3;
  const int g = kPermutedRows ? tile_row_of(lane >> 2) : lane >> 2;  // the stripe's row (and + 8)
  // Splits along K: every split stores its partial; the last to arrive sums them in split order.
  if (kSplits && args.splits > 1) {
    const int64_t npad = int64_t(args.stripes) * 16, mpad = int64_t(args.tiles) * NT * 8;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = int64_t(stripe) * 16 + g + 8 * (i / 2), t = m0 + nt * 8 + 2 * c + (i & 1);
        args.partials[(split * mpad + t) * npad + row] = acc[nt][i];
      }
    __threadfence();
    __syncwarp();
    unsigned* counter = args.counters + int64_t(udiv(m0, NT * 8)) * args.stripes + stripe;
    unsigned arrived = 0;
    if (lane == 0) arrived = atomicAdd(counter, 1u);
    arrived = __shfl_sync(0xffffffffu, arrived, 0);
    if (arrived != unsigned(args.splits - 1)) return;
    __threadfence();
    // Split by split, all of a split's NT * 4 partials requested before any is added: one
    // L2 round trip per split instead of one per value (ncu, glm47 q at M = 16: ~7% of
    // the warps' stall samples sat on these loads). The sums keep split order.
    float sum[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) sum[nt][i] = 0.0f;
    for (int sp = 0; sp < args.splits; ++sp) {
      float part[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t row = int64_t(stripe) * 16 + g + 8 * (i / 2), t = m0 + nt * 8 + 2 * c + (i & 1);
          part[nt][i] = __ldcg(args.partials + (sp * mpad + t) * npad + row);
        }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) sum[nt][i] += part[nt][i];
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] = sum[nt][i];
    if (lane == 0) *counter = 0;  // ready for the next call on the stream
  }

  if (pair_stores && stripe * 16 + 16 <= args.N) {  // warp-uniform
    store_full_tile<T, NT, kPermutedRows>(args, acc, stripe, m0, m_end, ts);
    return;
  }
  const T* bias = static_cast<const T*>(args.bias);
  const T* res = static_cast<const T*>(args.residual);
  T* y = static_cast<T*>(args.y);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = stripe * 16 + g + 8 * (i / 2), t = m0 + nt * 8 + 2 * c + (i & 1);
      if (row < args.N && t < m_end) {
        float v = acc[nt][i] * ts;
        if (bias) v += Element<T>::to_float(bias[row]);
        if (res) v += Element<T>::to_float(res[int64_t(t) * args.ldr + row]);
        y[int64_t(t) * args.ldy + row] = Element<T>::from_float(v);
      }
    }
}

// PDL: whether a fused kernel instance triggers the next kernel at entry (all but stripes
// items of 4 warps at k = 2, measured below in the kernel) or only when it exits.
constexpr bool fused_trigger_at_entry(FusedItems items, int warps, int kb) {
  return !(items == FusedItems::stripes && warps == 4 && kb == 2);
}

template <int KB, typename T, int NT, int WARPS, FusedItems ITEMS>
__global__ void __launch_bounds__(WARPS * 32, (NT <= 2 ? 16 : 8) / WARPS) fused_linear_kernel(const FusedArgs args) {
  // cta: the WARPS warps of a CTA share each item, interleaving its supertiles, and
  // reduce through shared memory; warp: each warp runs whole items on its own;
  // stripes: an item is WARPS adjacent stripes, one per warp, sharing x (see kFusedXSlots).
  // cta_shuffle: cta items that decode by shuffle (decode_pairs_shuffle) and build no
  // pair table, for CTAs whose few supertiles cannot amortise one.
  constexpr bool kCta = ITEMS == FusedItems::cta || ITEMS == FusedItems::cta_shuffle;
  constexpr bool kTable = KB >= 3 && ITEMS != FusedItems::cta_shuffle;
  // wgmma: stripes items whose warpgroups (4 warps, 64 rows each) multiply with one
  // wgmma.mma_async per 16 columns, the activations read by the tensor cores straight from
  // the ring, which then holds them in core-matrix order (see copy_x_tile).
  constexpr bool kWgmma = ITEMS == FusedItems::wgmma;
  static_assert(!kWgmma || (WARPS % 4 == 0 && (NT == 4 || NT == 8)), "wgmma items: whole warpgroups, n_tiles 4 or 8");
  constexpr bool kShareX = items_share_x(ITEMS);
  // Block scales in fp32 after each block's MMAs (kFp32Scales) or on the decoded pairs: A/B on
  // the H200 (2026-12-04, two rounds, every dense M = 1..16 row on these kernels): n_tiles 1
  // 1-3% faster by geomean (cta k = 2 0.973, cta_shuffle k = 5 0.973, stripes 0.99) except
  // cta_shuffle k = 4 (1.017); n_tiles 2 1.6-2.8% slower (stripes k = 3..5 spilled 8-24 bytes,
  // the FFMAs per n-tile add up); warp items spilled 8 bytes at k = 3.
  constexpr bool kFp32Scales = NT == 1 && (ITEMS == FusedItems::cta || ITEMS == FusedItems::stripes ||
                                           (ITEMS == FusedItems::cta_shuffle && KB != 4));
  // bf16 scales on the pairs in two instructions, the levels carrying 2^116 (scale_bits_pair_bf16).
  // A/B on the H200 (2026-12-04, every dense row at M = 12, 16, two rounds): geomean 0.991 / 0.992,
  // k = 2's cta and stripes items 2-5% faster (glm47 shared_gu M = 16 36.88 -> 35.16 us), stripes at
  // k = 3..5 0.7-1.2%; only cta_shuffle at k = 4 lost (+0.8%), so it keeps scale_pair.
  constexpr bool kScaledLevels =
      std::is_same_v<T, __nv_bfloat16> && !kFp32Scales && !(ITEMS == FusedItems::cta_shuffle && KB == 4);
  // Two accumulator chains per n-tile (acc1 below) for cta_shuffle items at n_tiles 2, k = 5: A/B on the
  // H200 (2026-12-04, M = 12, 16, three rounds): 0.994 by geomean over the 20 rows of that class (glm47
  // moe_dn M = 12 6.67 -> 6.60 us, Qwen3 moe_dn M = 16 3.29 -> 3.24), other classes within +-0.3%. With
  // every k (two rounds) k = 3, 4 ran 0.6-0.9% slower.
  constexpr bool kSplitChains = NT == 2 && ITEMS == FusedItems::cta_shuffle && KB == 5;
  constexpr bool kCtaLoop = ITEMS != FusedItems::warp;  // items handed to whole CTAs
  constexpr int kStride = kCta ? WARPS : 1;
  // supertiles of weight loads in flight per warp
  constexpr int D = KB == 2 ? 4 : (KB == 3 ? 3 : 2);
  using Lut = PairLut<KB>;
  constexpr int kLutWords = kTable ? Lut::words : 0;
  using StageT = Stage<KB>;
  constexpr bool kPrefetchX = NT == 1 && !kShareX;  // M <= 8: next supertile's activations one step ahead
  constexpr int kWarpXSlots = fused_warp_x_slots<KB, NT, ITEMS>();  // n_tiles 2: a ring per warp
  constexpr bool kWarpX = kWarpXSlots > 0;
  extern __shared__ __align__(16) uint32_t smem[];
  __shared__ uint32_t cb16[32];
  uint32_t* lut = smem;
  float* red = reinterpret_cast<float*>(smem + kLutWords);  // cta items: [WARPS][NT][4][32]
  constexpr int kRedWords = kCta ? WARPS * NT * 4 * 32 : 0;
  constexpr int kXSlotBytes = NT * 8 * kFusedXRowBytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  // stripes items: the CTA's activation ring, after the table.
  const uint32_t x_ring = uint32_t(__cvta_generic_to_shared(smem + kLutWords + kRedWords));
  const DeviceMeta* meta = args.meta;

  // PDL: the next call's CTAs may start as SMs free up (see gemv.cuh). Not for stripes
  // items of 4 warps at k = 2 (fused_trigger_at_entry): they trigger when they exit. History:
  // the early trigger once made glm47 q and shared_gu at M = 16 slower on the H200 (27.67 us
  // against 25.39, 42.63 against 36.57; 384 CTAs of up to 4 per SM), and a rule by CTAs per
  // SM (987a23e) lost 8-19% elsewhere, so every 4-warp stripes instance triggered at exit.
  // Since PDL grids get the even-share room (even_share_carveout), the entry trigger is
  // faster on all 51 k = 3..5 rows of these items in an A/B on the H200 (2026-12-01,
  // kbit_linear_pdl, M = 2..32: geometric mean 0.88-0.92x, Qwen3 moe_dn M = 32 k = 4 5.12 ->
  // 3.66 us, glm47 q M = 16 k = 4 21.76 -> 20.64), but at k = 2 it still loses up to 21% on
  // glm47's large projections (shared_gu M = 16 37.33 -> 45.21, q 21.61 -> 25.67) while
  // winning on Qwen3 (up to 21%).
  if (fused_trigger_at_entry(ITEMS, WARPS, KB) && args.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // Codebook as 16-bit values, then (k >= 3) the pair table; built once per (persistent) CTA.
  // From the parameters (FusedArgs::codebook16): a load through meta held every weight
  // request behind a global round trip (qwen3 2048 x 512, M = 16, k = 2: 3.82 -> 3.72 us).
  // k = 2 reads its 4 levels at fixed parameter offsets (uniform, no barrier before the
  // first weight requests: -1.1% geometric mean over 100 k = 2 cases, H200 A/B in one
  // binary, 2026-12-01). k >= 3 puts them in shared memory for the pair table: each warp
  // reading its lanes' levels from the parameters itself (16-32 addresses, served one at
  // a time) made k = 3, 4 2-9% slower in the same A/B.
  uint32_t pool_lo = 0, pool_hi = 0;
  if constexpr (KB == 2) {
    k2_level_pools<kScaledLevels>(args.codebook16, pool_lo, pool_hi);
  } else if constexpr (kTable) {
    if (threadIdx.x < (1 << KB)) cb16[threadIdx.x] = scaled_level<kScaledLevels>(args.codebook16[threadIdx.x]);
    __syncthreads();
  }
  // cta_shuffle: lane l's level (its latency hides under the first weight requests').
  [[maybe_unused]] const uint32_t cb_lane =
      kTable || KB == 2 ? 0u : scaled_level<kScaledLevels>(args.codebook16[lane & ((1 << KB) - 1)]);
  auto block_scale_pair = [](uint32_t word, int j) {
    if constexpr (kScaledLevels) {
      return scale_bits_pair_bf16(word, j);
    } else {
      return scale_pair<T>(word, j);
    }
  };
  // The pair table (32 KB of stores and a barrier) is built by CTA items after their first
  // item's first D weight loads are issued, so that it overlaps their latency instead of
  // delaying them (the GEMV's order); Qwen3's K = 512 shapes, a few supertiles per warp,
  // ran 0.4-0.6 us slower at k >= 3 than at k = 2, which has no table. Warp items (a CTA's
  // warps on different items, some perhaps on none) build it here.
  auto build_pair_table = [&] {
    for (int i = threadIdx.x; i < Lut::words / 4; i += WARPS * 32) {
      const int entry = i * 4 / Lut::replicas;
      const uint32_t v = cb16[entry & ((1 << KB) - 1)] | cb16[(entry >> KB) & ((1 << KB) - 1)] << 16;
      reinterpret_cast<uint4*>(lut)[i] = make_uint4(v, v, v, v);
    }
    __syncthreads();
  };
  bool table_pending = kTable && kCtaLoop;  // the same in every thread of the CTA
  if constexpr (kTable && !kCtaLoop) build_pair_table();
  // kFp32Scales: the block scales in fp32 (scale_float: factor 1); else on the pairs (scale_pair).
  const float ts = meta->tensor_scale * (kFp32Scales ? 1.0f : kScalePairFactor<T>);
  const bool pair_stores = pair_stores_allowed(args);  // 4-byte pair stores (store_full_tile)
  const uint32_t lut_lane = uint32_t(__cvta_generic_to_shared(lut)) + uint32_t(lane % Lut::replicas) * 4;
  const uint16_t* x = static_cast<const uint16_t*>(args.x);
  // Stripe units: single stripes, or groups of WARPS stripes (stripes items).
  const int units = kShareX ? (args.stripes + WARPS - 1) / WARPS : args.stripes;
  int items = units * args.splits * args.tiles;
  int32_t* tile_start = nullptr;  // grouped mode: [experts + 1], after the reduction buffer and ring
  if (args.expert_offsets) {
    // The offsets come from the routing kernel: wait for it before reading them.
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    tile_start = reinterpret_cast<int32_t*>(smem + kLutWords + kRedWords + fused_x_ring_bytes<KB, NT, WARPS, ITEMS>() / 4);
    build_tile_table(args.expert_offsets, args.experts, NT * 8, tile_start);
    items = tile_start[args.experts] * units;  // splits == 1
  }
  const int item_step = kCtaLoop ? int(gridDim.x) : int(gridDim.x) * WARPS;

  // Per-warp items need no barrier after the table is built, so one warp's split
  // fix-up (fence, counter) overlaps the other warps' streaming.
  for (int item = kCtaLoop ? int(blockIdx.x) : int(blockIdx.x) * WARPS + warp; item < items; item += item_step) {
    // item = (token tile * splits + split) * units + unit (grouped: splits 1, the table's tile).
    // udiv / umod: unsigned divisions, as in the GEMV (all operands are positive).
    const int tile_split = udiv(item, units), unit = item - tile_split * units;
    int stripe = kShareX ? unit * WARPS + warp : unit, split = umod(tile_split, args.splits);
    // stripes items: a warp past the last stripe streams the last one again and stores nothing.
    const bool stores = stripe < args.stripes;
    stripe = min(stripe, args.stripes - 1);
    int m0 = udiv(tile_split, args.splits) * NT * 8, m_end = args.M, wstripe = stripe;
    if (tile_start) {  // token tile -> its expert (the last e whose first tile is <= it), rows, weights
      const int tile = tile_split;
      int lo = 0, hi = args.experts - 1;
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (tile_start[mid] <= tile) lo = mid; else hi = mid - 1;
      }
      m0 = args.expert_offsets[lo] + (tile - tile_start[lo]) * NT * 8;
      m_end = args.expert_offsets[lo + 1];
      wstripe = lo * args.stripes + stripe;
      split = 0;
    }
    const int st_begin = split * args.supertiles_per_split;
    const int st_end = min(args.supertiles, st_begin + args.supertiles_per_split);
    const int st_first = st_begin + (kCta ? warp : 0);  // may be past st_end in cta mode: no work
    const uint2* wbase = args.words + int64_t(wstripe) * args.supertiles * KB * 32 + lane;
    const uint2* sbase = args.scales + int64_t(wstripe) * args.supertiles * 8 + g;

    float acc[NT][4];
    // kSplitChains: k-step 1 of each block accumulates into acc1, so that each n-tile's MMAs
    // form two dependent chains of 4 per supertile instead of one of 8; acc1 joins acc at the end.
    [[maybe_unused]] float acc1[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f, acc1[nt][i] = 0.0f;

    // Loads never branch: indices past the warp's last supertile are clamped to it (the
    // values are loaded again and not used), and token rows past M read row M-1 (their
    // results are never stored).
    const int st_last = st_end - 1;
    auto load_stage = [&](StageT& sg, int st) { load_weight_stage<KB>(sg, wbase, sbase, st, st_last); };
    // Activations: 16-byte loads where the supertile lies inside K (x_full_end), else the guarded path.
    const int x_full_end = args.x_vec ? args.K / 128 : 0;
    const uint16_t* xrow[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) xrow[nt] = x + int64_t(min(m0 + nt * 8 + g, args.M - 1)) * args.ldx + 8 * c;
    // One 16-byte chunk of x (token t, columns col..col + 7) into shared memory at d: cp.async
    // where x is 16-byte aligned (zeros past K), else guarded loads and a store.
    auto copy_x_chunk = [&](uint32_t d, int t, int col, int64_t ldx) {
      if (args.x_vec) {
        cp_async16_through_l1(d, x + t * ldx + (col < args.K ? col : 0), col < args.K ? 16 : 0);
      } else {
        sts128(d, load_x8(x, ldx, args.M, args.K, false, t, col));
      }
    };
    // stripes items: the CTA copies supertile st's activations (NT * 8 rows of 128 columns)
    // into ring slot `slot`, one 16-byte chunk per thread and step: cp.async where x is
    // 16-byte aligned, else guarded loads and stores. Rows past M copy row M - 1, columns
    // past K are zeros. Supertiles past the item's end copy nothing (the group stays empty).
    auto copy_x_tile = [&](int st, int slot) {
      constexpr int kChunks = NT * 8 * 16, kThreads = WARPS * 32;
      if constexpr (kWgmma) {
        // wgmma's B operand (wgmma_layout.h): each 16-byte chunk of x scatters as four 4-byte
        // pairs, one per core matrix of its block's two k16 steps, so that k slot kappa of
        // step q holds the column the mma16 layout puts there. A warp copies 8 tokens x 4
        // chunks of one block (conflict-free stores).
        if (st < st_end) {
          const uint32_t dst = x_ring + uint32_t(slot * kXSlotBytes);
#pragma unroll
          for (int u = 0; u < kChunks / kThreads; ++u) {
            const int i = int(threadIdx.x) + u * kThreads;
            const int cq = i & 3, r_lo = (i >> 2) & 7, j = (i >> 5) & 3, r_hi = i >> 7;
            const int col = st * 128 + 32 * j + 8 * cq, t = min(m0 + r_hi * 8 + r_lo, args.M - 1);
            const int row = r_hi * 8 + r_lo, c0 = 32 * j + 8 * cq;  // in the tile and the supertile
            uint32_t d[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) d[p] = dst + wgmma_pair_offset(row, c0 + 2 * p);
            if (args.x_vec) {
              const uint16_t* src = x + int64_t(t) * args.ldx + (col < args.K ? col : 0);
              const int bytes = col < args.K ? 4 : 0;
#pragma unroll
              for (int p = 0; p < 4; ++p) cp_async4_through_l1(d[p], src + 2 * p, bytes);
            } else {
              const uint4 v = load_x8(x, args.ldx, args.M, args.K, false, t, col);
              sts32(d[0], v.x), sts32(d[1], v.y), sts32(d[2], v.z), sts32(d[3], v.w);
            }
          }
        }
        cp_async_commit();
        return;
      }
      if (st < st_end) {
        const uint32_t dst = x_ring + uint32_t(slot * kXSlotBytes);
#pragma unroll
        for (int u = 0; u < (kChunks + kThreads - 1) / kThreads; ++u) {
          const int i = int(threadIdx.x) + u * kThreads;
          if (kChunks % kThreads == 0 || i < kChunks) {
            const int r = i >> 4, cc = i & 15, col = st * 128 + 8 * cc, t = min(m0 + r, args.M - 1);
            copy_x_chunk(dst + uint32_t(r * kFusedXRowBytes + ((cc ^ (4 * (r & 1))) * 16)), t, col, args.ldx);
          }
        }
      }
      cp_async_commit();
    };
    // Items with a ring per warp (fused_warp_x_ring): warp `warp` copies its own supertiles.
    auto copy_warp_x_tile = [&](int st, int slot) {
      if (st < st_end) {
        // Lanes 0-15 copy chunk `lane` of rows 0, 2, .., 14, lanes 16-31 of rows 1, .., 15: two
        // rows (4 lines) per copy instruction. ldx made opaque per call, so that the 8 row
        // addresses are computed here, not kept in registers across the item (they spilled).
        int64_t ldx = args.ldx;
        asm volatile("mov.b64 %0, %0;\n" : "+l"(ldx));
        const int hi = lane >> 4, cc = lane & 15, col = st * 128 + 8 * cc;
        const uint32_t dst = x_ring + uint32_t((warp * kWarpXSlots + slot) * kXSlotBytes + hi * kFusedXRowBytes +
                                               ((cc ^ (4 * hi)) * 16));
        if (st < x_full_end && m0 + NT * 8 <= args.M) {
          const uint16_t* src = x + int64_t(m0 + hi) * ldx + col;
#pragma unroll
          for (int u = 0; u < NT * 4; ++u) cp_async16_through_l1(dst + u * 2 * kFusedXRowBytes, src + 2 * u * ldx, 16);
        } else if (st < x_full_end) {
          // A partial token tile (M = 9..15 at n_tiles 2): the same copies, rows past M
          // zero-filled (no bytes read; the address is row m0's, which exists). Clamping
          // every row on the path below made these calls up to 1.5x slower than M = 16.
          const int rows = args.M - m0 - hi;  // this lane's rows 2u + hi exist while 2u < rows
          const uint16_t* first = x + int64_t(m0) * ldx + col;
#pragma unroll
          for (int u = 0; u < NT * 4; ++u) {
            const bool exists = 2 * u < rows;
            cp_async16_through_l1(dst + u * 2 * kFusedXRowBytes, exists ? first + (2 * u + hi) * ldx : first,
                                  exists ? 16 : 0);
          }
        } else {  // the supertile reaching past K, or x not 16-byte aligned
#pragma unroll
          for (int u = 0; u < NT * 4; ++u) {
            const int t = min(m0 + 2 * u + hi, args.M - 1);
            copy_x_chunk(dst + u * 2 * kFusedXRowBytes, t, col, ldx);
          }
        }
      }
      cp_async_commit();
    };
    auto load_x_tile = [&](uint4 (&xs)[4], int nt, int st) {
      if (st < x_full_end) {
#pragma unroll
        for (int j = 0; j < 4; ++j) xs[j] = __ldg(reinterpret_cast<const uint4*>(xrow[nt] + st * 128 + 32 * j));
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          xs[j] = load_x8(x, args.ldx, args.M, args.K, args.x_vec, m0 + nt * 8 + g, st * 128 + 8 * c + 32 * j);
      }
    };

    // stripes items: every warp has left the previous item's ring slots.
    if constexpr (kShareX) __syncthreads();
    StageT stages[D];
#pragma unroll
    for (int d = 0; d < D; ++d) load_stage(stages[d], st_first + d * kStride);
    // The pair table (a barrier) goes after x's first requests, unless x must wait for the
    // previous kernel (PDL): then before the wait. x first: qwen3 2048 x 512, M = 16, k = 4
    // 4.22 -> 3.89 us (H200, A/B in one binary, 2026-12-01).
    const bool x_first = !args.pdl;
    if constexpr (kTable && kCtaLoop) {
      if (table_pending && !x_first) build_pair_table(), table_pending = false;  // CTA-uniform: the barrier is safe
    }
    // Programmatic dependent launch: the weights above do not depend on the previous
    // kernel; activations, residual and the split workspace do. A no-op without PDL.
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    uint4 xnext[4];
    if constexpr (kPrefetchX) load_x_tile(xnext, 0, min(st_first, st_last));
    int x_slot = 0;  // the ring's slot of the current supertile
    if constexpr (kShareX) {
#pragma unroll
      for (int s = 0; s + 1 < kFusedXSlots; ++s) copy_x_tile(st_first + s, s);
    }
    if constexpr (kWarpX) {
#pragma unroll
      for (int s = 0; s + 1 < kWarpXSlots; ++s) copy_warp_x_tile(st_first + s * kStride, s);
    }
    if constexpr (kTable && kCtaLoop) {
      if (table_pending) build_pair_table(), table_pending = false;  // CTA-uniform: the barrier is safe
    }

    for (int base = st_first; base < st_end; base += D * kStride) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int st = base + d * kStride;
        if (st >= st_end) break;
        const StageT cur = stages[d];
        load_stage(stages[d], st + D * kStride);
        uint4 xcur[4];
        if constexpr (kPrefetchX) {
#pragma unroll
          for (int j = 0; j < 4; ++j) xcur[j] = xnext[j];
          load_x_tile(xnext, 0, min(st + kStride, st_last));
        }
        if constexpr (kShareX) {
          // This supertile's tile has landed for every thread, and every warp is done with
          // the previous one, whose slot now takes the copy kFusedXSlots - 1 supertiles ahead.
          cp_async_wait_pending(kFusedXSlots - 2);
          if constexpr (kWgmma) fence_proxy_async_shared();  // the tile, for the tensor cores' reads
          __syncthreads();
          copy_x_tile(st + kFusedXSlots - 1, x_slot == 0 ? kFusedXSlots - 1 : x_slot - 1);
        }
        if constexpr (kWarpX) {
          // The previous supertile's slot takes the copy kWarpXSlots - 1 supertiles ahead before
          // this supertile's tile is waited for, so that the next copy's round trip does not
          // start only once this one has ended (every lane has read that slot: the first
          // __syncwarp; this tile, copied by every lane, is complete: the second).
          __syncwarp();
          copy_warp_x_tile(st + (kWarpXSlots - 1) * kStride, x_slot == 0 ? kWarpXSlots - 1 : x_slot - 1);
          cp_async_wait_pending(kWarpXSlots - 1);
          __syncwarp();
        }
        const uint32_t x_tile = x_ring + uint32_t((kWarpX ? warp * kWarpXSlots + x_slot : x_slot) * kXSlotBytes);
        uint32_t w[2 * KB];
#pragma unroll
        for (int u = 0; u < KB; ++u) w[2 * u] = cur.w[u].x, w[2 * u + 1] = cur.w[u].y;
        [[maybe_unused]] const bool x_full = st < x_full_end;
        if constexpr (kWgmma) {
          // The supertile's 8 A fragments, then 8 asynchronous MMAs over them; all are waited
          // for before the registers are written again and before the ring slot is refilled
          // (the next supertile's barrier).
          uint32_t afr[8][4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint32_t s_lo = block_scale_pair(cur.scales.x, j), s_hi = block_scale_pair(cur.scales.y, j);
#pragma unroll
            for (int s = 0; s < 2; ++s) {
              uint32_t (&a)[4] = afr[2 * j + s];
              decode_pairs<KB, PairLut<KB>::replicas, false>(w, j, s, lut_lane, pool_lo, pool_hi, a);
              a[0] = mul2<T>(a[0], s_lo), a[1] = mul2<T>(a[1], s_hi);
              a[2] = mul2<T>(a[2], s_lo), a[3] = mul2<T>(a[3], s_hi);
            }
          }
          wgmma_fence();
#pragma unroll
          for (int q = 0; q < 8; ++q)
            wgmma_rs<T, NT>(acc, afr[q], wgmma_desc_no_swizzle(x_tile + uint32_t(q) * kWgmmaStepBytes, kWgmmaKHalfBytes,
                                                               kWgmmaGroupBytes));
          wgmma_commit();
          wgmma_wait_all<NT>(acc, afr);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            uint4 xv[NT];
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              if constexpr (kPrefetchX) {
                xv[nt] = xcur[j];
              } else if constexpr (kShareX || kWarpX) {
                const int r = nt * 8 + g;
                xv[nt] = lds128(x_tile + uint32_t(r * kFusedXRowBytes + (((4 * j + c) ^ (4 * (r & 1))) * 16)));
              } else if (x_full) {
                xv[nt] = __ldg(reinterpret_cast<const uint4*>(xrow[nt] + st * 128 + 32 * j));
              } else {
                xv[nt] = load_x8(x, args.ldx, args.M, args.K, args.x_vec, m0 + nt * 8 + g, st * 128 + 8 * c + 32 * j);
              }
            }
            // k-step s of block j: the A registers of its unscaled levels.
            auto decode = [&](int s, uint32_t(&a)[4]) {
              if constexpr (KB >= 3 && !kTable) {
                decode_pairs_shuffle<KB, NT == 2>(w, j, s, cb_lane, a);
              } else {
                decode_pairs<KB, PairLut<KB>::replicas, false>(w, j, s, lut_lane, pool_lo, pool_hi, a);
              }
            };
            if constexpr (kFp32Scales) {
              // The block's two k16 steps on its unscaled levels into `part`, then the block
              // scales of rows g and g + 8 in fp32 (one FFMA per accumulator): 4 FFMA and two
              // scales where scaling every decoded pair takes 8 mul.x2 and two packed scales,
              // and the products keep the levels' precision.
              uint32_t a[2][4];
              decode(0, a[0]), decode(1, a[1]);
              const float f_lo = scale_float(cur.scales.x, j), f_hi = scale_float(cur.scales.y, j);
#pragma unroll
              for (int nt = 0; nt < NT; ++nt) {
                float part[4];
                mma_16816_zero_c<T>(part, a[0], xv[nt].x, xv[nt].y);
                mma_16816<T>(part, a[1], xv[nt].z, xv[nt].w);
                acc[nt][0] = fmaf(part[0], f_lo, acc[nt][0]), acc[nt][1] = fmaf(part[1], f_lo, acc[nt][1]);
                acc[nt][2] = fmaf(part[2], f_hi, acc[nt][2]), acc[nt][3] = fmaf(part[3], f_hi, acc[nt][3]);
              }
            } else {
#pragma unroll
              for (int s = 0; s < 2; ++s) {
                uint32_t a[4];
                const uint32_t s_lo = block_scale_pair(cur.scales.x, j), s_hi = block_scale_pair(cur.scales.y, j);
                decode(s, a);
                a[0] = mul2<T>(a[0], s_lo), a[1] = mul2<T>(a[1], s_hi);
                a[2] = mul2<T>(a[2], s_lo), a[3] = mul2<T>(a[3], s_hi);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
                  mma_16816<T>(kSplitChains && s ? acc1[nt] : acc[nt], a, s ? xv[nt].z : xv[nt].x, s ? xv[nt].w : xv[nt].y);
              }
            }
          }
        }
        if constexpr (kShareX) x_slot = x_slot + 1 == kFusedXSlots ? 0 : x_slot + 1;
        if constexpr (kWarpX) x_slot = x_slot + 1 == kWarpXSlots ? 0 : x_slot + 1;
      }
    }
    if constexpr (kShareX) {
      cp_async_wait_pending(0);  // only empty groups are left; none may land in the next item's ring
      if (!stores) continue;     // (the next item starts with a barrier every warp reaches)
    }
    if constexpr (kWarpX) cp_async_wait_pending(0);

    if constexpr (kSplitChains) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] += acc1[nt][i];
    }
    if constexpr (kCta) {  // warps of the CTA: sum in warp order
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[((warp * NT + nt) * 4 + i) * 32 + lane] = acc[nt][i];
      __syncthreads();
      if (warp == 0) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = 0.0f;
#pragma unroll
            for (int ww = 0; ww < WARPS; ++ww) v += red[((ww * NT + nt) * 4 + i) * 32 + lane];
            acc[nt][i] = v;
          }
      }
      __syncthreads();  // red is reused by the next item
      if (warp != 0) continue;
    }

    finish_item<T, NT>(args, acc, stripe, split, m0, m_end, ts, pair_stores);
  }
}

template <int KB, int NT, int WARPS, FusedItems ITEMS>
constexpr size_t fused_smem_bytes(bool grouped = false) {
  constexpr bool cta = ITEMS == FusedItems::cta || ITEMS == FusedItems::cta_shuffle;
  return (ITEMS == FusedItems::cta_shuffle ? 0 : size_t(PairLut<KB>::words) * 4) +
         (cta ? size_t(WARPS) * NT * 4 * 32 * 4 : 0) +
         fused_x_ring_bytes<KB, NT, WARPS, ITEMS>() +
         (grouped ? size_t(kbit::kMaxExperts + 1) * 4 : 0);  // the tile table
}

template <int KB, typename T, int NT, int WARPS, FusedItems ITEMS>
cudaError_t configure_fused_instance() {
  static const cudaError_t configured = cudaFuncSetAttribute(
      fused_linear_kernel<KB, T, NT, WARPS, ITEMS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
      int(fused_smem_bytes<KB, NT, WARPS, ITEMS>(true)));
  return configured;
}

template <int KB, typename T, int NT, int WARPS, FusedItems ITEMS>
int occupancy_instance() {
  check_cuda(configure_fused_instance<KB, T, NT, WARPS, ITEMS>(), "fused linear: setting the shared memory size");
  int blocks = 0;
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fused_linear_kernel<KB, T, NT, WARPS, ITEMS>,
                                                           WARPS * 32, fused_smem_bytes<KB, NT, WARPS, ITEMS>()),
             "fused linear: occupancy");
  return blocks;
}

template <int KB, typename T, int NT, int WARPS, FusedItems ITEMS>
void launch_fused_instance(const FusedArgs& a, cudaStream_t stream) {
  const bool grouped = a.expert_offsets != nullptr;
  const size_t smem = fused_smem_bytes<KB, NT, WARPS, ITEMS>(grouped);
  check_cuda(configure_fused_instance<KB, T, NT, WARPS, ITEMS>(), "fused linear: setting the shared memory size");
  // Persistent CTAs: at most a.max_ctas, looping over (stripe, split, token tile) items.
  KBIT_REQUIRE(a.tiles == (a.M + NT * 8 - 1) / (NT * 8), "fused linear: token tiles do not match n_tiles");
  KBIT_REQUIRE(!grouped || (a.splits == 1 && !a.bias && !a.residual && a.experts >= 1 &&
                            a.experts <= kbit::kMaxExperts),
               "fused linear: grouped mode needs splits = 1, no bias or residual, 1..", kbit::kMaxExperts, " experts");
  // Grouped: at most every row's tile plus one partial tile per expert (the device knows the exact count).
  const int64_t units = items_share_x(ITEMS) ? (int64_t(a.stripes) + WARPS - 1) / WARPS : a.stripes;
  const int64_t items = grouped ? (int64_t(a.tiles) + a.experts) * units : units * a.splits * a.tiles;
  KBIT_REQUIRE(items < (int64_t(1) << 31), "fused linear: too many work items");
  const int64_t ctas = ITEMS == FusedItems::warp ? (items + WARPS - 1) / WARPS : items;
  const dim3 grid(unsigned(std::max<int64_t>(1, std::min<int64_t>(ctas, a.max_ctas))));
  // PDL with the trigger at entry: room for the grid's even share of CTAs per SM only
  // (even_share_carveout), so that the next call's early CTAs cannot pile up on some SMs.
  const auto kernel = fused_linear_kernel<KB, T, NT, WARPS, ITEMS>;
  const int carveout = a.pdl && fused_trigger_at_entry(ITEMS, WARPS, KB)
                           ? even_share_carveout(kernel, grid.x, WARPS * 32, smem, "fused linear: occupancy")
                           : -1;
  launch_maybe_pdl(kernel, grid, dim3(WARPS * 32), smem, stream, a.pdl, carveout, "fused linear kernel launch", a);
  check_launch("fused linear kernel");
}

// Calls f.template operator()<T, NT, WARPS, ITEMS>() for the instantiation of (shape, dtype)
// at bit width KB (k = 2 has no pair table: its cta_shuffle items are its cta items).
template <int KB, typename F>
auto with_fused_instance(FusedShape s, DType t, F&& f) {
  auto typed = [&]<typename T>() {
    auto with_warps = [&]<int NT, int WARPS>() {
      switch (s.items) {
        case FusedItems::warp: return f.template operator()<T, NT, WARPS, FusedItems::warp>();
        case FusedItems::cta: return f.template operator()<T, NT, WARPS, FusedItems::cta>();
        case FusedItems::cta_shuffle:
          if constexpr (KB == 2) {
            return f.template operator()<T, NT, WARPS, FusedItems::cta>();
          } else if constexpr (NT <= kCtaShuffleMaxNTiles) {
            return f.template operator()<T, NT, WARPS, FusedItems::cta_shuffle>();
          } else {
            throw Error(kbit::detail::concat("fused linear: cta_shuffle items take n_tiles up to ", kCtaShuffleMaxNTiles, ", got ", NT));
          }
        case FusedItems::stripes: return f.template operator()<T, NT, WARPS, FusedItems::stripes>();
        case FusedItems::wgmma:
          if constexpr (NT == 4 || NT == 8) {
            KBIT_REQUIRE(device_has_wgmma(), "fused linear: wgmma items need an sm_90 GPU (Hopper), this is ",
                         kbit::cuda::device_description());
            return f.template operator()<T, NT, WARPS, FusedItems::wgmma>();
          } else {
            throw Error(kbit::detail::concat("fused linear: wgmma items take n_tiles 4 or 8, got ", NT));
          }
        case FusedItems::wgmma_tile:
        case FusedItems::wgmma_stream:
          throw Error("fused linear: wgmma_tile and wgmma_stream items run the tile kernel (launch_tile_k*), not this one");
      }
      throw Error("fused linear: unknown item mode");
    };
    auto with_nt = [&]<int NT>() {
      KBIT_REQUIRE(s.warps == 4 || s.warps == 8, "fused linear: warps per CTA must be 4 or 8, got ", s.warps);
      if (s.warps == 8) return with_warps.template operator()<NT, 8>();
      return with_warps.template operator()<NT, 4>();
    };
    switch (s.n_tiles) {
      case 1: return with_nt.template operator()<1>();
      case 2: return with_nt.template operator()<2>();
      case 4: return with_nt.template operator()<4>();
      case 8: return with_nt.template operator()<8>();
      default: throw Error(kbit::detail::concat("fused linear: n_tiles must be 1, 2, 4 or 8, got ", s.n_tiles));
    }
  };
  if (t == DType::f16) return typed.template operator()<__half>();
  KBIT_REQUIRE(t == DType::bf16, "fused linear: x must be F16 or BF16, got ", dtype_name(t));
  return typed.template operator()<__nv_bfloat16>();
}

template <int KB>
void launch_fused(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) {
  with_fused_instance<KB>(s, t, [&]<typename T, int NT, int WARPS, FusedItems ITEMS>() {
    launch_fused_instance<KB, T, NT, WARPS, ITEMS>(a, stream);
  });
}

template <int KB>
int fused_occupancy(FusedShape s, DType t) {
  return with_fused_instance<KB>(s, t, [&]<typename T, int NT, int WARPS, FusedItems ITEMS>() {
    return occupancy_instance<KB, T, NT, WARPS, ITEMS>();
  });
}

}  // namespace kbit::cuda::detail
