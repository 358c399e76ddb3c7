// CUDA-core GEMV for decode: y[M, N] = x[M, K] W^T (+ bias) (+ residual) for M = 1..4,
// W in the mma16 layout (layout.h, the same bytes the fused mma.sync kernel reads),
// x and y fp16 or bf16, fp16 products summed per 8 weights, fp32 across supertiles.
//
// Why not the tensor cores: at M <= 4 an m16n8k16 MMA wastes most of its n = 8
// columns, and its operand shuffling costs ~4.5 lane-instructions per weight; the
// H200 allows ~4 per weight at k = 4 (~2 at k = 2) at full HBM bandwidth.
// Decode by table lookup in shared memory, replicated per lane (conflict-free):
// k = 4: one prmt turns a pair-code byte into the address of its packed fp16 pair
// (table of 256 x 256 bytes on a 64 KB boundary); k = 2: two bytes of a word give a
// quad code (two pairs) with one lop3, looked up with one 8-byte load (same table
// shape); k = 3: as k = 4, a quarter of the codes gathered from bits 6-7 of three words
// first; k = 5: the fused kernel's pair-code arithmetic, 32 replicas. Then one
// HFMA2 per pair and token against x held in shared memory as fp16.
// Each lane sums 8 weights of a (row, block) in fp16, scales the partial by the block
// scale with one more HFMA2, and converts to fp32 once per 128-column supertile.
// x is staged per CTA: each supertile of each token is stored as x * 2^e (|x| < 512)
// in fp16, so partial sums stay below 32768 (|codebook| is normalised to 1, E4M4 / 16
// < 2) whatever the activations' range; 2^-e comes back in the fp32 sum.
// Work split ("stream-K"): the (stripe, supertile) units of W are cut into equal
// contiguous ranges, one per warp, so every warp streams the same number of bytes
// with D units of loads in flight, across stripe boundaries. A stripe covered by
// one warp is written directly; a stripe split between warps is summed by the last
// warp to arrive (a counter), in warp order: bit-identical run to run.
// Launch: one CTA of 16 warps per SM (the tables and x take 64-228 KB of shared
// memory); grid of min(SMs, units / 32) CTAs, whole stripes per warp when splitting
// would gain less than 2x.
// Measured (H200, 2026-11-30, commit 408a747, BENCHMARKS.md), M = 1, k = 4: glm47 q
// 15.4 us (2.17 TB/s, 49% of 4.40; fused kernel 25.4, cuBLAS bf16 32.8), shared_gu
// 25.2 us (2.65 TB/s). Latency-bound (ncu at 04b1431: 22% occupancy at 105-128
// registers, issue slots 45% busy, stalls on fixed-latency dependencies and loads).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <unordered_map>

#include "../common.cuh"
#include "fused_linear.cuh"
#include "gemv_args.h"

namespace kbit::cuda::detail {

// Dynamic shared memory map of one CTA (offsets from the dynamic base): the pair
// table, x (M rows of supertiles * 128 fp16 values) and x's power-of-two scales
// ([M][supertiles] floats, 2^-e).
struct GemvSmem {
  static constexpr int64_t kAlign = 1024;  // nothing before the first region
  int64_t lut = 0, x = 0, x_scales = 0, total = 0;
};

// Lookup tables, all replicated per lane so that lookups never conflict on a bank:
// k = 2: 256 quad codes (two pairs) x 32 lanes x 8 bytes; k = 3, 4: 256 pair-code bytes
// x 32 lanes x 4 bytes at a 256-byte stride (k = 3 ignores bits 6-7 of the byte); all
// 64 KB on a 64 KB boundary, addressed by one prmt. k = 5: 1024 pair codes x 32 lanes
// x 4 bytes (128 KB).
constexpr bool gemv_prmt_table(int bits) { return bits <= 4; }
constexpr int64_t gemv_lut_bytes(int bits) {
  if (gemv_prmt_table(bits)) return 65536;
  return (int64_t(1) << (2 * bits)) * 32 * 4;
}

// dyn_base: the shared-window address where dynamic shared memory starts (the k = 4
// table must sit on a 64 KB boundary of the window).
inline GemvSmem gemv_smem_map(int bits, int64_t m, int64_t k, int64_t dyn_base) {
  GemvSmem s;
  const int64_t supertiles = (k + 127) / 128;
  const int64_t x_bytes = m * supertiles * 128 * 2, scale_bytes = (m * supertiles * 4 + 15) / 16 * 16;
  const int64_t xs_bytes = x_bytes + scale_bytes;
  if (gemv_prmt_table(bits)) {  // the table on the first 64 KB boundary of the window; x before it if it fits
    s.lut = (dyn_base + 65535) / 65536 * 65536 - dyn_base;
    s.x = xs_bytes <= s.lut ? 0 : s.lut + 65536;
    s.total = std::max(s.lut + 65536, s.x + xs_bytes);
  } else {
    s.lut = 0;
    s.x = gemv_lut_bytes(bits);
    s.total = s.x + xs_bytes;
  }
  s.x_scales = s.x + x_bytes;
  return s;
}

__device__ __forceinline__ uint32_t hfma2_u32(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) { return mul2<__half>(a, b); }

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
__device__ __forceinline__ void sts128(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

template <typename T>
__device__ __forceinline__ float bits16_to_float(uint32_t b) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(__ushort_as_half(uint16_t(b)));
  } else {
    return __uint_as_float(b << 16);
  }
}

// 8 activations of row t from column col as floats (zeros past K).
template <typename T>
__device__ __forceinline__ void load_x8_float(const GemvArgs& a, int t, int col, float (&v)[8]) {
  const uint16_t* p = static_cast<const uint16_t*>(a.x) + int64_t(t) * a.ldx + col;
  if (a.x_vec && col + 8 <= a.K) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = bits16_to_float<T>(w[i] & 0xffffu);
      v[2 * i + 1] = bits16_to_float<T>(w[i] >> 16);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = col + i < a.K ? bits16_to_float<T>(p[i]) : 0.0f;
  }
}

// Pair codes of k-step s of block j as packed fp16 pairs a[0..3] (rows g, g+8, g, g+8).
template <int KB>
__device__ __forceinline__ void gemv_decode(const uint32_t (&w)[2 * KB], int j, int s, uint32_t lut_lane,
                                            uint32_t (&a)[4]) {
  if constexpr (KB == 3 || KB == 4) {
    // address = lut + 256 * code + 4 * lane: the code byte goes straight into byte 1.
    uint32_t codes;
    if constexpr (KB == 3) {
      codes = j < 3 ? w[2 * j + s] : k3_gathered_codes(w, s);
    } else {
      codes = w[2 * j + s];
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = lds32(__byte_perm(codes, lut_lane, 0x7604u | (uint32_t(r) << 4)));
  } else if constexpr (KB == 2) {
    // Word j, half h = r & 1: its low byte holds element 0 and its high byte element 1 of
    // the pairs p = 2s + r / 2 (2 bits each at 2p, layout.h). Nibble s of both bytes
    // side by side is a quad code (pairs r = h and r = h + 2 of k-step s): one
    // 8-byte lookup at lut + 256 * code + 8 * lane.
    const uint32_t t = w[j] >> 4;
    // byte 2h of `quads`: low nibble from byte 2h of w, high nibble from byte 2h + 1
    const uint32_t quads = s ? (t & 0x0f0f0f0fu) | ((w[j] >> 8) & 0xf0f0f0f0u) : (w[j] & 0x0f0f0f0fu) | (t & 0xf0f0f0f0u);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint2 v;
      asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                   : "=r"(v.x), "=r"(v.y)
                   : "r"(__byte_perm(quads, lut_lane, 0x7604u | (uint32_t(2 * h) << 4))));
      a[h] = v.x, a[h + 2] = v.y;
    }
  } else {
    decode_pairs<KB, 32>(w, j, s, lut_lane, 0u, 0u, a);
  }
}

template <int KB, typename T, int M>
__global__ void __launch_bounds__(kGemvWarps * 32, 1)
    gemv_kernel(const GemvArgs args, const int lut_off, const int x_off, const int x_scales_off, const int active_warps) {
  constexpr int D = KB == 2 ? 6 : (KB == 3 ? 4 : 3);  // units of weight loads in flight per warp (~3 KB)
  constexpr int kThreads = kGemvWarps * 32;
  extern __shared__ __align__(16) uint32_t smem_words[];  // the fused kernel's name and type
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(smem));
  float* x_scales = reinterpret_cast<float*>(smem + x_scales_off);  // [M][S]: 2^-e of each supertile
  const float tensor_scale = args.meta->tensor_scale;  // issued early, used at the end

  const int64_t S = args.supertiles;
  const int64_t U = int64_t(args.stripes) * S;
  const int wg = int(blockIdx.x) * kGemvWarps + warp;
  const bool active = wg < active_warps;
  // unit indices fit in 32 bits (the host checks): cheaper loop arithmetic
  const int u0 = active ? int(int64_t(wg) * U / active_warps) : 0;
  const int u1 = active ? int(int64_t(wg + 1) * U / active_warps) : 0;

  // The first D units of weights: they do not depend on the previous kernel.
  using StageT = Stage<KB>;
  // A ring of D + 1 stages: unit u + D loads into the stage consumed one step ago, so
  // the current stage is never copied (a plain D-ring cost ~18 register moves per unit).
  StageT stages[D + 1];
  const uint2* wbase = args.words + lane;
  const uint2* scbase = args.scales + g;
  auto load_stage = [&](StageT& sg, int u) {
    const uint2* p = wbase + int64_t(u) * (KB * 32);
#pragma unroll
    for (int q = 0; q < KB; ++q) sg.w[q] = load_stream(p + q * 32);
    sg.scales = __ldg(scbase + int64_t(u) * 8);
  };
  if (active) {
#pragma unroll
    for (int d = 0; d < D; ++d) load_stage(stages[d], min(u0 + d, u1 - 1));
  }

  // The pair table from the normalised fp16 codebook in the arguments.
  const uint16_t* cb16 = args.codebook16;
  uint32_t lut_lane = 0;
  if constexpr (KB == 2) {
    const uint32_t lut = sbase + uint32_t(lut_off);
    if (lut & 0xffffu) __trap();  // the host placed the table on a 64 KB boundary of the window
    for (int i = int(threadIdx.x); i < 256 * 16; i += kThreads) {  // 16 x 16 bytes per entry (32 lanes)
      // quad code b: pair 0 = (b & 3, b >> 4 & 3), pair 1 = (b >> 2 & 3, b >> 6 & 3)
      const int b = i >> 4;
      const uint32_t p0 = uint32_t(cb16[b & 3]) | uint32_t(cb16[(b >> 4) & 3]) << 16;
      const uint32_t p1 = uint32_t(cb16[(b >> 2) & 3]) | uint32_t(cb16[(b >> 6) & 3]) << 16;
      sts128(lut + uint32_t(b) * 256 + uint32_t(i & 15) * 16, make_uint4(p0, p1, p0, p1));
    }
    lut_lane = lut + uint32_t(lane) * 8;
  } else if constexpr (KB == 3 || KB == 4) {
    const uint32_t lut = sbase + uint32_t(lut_off);
    if (lut & 0xffffu) __trap();  // the host placed the table on a 64 KB boundary of the window
    constexpr int mask = (1 << KB) - 1;
    for (int i = int(threadIdx.x); i < 256 * 8; i += kThreads) {  // 8 x 16 bytes per entry (32 lanes)
      const int e = i >> 3;
      const uint32_t v = uint32_t(cb16[e & mask]) | uint32_t(cb16[(e >> KB) & mask]) << 16;
      sts128(lut + uint32_t(e) * 256 + uint32_t(i & 7) * 16, make_uint4(v, v, v, v));
    }
    lut_lane = lut + uint32_t(lane) * 4;
  } else {  // 2^(2k) pair codes x 32 lanes
    const uint32_t lut = sbase + uint32_t(lut_off);
    for (int i = int(threadIdx.x); i < (1 << (2 * KB)) * 8; i += kThreads) {
      const int entry = i >> 3;
      const uint32_t v = uint32_t(cb16[entry & ((1 << KB) - 1)]) | uint32_t(cb16[entry >> KB]) << 16;
      sts128(lut + uint32_t(i) * 16, make_uint4(v, v, v, v));
    }
    lut_lane = lut + uint32_t(lane) * 4;
  }

  // x, y, the residual and the workspace may come from the previous kernel.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");

  // Stage x: each run of 16 threads converts one supertile (128 values) of one token to
  // fp16 times 2^e, e chosen from the run's absmax so that |x| * 2^e < 512.
  const int64_t kpad = S * 128;
  {
    const uint32_t xs = sbase + uint32_t(x_off);
    for (int64_t chunk = threadIdx.x; chunk < M * kpad / 8; chunk += kThreads) {  // 16 | kThreads
      const int t = int(chunk / (kpad / 8));
      const int col = int(chunk % (kpad / 8)) * 8;
      float v[8];
      load_x8_float<T>(args, t, col, v);
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
      const unsigned half_warp = 0xffffu << (threadIdx.x & 16);  // a run of 16 threads
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(half_warp, m, off));
      int e = 0;
      if (m > 0.0f && isfinite(m)) {
        int ex;
        frexpf(m, &ex);  // m in [2^(ex-1), 2^ex): m * 2^(9 - ex) in [256, 512)
        e = max(-100, min(100, 9 - ex));
      }
      const float scale = __int_as_float((127 + e) << 23);
      uint32_t h[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __half2 p = __floats2half2_rn(v[2 * i] * scale, v[2 * i + 1] * scale);
        h[i] = *reinterpret_cast<const uint32_t*>(&p);
      }
      sts128(xs + uint32_t(chunk * 16), make_uint4(h[0], h[1], h[2], h[3]));
      if ((threadIdx.x & 15) == 0) x_scales[chunk / 16] = __int_as_float((127 - e) << 23);
    }
  }
  __syncthreads();
  if (!active) return;

  // Piece of a stripe: [pu0, pu1) units. Sums the 4 lanes of a row pair, then writes y
  // (whole stripe) or a piece; the last piece of a split stripe sums all in warp order.
  const uint32_t x_lane = sbase + uint32_t(x_off) + uint32_t(8 * c) * 2;
  const T* bias = static_cast<const T*>(args.bias);
  const T* res = static_cast<const T*>(args.residual);
  T* y = static_cast<T*>(args.y);
  auto owner = [&](int64_t u) { return int(((u + 1) * active_warps - 1) / U); };
  auto finish = [&](int stripe, int pu0, int pu1, float (&acc)[M][2]) {
#pragma unroll
    for (int t = 0; t < M; ++t)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        acc[t][h] += __shfl_xor_sync(0xffffffffu, acc[t][h], 1);
        acc[t][h] += __shfl_xor_sync(0xffffffffu, acc[t][h], 2);
      }
    // lane c handles token c
    float v0 = 0.0f, v1 = 0.0f;
#pragma unroll
    for (int t = 0; t < M; ++t)
      if (t == c) v0 = acc[t][0], v1 = acc[t][1];
    if (pu0 != stripe * int(S) || pu1 != (stripe + 1) * int(S)) {
      const int64_t slot = 2 * int64_t(wg) + (pu0 == u0 ? 0 : 1);
      float* piece = args.pieces + slot * 16 * M;
      if (c < M) piece[g * M + c] = v0, piece[(g + 8) * M + c] = v1;
      __threadfence();
      __syncwarp();
      unsigned arrived = 0;
      if (lane == 0) arrived = atomicAdd(args.counters + stripe, 1u);
      arrived = __shfl_sync(0xffffffffu, arrived, 0);
      const int first = owner(stripe * S), last = owner(stripe * S + S - 1);
      if (arrived != unsigned(last - first)) return;
      __threadfence();
      v0 = 0.0f, v1 = 0.0f;
      if (c < M)
        for (int w0 = first; w0 <= last; w0 += 8) {  // 8 pieces' loads in flight, summed in warp order
          float p0[8], p1[8];
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            const int w = w0 + i;
            p0[i] = p1[i] = 0.0f;
            if (w <= last) {
              const int64_t wu0 = int64_t(w) * U / active_warps;
              const float* p = args.pieces + (2 * int64_t(w) + (wu0 >= stripe * S ? 0 : 1)) * 16 * M;
              p0[i] = __ldcg(p + g * M + c), p1[i] = __ldcg(p + (g + 8) * M + c);
            }
          }
#pragma unroll
          for (int i = 0; i < 8; ++i) v0 += p0[i], v1 += p1[i];
        }
      if (lane == 0) args.counters[stripe] = 0;  // ready for the next call on the stream
    }
    if (c < M) {
      const float sc = tensor_scale * args.out_factor;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = stripe * 16 + g + 8 * h;
        if (row < args.N) {
          float v = (h ? v1 : v0) * sc;
          if (bias) v += Element<T>::to_float(bias[row]);
          if (res) v += Element<T>::to_float(res[int64_t(c) * args.ldr + row]);
          y[int64_t(c) * args.ldy + row] = Element<T>::from_float(v);
        }
      }
    }
  };

  float acc[M][2];
#pragma unroll
  for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = 0.0f;
  int stripe = u0 / int(S), piece_u0 = u0;
  int st = u0 % int(S);
  for (int base = u0; base < u1; base += D + 1) {
#pragma unroll
    for (int d = 0; d <= D; ++d) {
      const int u = base + d;
      if (u >= u1) break;
      load_stage(stages[(d + D) % (D + 1)], min(u + D, u1 - 1));
      const StageT& cur = stages[d];
      uint32_t w[2 * KB];
#pragma unroll
      for (int q = 0; q < KB; ++q) w[2 * q] = cur.w[q].x, w[2 * q + 1] = cur.w[q].y;
      uint32_t hacc[M][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a0[4], a1[4];
        gemv_decode<KB>(w, j, 0, lut_lane, a0);
        gemv_decode<KB>(w, j, 1, lut_lane, a1);
        const uint32_t s_lo = scale_pair<__half>(cur.scales.x, j), s_hi = scale_pair<__half>(cur.scales.y, j);
#pragma unroll
        for (int t = 0; t < M; ++t) {
          const uint4 xv = lds128(x_lane + uint32_t((t * kpad + st * 128 + 32 * j) * 2));
          uint32_t pg = hmul2_u32(a0[0], xv.x), ph = hmul2_u32(a0[1], xv.x);
          pg = hfma2_u32(a0[2], xv.y, pg), ph = hfma2_u32(a0[3], xv.y, ph);
          pg = hfma2_u32(a1[0], xv.z, pg), ph = hfma2_u32(a1[1], xv.z, ph);
          pg = hfma2_u32(a1[2], xv.w, pg), ph = hfma2_u32(a1[3], xv.w, ph);
          if (j == 0) {
            hacc[t][0] = hmul2_u32(pg, s_lo), hacc[t][1] = hmul2_u32(ph, s_hi);
          } else {
            hacc[t][0] = hfma2_u32(pg, s_lo, hacc[t][0]), hacc[t][1] = hfma2_u32(ph, s_hi, hacc[t][1]);
          }
        }
      }
#pragma unroll
      for (int t = 0; t < M; ++t) {
        const float x_scale = x_scales[t * S + st];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hacc[t][h]));
          acc[t][h] = fmaf(f.x + f.y, x_scale, acc[t][h]);
        }
      }
      if (++st == S || u + 1 == u1) {
        finish(stripe, piece_u0, u + 1, acc);
#pragma unroll
        for (int t = 0; t < M; ++t) acc[t][0] = acc[t][1] = 0.0f;
        piece_u0 = u + 1;
        if (st == S) st = 0, ++stripe;
      }
    }
  }
}

template <int KB, typename T, int M>
void launch_gemv_instance(const GemvArgs& a, cudaStream_t stream) {
  const GemvSmem map = gemv_smem_map(KB, M, a.K, dynamic_smem_base());
  KBIT_REQUIRE(map.total <= kGemvMaxSmem, "gemv: M = ", M, ", K = ", a.K, " needs ", map.total,
               " bytes of shared memory, more than ", kGemvMaxSmem);
  auto kernel = gemv_kernel<KB, T, M>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvMaxSmem));
  check_cuda(configured, "gemv: setting the shared memory size");
  // Resident CTAs per SM for this shared-memory size, asked once per size and thread
  // (the query costs microseconds of host time on every eager call otherwise).
  static thread_local std::unordered_map<int64_t, int> occupancy;
  int& per_sm = occupancy[map.total];
  if (per_sm == 0) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvWarps * 32, size_t(map.total)),
               "gemv: occupancy");
    per_sm = std::max(per_sm, 1);
  }
  const int64_t units = int64_t(a.stripes) * a.supertiles;
  KBIT_REQUIRE(units < (int64_t(1) << 30), "gemv: W has too many 16 x 128 units (", units, ")");
  int64_t ctas = std::min<int64_t>(int64_t(sm_count()) * per_sm,
                                   (units + kGemvWarps * kGemvMinUnits - 1) / (kGemvWarps * kGemvMinUnits));
  if (a.max_ctas > 0) ctas = std::min<int64_t>(ctas, a.max_ctas);
  ctas = std::max<int64_t>(ctas, 1);
  int64_t warps = std::min<int64_t>(ctas * kGemvWarps, units);
  // Splitting a stripe between warps costs a fence, an atomic and a second pass over
  // the pieces (~1.5 us of latency): not worth it to gain less than 2x in parallelism.
  if (a.stripes >= warps / 2) {
    warps = std::min<int64_t>(a.stripes, int64_t(sm_count()) * per_sm * kGemvWarps);
    ctas = (warps + kGemvWarps - 1) / kGemvWarps;
  }
  const int active = int(warps);
  KBIT_REQUIRE(2 * int64_t(active) * 16 * M <= a.piece_floats && a.stripes <= a.counter_count,
               "gemv: the workspace holds ", a.piece_floats, " partial floats and ", a.counter_count,
               " counters; this call needs ", 2 * int64_t(active) * 16 * M, " and ", a.stripes);
  const dim3 grid{unsigned(ctas)}, block{unsigned(kGemvWarps * 32)};
  const int lut_off = int(map.lut), x_off = int(map.x), x_scales_off = int(map.x_scales);
  if (a.pdl) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = size_t(map.total), cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    check_cuda(cudaLaunchKernelEx(&cfg, kernel, a, lut_off, x_off, x_scales_off, active), "gemv: PDL launch");
  } else {
    kernel<<<grid, block, size_t(map.total), stream>>>(a, lut_off, x_off, x_scales_off, active);
  }
  check_launch("gemv kernel");
}

template <int KB>
void launch_gemv(const GemvArgs& a, DType t, cudaStream_t stream) {
  KBIT_REQUIRE(a.M >= 1 && a.M <= kGemvMaxM, "gemv: M must be 1..", kGemvMaxM, ", got ", a.M);
  auto typed = [&]<typename T>() {
    switch (a.M) {
      case 1: return launch_gemv_instance<KB, T, 1>(a, stream);
      case 2: return launch_gemv_instance<KB, T, 2>(a, stream);
      case 3: return launch_gemv_instance<KB, T, 3>(a, stream);
      default: return launch_gemv_instance<KB, T, 4>(a, stream);
    }
  };
  if (t == DType::f16) return typed.template operator()<__half>();
  KBIT_REQUIRE(t == DType::bf16, "gemv: x must be F16 or BF16, got ", dtype_name(t));
  typed.template operator()<__nv_bfloat16>();
}

}  // namespace kbit::cuda::detail
