// GPU Hadamard rotation of rows (spec: "Hadamard rotation"): y = (1/sqrt(B)) H_B D x
// per chunk of B elements (inverse: x = D H_B^T y / sqrt(B)), in place or out of
// place (input and output may alias exactly), f32/f16/bf16, rows with a stride.
//
// Four kernels (one with a persistent variant), all fp32 inside:
// - warp kernel, B = 2^m in [16, 1024] (block mode and short rows): each lane holds
//   E contiguous elements (E = 8, one 16-byte load of 16-bit data, up to B = 256;
//   B/32 above), log2(E) butterfly stages in registers and the rest across the B/E
//   lanes of the chunk by shuffles; a warp does 256/B chunks at once up to B = 256.
//   No shared memory, no barrier; grid-stride over chunks.
// - power-of-two kernel, B = 2048..32768 (rows): [B/1024][32][32], three register
//   passes over the index bits with a bank-conflict-free swizzled fp32 buffer between.
//   More 16-bit rows than fit on the GPU at once: the persistent variant, which copies
//   the next row into a staging buffer with cp.async while it transforms this one.
// - rows kernel, B = p * q with p in {12, 20, 28}, q = 32..256, up to 64 rows (decode):
//   one CTA of 256 threads per row, three passes over the row in shared memory (lines
//   of 32, the rest of each run's FWHT inside each warp, the order-p mix per column in
//   groups of 4). Sign words from device memory when the caller has them there (a
//   device QuantizedMatrix does), else from the launch's parameters by a generic load.
// - CTA kernel, every other p * q up to 57344 (and many rows of the sizes above):
//   sub-chunks of Q1 = E * lanes elements by warps (registers + shuffles) into shared
//   memory, then columns: the last log2(q / Q1) stages and the order-p mix (H_p's signs
//   are compile-time constants, format/small_hadamard.h).
// All call griddepcontrol.launch_dependents first so that a following kernel launched
// with programmatic dependent launch (kbit::linear) can start loading its weights
// while x is rotated.
// Measured (H200, 2026-11-30, bf16, eighteenth session; BENCHMARKS.md): block:128 of 1-16
// rows of 7168 1.46-1.58 us; row (28 x 256) 2.86-2.97 us for 1-16 rows (3.20-3.34 before
// the sign words were requested with x and flipped on the packed pairs, and pass 2 kept
// inside each warp); 16384 x 16384 block:64 87%, block:256 82%, row 82% (80% before the
// packed sign flips) of the copy kernel's bandwidth.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "bulk_copy.cuh"
#include "common.cuh"
#include "format/small_hadamard.h"
#include "kbit/cuda.h"
#include "kbit/hadamard.h"

namespace kbit::cuda {
namespace {

constexpr int kWarpKernelThreads = 256;
constexpr int kCtaThreads = 512;
constexpr int64_t kMaxChunk = 57344;  // 224 KB of fp32 in shared memory
constexpr size_t kMaxSharedBytes = 227 * 1024;  // per CTA on sm_90

// Where the chunks are: chunk c is chunk c % chunks_per_row of row c / chunks_per_row.
struct ChunkGrid {
  int64_t chunks;          // rows * chunks_per_row
  int64_t chunks_per_row;
  int64_t in_stride, out_stride;  // elements
  int64_t chunk;           // B
  float scale;             // 1/sqrt(B)
  int inverse;
  int vec;                 // rows and strides 16-byte aligned: wide loads and stores
};

template <int Words>
struct SignBits {
  int used;  // 0: D = I
  uint32_t w[Words];
};

__device__ __forceinline__ void allow_dependents_to_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// N elements of T viewed as 16-, 8- and 4-byte words for the wide accesses.
template <typename T, int N>
union RunBits {
  T t[N];
  uint4 q[(N * sizeof(T) + 15) / 16];
  uint2 d[(N * sizeof(T) + 7) / 8];
  uint32_t s[(N * sizeof(T) + 3) / 4];
};

// N consecutive elements at p as floats: 16/8/4-byte accesses when `vec` (p then
// aligned to N * sizeof(T) or 16 bytes), element accesses otherwise.
template <typename T, int N>
__device__ __forceinline__ void load_run(const T* p, bool vec, float (&v)[N]) {
  constexpr int kBytes = N * int(sizeof(T));
  RunBits<T, N> u;
  if (vec && kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) u.q[i] = reinterpret_cast<const uint4*>(p)[i];
  } else if (vec && kBytes == 8) {
    u.d[0] = *reinterpret_cast<const uint2*>(p);
  } else if (vec && kBytes == 4) {
    u.s[0] = *reinterpret_cast<const uint32_t*>(p);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) u.t[i] = p[i];
  }
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = detail::Element<T>::to_float(u.t[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_run(T* p, bool vec, const float (&v)[N]) {
  constexpr int kBytes = N * int(sizeof(T));
  RunBits<T, N> u;
#pragma unroll
  for (int i = 0; i < N; ++i) u.t[i] = detail::Element<T>::from_float(v[i]);
  if (vec && kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) reinterpret_cast<uint4*>(p)[i] = u.q[i];
  } else if (vec && kBytes == 8) {
    *reinterpret_cast<uint2*>(p) = u.d[0];
  } else if (vec && kBytes == 4) {
    *reinterpret_cast<uint32_t*>(p) = u.s[0];
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = u.t[i];
  }
}

__device__ __forceinline__ int64_t chunk_offset(const ChunkGrid& g, int64_t c, int64_t stride) {
  if (g.chunks_per_row == 1) return c * stride;
  if (stride == g.chunks_per_row * g.chunk) return c * g.chunk;  // packed rows: no division
  const int64_t row = c / g.chunks_per_row;
  return row * stride + (c - row * g.chunks_per_row) * g.chunk;
}

// Word offset of element lo of a 32-float line whose low 3 index bits are `row7`: the
// float4 groups XOR-swizzled so that rows and columns of lines are both conflict-free.
__device__ __forceinline__ int swizzle(int row7, int lo) { return ((((lo >> 2) ^ row7) << 2) | (lo & 3)); }

// 32 values as line `line` of a swizzled fp32 buffer (float4 group f at f ^ (line & 7)).
__device__ __forceinline__ void store_line(float* buf, int line, const float (&v)[32]) {
  float* row = buf + line * 32;
#pragma unroll
  for (int f = 0; f < 8; ++f)
    *reinterpret_cast<float4*>(row + ((f ^ (line & 7)) << 2)) = make_float4(v[4 * f], v[4 * f + 1], v[4 * f + 2], v[4 * f + 3]);
}

// Butterflies over N register values: stage h pairs (j, j + h) for j with bit h clear.
template <int N>
__device__ __forceinline__ void butterflies(float (&v)[N]) {
#pragma unroll
  for (int h = 1; h < N; h *= 2)
#pragma unroll
    for (int j = 0; j < N; ++j)
      if ((j & h) == 0) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

// One butterfly stage across lanes: lane l with lane l ^ d, element by element. Every
// lane of the warp must call it.
template <int N>
__device__ __forceinline__ void lane_stage(float (&v)[N], int lane, int d) {
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float other = __shfl_xor_sync(0xffffffffu, v[e], d);
    v[e] = (lane & d) ? other - v[e] : v[e] + other;
  }
}

// The stages across `lanes` neighbouring lanes (a power of two <= 32, known at run time).
template <int N>
__device__ __forceinline__ void lane_butterflies(float (&v)[N], int lane, int lanes) {
  for (int d = 1; d < lanes; d *= 2) lane_stage(v, lane, d);
}

// Negate v[j] where bit j of `bits` is set: one shift and one LOP3 per element (the
// select-based form cost four instructions and was a quarter of the row kernel's).
// Volatile so that the compiler does not precompute 32 masks per loop and spill them.
template <int N>
__device__ __forceinline__ void apply_signs(float (&v)[N], uint32_t bits) {
  static_assert(N <= 32, "one sign word");
#pragma unroll
  for (int j = 0; j < N; ++j) {
    uint32_t r;
    asm volatile("{\n .reg .b32 t;\n shl.b32 t, %1, %2;\n lop3.b32 %0, %3, t, 0x80000000, 0x78;\n}\n"
                 : "=r"(r)
                 : "r"(bits), "r"(31 - j), "r"(__float_as_uint(v[j])));
    v[j] = __uint_as_float(r);
  }
}

// ---- warp kernel: B = E * LPC, LPC lanes per chunk, 32 / LPC chunks per warp step ----
template <typename T, int E, int LPC>
__global__ void __launch_bounds__(kWarpKernelThreads, 4) hadamard_warp_kernel(const T* in, T* out,
                                                                           const ChunkGrid g,
                                                                           const __grid_constant__ SignBits<32> signs) {
  allow_dependents_to_launch();
  constexpr int kChunksPerStep = 32 / LPC;
  const int lane = int(threadIdx.x & 31), sub = lane / LPC, pos = (lane % LPC) * E;
  const int64_t warp = (int64_t(blockIdx.x) * kWarpKernelThreads + threadIdx.x) >> 5;
  const int64_t warps = int64_t(gridDim.x) * (kWarpKernelThreads / 32);
  uint32_t lane_signs = 0;  // bit e: negate element pos + e of the chunk
  if (signs.used) {
    const uint32_t word = signs.w[pos / 32];
    if constexpr (E == 32)
      lane_signs = word;
    else
      lane_signs = (word >> (pos % 32)) & ((1u << E) - 1u);
  }
  const bool vec = g.vec != 0;
  for (int64_t c0 = warp * kChunksPerStep; c0 < g.chunks; c0 += warps * kChunksPerStep) {
    const int64_t c = c0 + sub;
    float v[E];
    if (c < g.chunks) {
      load_run<T, E>(in + chunk_offset(g, c, g.in_stride) + pos, vec, v);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = 0.0f;
    }
    if (signs.used && !g.inverse) apply_signs(v, lane_signs);
    butterflies(v);
    // The rest across the chunk's lanes (xor d < LPC stays inside the group).
#pragma unroll
    for (int d = 1; d < LPC; d *= 2) lane_stage(v, lane, d);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= g.scale;
    if (signs.used && g.inverse) apply_signs(v, lane_signs);
    if (c < g.chunks) store_run<T, E>(out + chunk_offset(g, c, g.out_stride) + pos, vec, v);
  }
}

// ---- CTA kernel: B = P * q (q = 2^m), one chunk per CTA or `parts` CTAs per chunk ----
// The order-P mix with the signs of H_P (H_P^T for the inverse) as compile-time
// constants (format/small_hadamard.h, the CPU's own tables): one FADD per term.
template <int P>
struct SmallHadamardTable {
  static constexpr kbit::detail::SmallHadamard<P> value = kbit::detail::small_hadamard<P>();
};

// Entry (A, C) of H_P, or of H_P^T when INV: a compile-time constant.
template <int P, bool INV, int A, int C>
constexpr int kMixSign = INV ? SmallHadamardTable<P>::value.h[C][A] : SmallHadamardTable<P>::value.h[A][C];

template <int P, bool INV, int A, int C>
__device__ __forceinline__ float signed_term(const float (&col)[P]) {
  if constexpr (kMixSign<P, INV, A, C> > 0)
    return col[C];
  else
    return -col[C];
}

// Output a of the mix of one column, times scale, inverse sign of element i applied.
template <int P, bool INV, int A>
__device__ __forceinline__ float mix_output(const float (&col)[P]) {
  return [&]<int... C>(std::integer_sequence<int, C...>) {
    float sum = 0.0f;
    ((sum += signed_term<P, INV, A, C>(col)), ...);
    return sum;
  }(std::make_integer_sequence<int, P>{});
}

// Outputs a in [GRP * per, (GRP + 1) * per) of column b: dst[a * q + b].
template <typename T, int P, bool INV, int GROUPS, int GRP>
__device__ __forceinline__ void mix_column(const float (&col)[P], T* dst, int q, int b, float scale,
                                           const uint32_t* inverse_signs) {
  constexpr int kPer = (P + GROUPS - 1) / GROUPS, kA0 = GRP * kPer, kA1 = kA0 + kPer < P ? kA0 + kPer : P;
  [&]<int... A>(std::integer_sequence<int, A...>) {
    ((void)[&] {
      const int i = (kA0 + A) * q + b;
      float v = mix_output<P, INV, kA0 + A>(col) * scale;
      if (inverse_signs && ((inverse_signs[i >> 5] >> (i & 31)) & 1u)) v = -v;
      dst[i] = detail::Element<T>::from_float(v);
    }(), ...);
  }(std::make_integer_sequence<int, (kA1 > kA0 ? kA1 - kA0 : 0)>{});
}

// Group grp's share of column b's outputs (4 threads share a column).
template <typename T, int P, bool INV>
__device__ __forceinline__ void mix_column_quarter(int grp, const float (&col)[P], T* dst, int q, int b, float scale,
                                                   const uint32_t* inverse_signs) {
  switch (grp) {
    case 0: mix_column<T, P, INV, 4, 0>(col, dst, q, b, scale, inverse_signs); break;
    case 1: mix_column<T, P, INV, 4, 1>(col, dst, q, b, scale, inverse_signs); break;
    case 2: mix_column<T, P, INV, 4, 2>(col, dst, q, b, scale, inverse_signs); break;
    default: mix_column<T, P, INV, 4, 3>(col, dst, q, b, scale, inverse_signs); break;
  }
}

// E bits of the sign words from element i on (i a multiple of E, E <= 32).
template <int E>
__device__ __forceinline__ uint32_t sign_run(const uint32_t* words, int i) {
  if constexpr (E == 32)
    return words[i >> 5];
  else
    return (words[i >> 5] >> (i & 31)) & ((1u << E) - 1u);
}

// Step 1 of the CTA kernel for one warp step: each LPC-lane group of the warp takes the
// sub-chunk s of Q1 = E * LPC contiguous elements, lane part pos; loads E elements.
template <typename T, int E>
__device__ __forceinline__ void load_sub(const T* src, int s, int n_subs, int q1, int pos, bool vec, float (&v)[E]) {
  if (s < n_subs) {
    load_run<T, E>(src + s * q1 + pos, vec, v);
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] = 0.0f;
  }
}

// The chunk's first log2(Q1) stages, by sub-chunk: signs (forward), E-point butterflies
// in registers, the rest across the sub-chunk's lanes by shuffles; to shared memory.
template <int E>
__device__ __forceinline__ void transform_sub(float (&v)[E], float* buf, int s, int n_subs, int q1, int pos, int lane,
                                              int lpc, bool forward_signs, const uint32_t* sign_words) {
  if (forward_signs && s < n_subs) apply_signs(v, sign_run<E>(sign_words, s * q1 + pos));
  butterflies(v);
  lane_butterflies(v, lane, lpc);
  if (s < n_subs) {
    float* p = buf + s * q1 + pos;
    if constexpr (E % 4 == 0) {
#pragma unroll
      for (int e = 0; e < E; e += 4) *reinterpret_cast<float4*>(p + e) = make_float4(v[e], v[e + 1], v[e + 2], v[e + 3]);
    } else {
#pragma unroll
      for (int e = 0; e < E; ++e) p[e] = v[e];
    }
  }
}

// Step 1: the chunk as P * H sub-chunks of Q1 = E * lpc elements (H = q / Q1); every
// thread's next load is issued before the current sub-chunk is transformed (E <= 8).
// Step 2: "columns" b < Q1 of the P * H values at a * q + h * Q1 + b: the last log2(H)
// stages in registers, the order-P mix, scale, inverse signs, straight to global memory.
template <typename T, int P, bool INV, int E, int H, int Words>
__global__ void __launch_bounds__(kCtaThreads, H > 1 || E == 32 ? 1 : 2) hadamard_cta_kernel(const T* in, T* out, const ChunkGrid g,
                                                                   const int lpc, const int parts,
                                                                   const int stage_signs,
                                                                   const __grid_constant__ SignBits<Words> signs) {
  static_assert(P > 1, "power-of-two rows: hadamard_pow2_kernel or the warp kernel");
  allow_dependents_to_launch();
  extern __shared__ float buf[];  // [chunk] values, then [chunk / 32] sign words
  const int chunk = int(g.chunk), q1 = E * lpc, q = H * q1, n_subs = P * H;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, threads = int(blockDim.x);
  const int64_t chunk_id = int64_t(blockIdx.x) / parts;
  const int part = int(int64_t(blockIdx.x) - chunk_id * parts);
  const T* src = in + chunk_offset(g, chunk_id, g.in_stride);
  T* dst = out + chunk_offset(g, chunk_id, g.out_stride);
  const bool vec = g.vec != 0;
  const uint32_t* sign_words = signs.w;
  if (stage_signs) {
    uint32_t* staged = reinterpret_cast<uint32_t*>(buf + chunk);
    for (int i = tid; i < (chunk + 31) / 32; i += threads) staged[i] = signs.w[i];
    sign_words = staged;
    __syncthreads();
  }
  const bool forward_signs = signs.used && !g.inverse;

  // Step 1. Warp steps are uniform across the warp (shuffles need every lane).
  const int subs_per_warp = 32 / lpc, subs_per_step = (threads / 32) * subs_per_warp;
  const int pos = (lane % lpc) * E;
  int s = warp * subs_per_warp + lane / lpc;
  float v[E];
  load_sub<T, E>(src, s, n_subs, q1, pos, vec, v);
  for (int base = warp * subs_per_warp; base < n_subs; base += subs_per_step, s += subs_per_step) {
    if constexpr (E <= 8) {
      float next[E];
      load_sub<T, E>(src, s + subs_per_step, n_subs, q1, pos, vec, next);
      transform_sub<E>(v, buf, s, n_subs, q1, pos, lane, lpc, forward_signs, sign_words);
#pragma unroll
      for (int e = 0; e < E; ++e) v[e] = next[e];
    } else {
      transform_sub<E>(v, buf, s, n_subs, q1, pos, lane, lpc, forward_signs, sign_words);
      if (base + subs_per_step < n_subs) load_sub<T, E>(src, s + subs_per_step, n_subs, q1, pos, vec, v);
    }
  }
  __syncthreads();

  const uint32_t* inv = g.inverse && signs.used ? sign_words : nullptr;
  {
    // This CTA's part of the columns; 4 threads share a column's outputs.
    constexpr int kGroups = 4;
    const int cols = q1 / parts, col0 = part * cols;
    for (int w = tid; w < cols * kGroups; w += threads) {
      const int grp = w / cols, b = col0 + (w - grp * cols);
      float col[H][P];
#pragma unroll
      for (int a = 0; a < P; ++a) {
        float run[H];
#pragma unroll
        for (int h = 0; h < H; ++h) run[h] = buf[a * q + h * q1 + b];
        butterflies(run);
#pragma unroll
        for (int h = 0; h < H; ++h) col[h][a] = run[h];
      }
#pragma unroll
      for (int h = 0; h < H; ++h) mix_column_quarter<T, P, INV>(grp, col[h], dst, q, h * q1 + b, g.scale, inv);
    }
  }
}

// ---- decode-sized p * q rows (q = 32..256): one CTA per row ----
// Replaced a cluster of 8 CTAs per row (runs by warps, the mix over DSMEM, two cluster
// barriers): the same 3.37 us at one row, 3.99 us at 16 (cluster scheduling); a version
// that mixed first on the tensor cores (mma.sync with H_p's signs on the 16-bit input,
// ~half the instructions) measured 3.90 us: the time is latency, not issue (ncu: IPC 1.6
// on the row's one SM).
// Three passes over the row in shared memory (fp32, [p * q / 32][32] with the float4
// groups of each 32-float line XOR-swizzled by the line's low 3 bits, so that every pass
// is free of bank conflicts): (1) lines of 32 contiguous elements from global memory,
// forward signs, 5 butterfly stages; (2) the remaining log2(q / 32) stages of each run,
// one (run, lane position) per lane of the warp that loaded the run's lines (a __syncwarp,
// not a CTA barrier: 3.12 us against 3.20 on 7168-wide rows); (3) one column b per thread: the order-p mix of
// the p values a * q + b, computed in groups of 4 inputs whose 8 signed sums are shared
// by all p outputs (~280 FADDs per column instead of p^2 = 784), scale, inverse signs,
// straight to global memory. All loads precede the first barrier: in place is safe.
constexpr int kRowsThreads = 256;
constexpr int64_t kRowsKernelMaxRows = 64;  // measured at 1-16 rows; more go to the CTA kernel

// Output a's share of group G (inputs 4G..4G+3 of the column) of H_P (H_P^T when INV):
// s0 * (x0 + s1 x1 + s2 x2 + s3 x3) with s_i the entry's sign relative to s0, from the
// four shared partial sums; the compiler keeps one copy of each distinct sum.
template <int P, bool INV, int G, int A>
__device__ __forceinline__ float mix_group_term(float acc, float p01, float m01, float p23, float m23) {
  constexpr int s0 = kMixSign<P, INV, A, 4 * G>;
  constexpr int s1 = kMixSign<P, INV, A, 4 * G + 1> * s0;
  constexpr int s2 = kMixSign<P, INV, A, 4 * G + 2> * s0;
  constexpr int s3 = kMixSign<P, INV, A, 4 * G + 3> * s0;
  const float base = s1 > 0 ? p01 : m01;
  const float second = s2 == s3 ? p23 : m23;  // s2 x2 + s3 x3 = s2 * second
  const float combo = s2 > 0 ? base + second : base - second;
  if constexpr (G == 0)
    return s0 > 0 ? combo : -combo;
  else
    return s0 > 0 ? acc + combo : acc - combo;
}

template <int P, bool INV, int G>
__device__ __forceinline__ void mix_group(float (&y)[P], float x0, float x1, float x2, float x3) {
  const float p01 = x0 + x1, m01 = x0 - x1, p23 = x2 + x3, m23 = x2 - x3;
  [&]<int... A>(std::integer_sequence<int, A...>) {
    ((y[A] = mix_group_term<P, INV, G, A>(y[A], p01, m01, p23, m23)), ...);
  }(std::make_integer_sequence<int, P>{});
}

// Sign word i of a __grid_constant__ SignBits through a generic pointer: the launch's
// parameter buffer read like global memory, one request for a warp's 32 consecutive
// words, where a parameter-space load at 32 addresses is served one address at a time
// (H200, 7168-wide rows: 3.11 us against 3.22). A copy of the signs in device memory
// (hadamard_rotate's device_signs) is faster still (it is in L2 like x).
__device__ __forceinline__ uint32_t sign_word_generic(const uint32_t* words, int i) {
  asm("" : "+l"(words));  // hides the parameter-space origin from the compiler
  return words[i];
}

// The sign word's bits 2i to bit i and 2i + 1 to bit 16 + i (Hacker's Delight's outer
// unshuffle), so that one shift and one lop3 place the signs of a packed 16-bit pair at
// bits 15 and 31.
__device__ __forceinline__ uint32_t split_even_odd_bits(uint32_t x) {
  uint32_t t = (x ^ (x >> 1)) & 0x22222222u;
  x ^= t ^ (t << 1);
  t = (x ^ (x >> 2)) & 0x0C0C0C0Cu;
  x ^= t ^ (t << 2);
  t = (x ^ (x >> 4)) & 0x00F000F0u;
  x ^= t ^ (t << 4);
  t = (x ^ (x >> 8)) & 0x0000FF00u;
  return x ^ t ^ (t << 8);
}

// 32 packed 16-bit elements as floats, negated where the sign word's bit is set (when
// `apply`): the signs go onto the packed pairs before the conversion (one shift and one
// lop3 per pair; bf16 then converts with one instruction per element), not onto each
// float (two per element): on 7168-wide rows the sign application cost 0.12 us.
template <typename T>
__device__ __forceinline__ void signed_floats(RunBits<T, 32>& u, bool apply, uint32_t word, float (&v)[32]) {
  static_assert(sizeof(T) == 2, "packed 16-bit pairs");
  if (apply) {
    const uint32_t split = split_even_odd_bits(word);
#pragma unroll
    for (int i = 0; i < 16; ++i) u.s[i] ^= (split << (15 - i)) & 0x80008000u;
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      v[2 * i] = __uint_as_float(u.s[i] << 16);
      v[2 * i + 1] = __uint_as_float(u.s[i] & 0xffff0000u);
    } else {
      v[2 * i] = detail::Element<T>::to_float(u.t[2 * i]);
      v[2 * i + 1] = detail::Element<T>::to_float(u.t[2 * i + 1]);
    }
  }
}

// A line of 32 elements from global memory as floats, with the signs when `apply`.
template <typename T>
__device__ __forceinline__ void load_line_signed(const T* p, bool vec, bool apply, uint32_t word, float (&v)[32]) {
  if constexpr (sizeof(T) == 2) {
    RunBits<T, 32> u;
    if (vec) {
#pragma unroll
      for (int i = 0; i < 4; ++i) u.q[i] = reinterpret_cast<const uint4*>(p)[i];
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) u.t[i] = p[i];
    }
    signed_floats<T>(u, apply, word, v);
  } else {
    load_run<T, 32>(p, vec, v);
    if (apply) apply_signs(v, word);
  }
}

// Pass 2 inside a warp: warp w's pass-1 lines (t = 32 w + lane = a * HQ + h) hold every
// run a in [32 w / HQ, 32 (w + 1) / HQ), so its runs need no other warp's lines: a
// __syncwarp instead of a CTA barrier, and the warp goes on as soon as its own loads land.
template <int HQ>
__device__ __forceinline__ void rows_pass2_warp(float* buf, int P, int warp, int lane) {
  constexpr int kRunsPerWarp = 32 / HQ;
#pragma unroll
  for (int i = 0; i < kRunsPerWarp; ++i) {
    const int a = warp * kRunsPerWarp + i;
    if (a >= P) break;
    float v[HQ];
#pragma unroll
    for (int hh = 0; hh < HQ; ++hh) {
      const int r = a * HQ + hh;
      v[hh] = buf[r * 32 + swizzle(r & 7, lane)];
    }
    butterflies(v);
#pragma unroll
    for (int hh = 0; hh < HQ; ++hh) {
      const int r = a * HQ + hh;
      buf[r * 32 + swizzle(r & 7, lane)] = v[hh];
    }
  }
}

// QC: q as a compile-time constant (256: K = 3072, 5120, 7168), 0: q at run time. A
// constant q turns pass 3's 2 x p shared and global addresses into immediate offsets.
template <typename T, int P, bool INV, int QC>
__global__ void __launch_bounds__(kRowsThreads) hadamard_rows_kernel(const T* in, T* out, const ChunkGrid g,
                                                                     const int q_arg, const uint32_t* device_signs,
                                                                     const __grid_constant__ SignBits<P * 8> signs) {
  static_assert(P % 4 == 0, "the mix takes inputs in groups of 4");
  static_assert(P * 8 <= kRowsThreads, "pass 1 takes one line per thread");
  allow_dependents_to_launch();
  __shared__ __align__(16) float buf[P * 256];
  const int q = QC ? QC : q_arg;
  const int tid = int(threadIdx.x), hq = q >> 5;
  const T* src = in + chunk_offset(g, blockIdx.x, g.in_stride);
  T* dst = out + chunk_offset(g, blockIdx.x, g.out_stride);
  // Pass 1: line t = elements [32 t, 32 t + 32), sign word t; at most 28 x 8 = 224 lines,
  // one per thread (so that pass 2 finds a warp's runs in its own lines).
  const bool forward_signs = signs.used && !g.inverse;
  if (tid < P * hq) {
    const int t = tid;
    // The sign word is requested before x, so that the two loads overlap (requested
    // after, it waited for x's: +0.2 us on 7168-wide rows).
    const uint32_t word = device_signs ? __ldg(device_signs + t) : sign_word_generic(signs.w, t);
    float v[32];
    load_line_signed<T>(src + t * 32, g.vec != 0, forward_signs, word, v);
    butterflies(v);
    store_line(buf, t, v);
  }
  if (hq > 1) {
    __syncwarp();
    switch (hq) {
      case 2: rows_pass2_warp<2>(buf, P, tid >> 5, tid & 31); break;
      case 4: rows_pass2_warp<4>(buf, P, tid >> 5, tid & 31); break;
      default: rows_pass2_warp<8>(buf, P, tid >> 5, tid & 31); break;
    }
  }
  __syncthreads();
  // Pass 3: column b; value a sits on line a * hq + (b >> 5) at position b & 31.
  const int b = tid;
  if (b >= q) return;
  const int lo = b & 31, hi = b >> 5;
  float y[P];
  [&]<int... G>(std::integer_sequence<int, G...>) {
    ((void)[&] {
      float x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = (4 * G + i) * hq + hi;
        x[i] = buf[r * 32 + swizzle(r & 7, lo)];
      }
      mix_group<P, INV, G>(y, x[0], x[1], x[2], x[3]);
    }(), ...);
  }(std::make_integer_sequence<int, P / 4>{});
  const bool inverse_signs = signs.used && g.inverse;
#pragma unroll
  for (int a = 0; a < P; ++a) {
    const int i = a * q + b;
    float v = y[a] * g.scale;
    if (inverse_signs && ((signs.w[i >> 5] >> (i & 31)) & 1u)) v = -v;
    dst[i] = detail::Element<T>::from_float(v);
  }
}

// ---- power-of-two rows from 2048 to 32768: [H][32][32] in three register passes ----
// Index bits 0-4 (a thread's 32 contiguous elements), then 5-9, then the H = q/1024 high
// ones, each pass in registers with shared memory (fp32) between passes. Rows of 32
// floats are stored with their float4 groups XOR-swizzled by the row's low 3 bits, so
// that every pass reads and writes shared memory without bank conflicts. No shuffles:
// the shuffle pipe (one warp-instruction per SM clock) is what held the sub-chunk
// design to 34% of the copy bandwidth on 16384-wide rows. CTAs of 256 threads (three
// per SM with 64 KB rows) so that one CTA's loads overlap another's passes.
// Many rows of 16-bit data (hadamard_pow2_stream_kernel): persistent CTAs that copy the
// next row into a shared staging buffer with cp.async while they transform this one, so
// that every CTA always has a row's loads in flight (the one-row-per-CTA kernel has loads
// in flight only in its first pass: 78% of the copy kernel's bandwidth at 16384).
template <int H>
constexpr int pow2_threads() { return H == 32 ? 512 : (H * 32 < 256 ? H * 32 : 256); }

// Pass 1 of a row, from registers: line r's 32 values (bits 0-4), forward signs, to buf.
__device__ __forceinline__ void pow2_pass1_line(float* buf, int r, float (&v)[32], bool forward_signs,
                                                const uint32_t* sign_words) {
  if (forward_signs) apply_signs(v, sign_words[r]);
  butterflies(v);
  store_line(buf, r, v);
}

// Pass 2: (hi, lo), bits 5-9 (mid). Row hi * 32 + mid has low bits mid & 7.
template <int H, int kThreads>
__device__ __forceinline__ void pow2_pass2(float* buf, int tid) {
#pragma unroll
  for (int t = tid; t < H * 32; t += kThreads) {
    const int hi = t >> 5, lo = t & 31;
    float* base = buf + hi * 1024;
    int off[8];
#pragma unroll
    for (int m = 0; m < 8; ++m) off[m] = swizzle(m, lo);
    float v[32];
#pragma unroll
    for (int mid = 0; mid < 32; ++mid) v[mid] = base[mid * 32 + off[mid & 7]];
    butterflies(v);
#pragma unroll
    for (int mid = 0; mid < 32; ++mid) base[mid * 32 + off[mid & 7]] = v[mid];
  }
}

// Pass 3: (mid, lo) columns, the high bits; scale, inverse signs, store. Two
// neighbouring columns per thread of 16-bit data up to H = 16 (4-byte stores).
template <typename T, int H, int kThreads>
__device__ __forceinline__ void pow2_pass3(const float* buf, T* dst, const ChunkGrid& g, bool vec, bool inverse_signs,
                                           const uint32_t* sign_words, int tid) {
  constexpr int kCpt = sizeof(T) == 2 && H <= 16 ? 2 : 1;
#pragma unroll
  for (int t = tid; t < 1024 / kCpt; t += kThreads) {
    const int mid = t / (32 / kCpt), lo = (t % (32 / kCpt)) * kCpt;
    const float* col = buf + mid * 32 + swizzle(mid & 7, lo);  // row h * 32 + mid: same swizzle for every h
    float v[kCpt][H];
#pragma unroll
    for (int h = 0; h < H; ++h) {
      if constexpr (kCpt == 2) {
        const float2 w = *reinterpret_cast<const float2*>(col + h * 1024);
        v[0][h] = w.x, v[1][h] = w.y;
      } else {
        v[0][h] = col[h * 1024];
      }
    }
#pragma unroll
    for (int c = 0; c < kCpt; ++c) {
      butterflies(v[c]);
#pragma unroll
      for (int h = 0; h < H; ++h) v[c][h] *= g.scale;
      if (inverse_signs) {
        uint32_t bits = 0;  // bit h: element h * 1024 + mid * 32 + lo + c
#pragma unroll
        for (int h = 0; h < H; ++h) bits |= ((sign_words[h * 32 + mid] >> (lo + c)) & 1u) << h;
        apply_signs(v[c], bits);
      }
    }
#pragma unroll
    for (int h = 0; h < H; ++h) {
      const int i = h * 1024 + mid * 32 + lo;
      if constexpr (kCpt == 2) {
        const float pair[2] = {v[0][h], v[1][h]};
        store_run<T, 2>(dst + i, vec, pair);
      } else {
        dst[i] = detail::Element<T>::from_float(v[0][h]);
      }
    }
  }
}

// The sign words in shared memory at `staged` (stage_signs) or in the parameter bank.
template <int Words, int kThreads>
__device__ __forceinline__ const uint32_t* pow2_sign_words(const SignBits<Words>& signs, int stage_signs,
                                                          uint32_t* staged, int tid) {
  if (!stage_signs) return signs.w;
  for (int i = tid; i < Words; i += kThreads) staged[i] = signs.w[i];
  __syncthreads();
  return staged;
}

template <typename T, int H>
__global__ void __launch_bounds__(pow2_threads<H>(), H == 32 ? 1 : 3) hadamard_pow2_kernel(const T* in, T* out, const ChunkGrid g,
                                                                                       const int stage_signs,
                                                                                       const __grid_constant__ SignBits<H * 32> signs) {
  allow_dependents_to_launch();
  extern __shared__ float buf[];  // [H * 1024] values, then [H * 32] sign words
  constexpr int kRows = H * 32;   // rows of 32 elements
  constexpr int kThreads = pow2_threads<H>();
  const int tid = int(threadIdx.x);
  const T* src = in + chunk_offset(g, blockIdx.x, g.in_stride);
  T* dst = out + chunk_offset(g, blockIdx.x, g.out_stride);
  const bool vec = g.vec != 0;
  const uint32_t* sign_words =
      pow2_sign_words<H * 32, kThreads>(signs, stage_signs, reinterpret_cast<uint32_t*>(buf + kRows * 32), tid);
  const bool forward_signs = signs.used && !g.inverse;
  // Pass 1: row r = (hi, mid), bits 0-4.
#pragma unroll
  for (int r = tid; r < kRows; r += kThreads) {
    float v[32];
    load_run<T, 32>(src + r * 32, vec, v);
    pow2_pass1_line(buf, r, v, forward_signs, sign_words);
  }
  __syncthreads();
  pow2_pass2<H, kThreads>(buf, tid);
  __syncthreads();
  pow2_pass3<T, H, kThreads>(buf, dst, g, vec, signs.used && g.inverse, sign_words, tid);
}

// Byte offset in the staging buffer of 16-byte piece i (0..3) of line r (64 bytes of
// 16-bit data): the pieces XOR-swizzled by bits 1-2 of the line, so that the 8 lanes of
// a 16-byte shared access phase (lines r..r+7, one piece each) hit 8 different bank
// groups, and the cp.async stores of 8 consecutive pieces too.
__device__ __forceinline__ int staged_piece(int r, int i) { return r * 64 + ((i ^ ((r >> 1) & 3)) << 4); }

// Chunk c's 16-bit values into the staging buffer: piece j = t + k * kThreads (coalesced).
template <typename T, int H, int kThreads>
__device__ __forceinline__ void pow2_stage_chunk(unsigned char* staging, const T* src, int tid) {
  constexpr int kPieces = H * 1024 * int(sizeof(T)) / 16;
  const uint32_t base = detail::shared_address(staging);
  const unsigned char* s = reinterpret_cast<const unsigned char*>(src);
#pragma unroll
  for (int j = tid; j < kPieces; j += kThreads) detail::cp_async16(base + uint32_t(staged_piece(j >> 2, j & 3)), s + j * 16);
  detail::cp_async_commit();
}

// Persistent CTAs over chunks blockIdx.x, + gridDim.x, ...: 16-bit data, rows and
// strides 16-byte aligned, input and output not overlapping.
template <typename T, int H>
__global__ void __launch_bounds__(pow2_threads<H>(), H >= 16 ? 2 : 3) hadamard_pow2_stream_kernel(const T* in, T* out, const ChunkGrid g,
                                                                                              const int stage_signs,
                                                                                              const __grid_constant__ SignBits<H * 32> signs) {
  static_assert(sizeof(T) == 2 && H <= 16, "16-bit rows of 2048..16384");
  allow_dependents_to_launch();
  extern __shared__ float buf[];  // [H * 1024] fp32 values, [H * 1024] staged 16-bit values, [H * 32] sign words
  constexpr int kRows = H * 32;
  constexpr int kThreads = pow2_threads<H>();
  unsigned char* staging = reinterpret_cast<unsigned char*>(buf + kRows * 32);
  const int tid = int(threadIdx.x);
  int64_t c = blockIdx.x;
  if (c >= g.chunks) return;
  pow2_stage_chunk<T, H, kThreads>(staging, in + chunk_offset(g, c, g.in_stride), tid);
  const uint32_t* sign_words = pow2_sign_words<H * 32, kThreads>(
      signs, stage_signs, reinterpret_cast<uint32_t*>(staging + kRows * 64), tid);
  const bool forward_signs = signs.used && !g.inverse, inverse_signs = signs.used && g.inverse;
  for (; c < g.chunks; c += gridDim.x) {
    // This chunk's staged values are in (every thread's copies), and the previous
    // chunk's pass 3 has finished reading buf.
    detail::cp_async_wait_pending(0);
    __syncthreads();
#pragma unroll
    for (int r = tid; r < kRows; r += kThreads) {
      RunBits<T, 32> u;
#pragma unroll
      for (int i = 0; i < 4; ++i) u.q[i] = *reinterpret_cast<const uint4*>(staging + staged_piece(r, i));
      float v[32];
      signed_floats<T>(u, forward_signs, forward_signs ? sign_words[r] : 0u, v);
      pow2_pass1_line(buf, r, v, false, sign_words);
    }
    __syncthreads();
    // The staging buffer is free: the next chunk's loads fly during passes 2 and 3.
    if (c + gridDim.x < g.chunks)
      pow2_stage_chunk<T, H, kThreads>(staging, in + chunk_offset(g, c + gridDim.x, g.in_stride), tid);
    pow2_pass2<H, kThreads>(buf, tid);
    __syncthreads();
    pow2_pass3<T, H, kThreads>(buf, out + chunk_offset(g, c, g.out_stride), g, true, inverse_signs, sign_words, tid);
  }
}

template <int Words>
SignBits<Words> sign_bits(const Rotation& r) {
  SignBits<Words> s{};
  s.used = r.signs.empty() ? 0 : 1;
  KBIT_REQUIRE(r.signs.size() <= size_t(Words), "hadamard_rotate: ", r.signs.size(), " sign words, at most ", Words);
  for (size_t i = 0; i < r.signs.size(); ++i) s.w[i] = r.signs[i];
  return s;
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// Kernels asking for more than the default 48 KB of dynamic shared memory must opt in.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    detail::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)),
                       "hadamard_rotate: shared memory limit");
}

template <typename T>
void launch_warp_kernel(const T* in, T* out, const ChunkGrid& g, const Rotation& r, cudaStream_t stream) {
  const SignBits<32> signs = sign_bits<32>(r);
  auto go = [&]<int E, int LPC>() {
    constexpr int kPerCta = (kWarpKernelThreads / 32) * (32 / LPC);
    const unsigned ctas = unsigned(std::min<int64_t>((g.chunks + kPerCta - 1) / kPerCta, int64_t(detail::sm_count()) * 16));
    hadamard_warp_kernel<T, E, LPC><<<ctas, kWarpKernelThreads, 0, stream>>>(in, out, g, signs);
  };
  switch (g.chunk) {  // 8 elements (one 16-byte load of 16-bit data) per lane up to 256
    case 16: go.template operator()<8, 2>(); break;
    case 32: go.template operator()<8, 4>(); break;
    case 64: go.template operator()<8, 8>(); break;
    case 128: go.template operator()<8, 16>(); break;
    case 256: go.template operator()<8, 32>(); break;
    case 512: go.template operator()<16, 32>(); break;
    case 1024: go.template operator()<32, 32>(); break;
    default: throw Error(kbit::detail::concat("hadamard warp kernel: chunk ", g.chunk));
  }
  detail::check_launch("hadamard warp kernel");
}

template <typename T>
void launch_rows_kernel(const T* in, T* out, const ChunkGrid& g, const Rotation& r, int p, bool inverse,
                        const uint32_t* device_signs, cudaStream_t stream) {
  const int q = int(r.size / p);
  auto go = [&]<int P>() {
    auto launch = [&](auto kernel) {
      kernel<<<unsigned(g.chunks), unsigned(kRowsThreads), 0, stream>>>(in, out, g, q, device_signs,
                                                                         sign_bits<P * 8>(r));
    };
    if (q == 256) {
      if (inverse)
        launch(hadamard_rows_kernel<T, P, true, 256>);
      else
        launch(hadamard_rows_kernel<T, P, false, 256>);
    } else {
      if (inverse)
        launch(hadamard_rows_kernel<T, P, true, 0>);
      else
        launch(hadamard_rows_kernel<T, P, false, 0>);
    }
  };
  switch (p) {
    case 12: go.template operator()<12>(); break;
    case 20: go.template operator()<20>(); break;
    default: go.template operator()<28>(); break;
  }
  detail::check_launch("hadamard rows kernel");
}

template <typename T>
void launch_pow2_kernel(const T* in, T* out, const ChunkGrid& g, const Rotation& r, bool overlapping,
                        cudaStream_t stream) {
  const size_t value_bytes = size_t(r.size) * sizeof(float), sign_bytes = size_t(r.size / 32) * sizeof(uint32_t);
  const int stage_signs = !r.signs.empty() && value_bytes + sign_bytes <= kMaxSharedBytes ? 1 : 0;
  const size_t smem = value_bytes + (stage_signs ? sign_bytes : 0);
  KBIT_REQUIRE(g.chunks <= int64_t(0x7fffffff), "hadamard_rotate: too many chunks (", g.chunks, ")");
  auto go = [&]<int H>() {
    constexpr int kThreads = pow2_threads<H>();
    // More rows than fit on the GPU at once: the persistent kernel that stages the next
    // row while it transforms this one (16-bit, aligned, not in place).
    if constexpr (sizeof(T) == 2 && H <= 16) {
      if (g.vec && !overlapping) {
        auto kernel = hadamard_pow2_stream_kernel<T, H>;
        const size_t stream_smem = smem + size_t(r.size) * sizeof(T);
        allow_shared_memory(kernel, stream_smem);
        int per_sm = 0;
        detail::check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, stream_smem),
                           "hadamard_rotate: occupancy");
        const int64_t resident = int64_t(std::max(per_sm, 1)) * detail::sm_count();
        if (g.chunks > resident) {
          kernel<<<unsigned(resident), unsigned(kThreads), stream_smem, stream>>>(in, out, g, stage_signs,
                                                                                 sign_bits<H * 32>(r));
          return;
        }
      }
    }
    auto kernel = hadamard_pow2_kernel<T, H>;
    allow_shared_memory(kernel, smem);
    kernel<<<unsigned(g.chunks), unsigned(kThreads), smem, stream>>>(in, out, g, stage_signs, sign_bits<H * 32>(r));
  };
  switch (r.size) {
    case 2048: go.template operator()<2>(); break;
    case 4096: go.template operator()<4>(); break;
    case 8192: go.template operator()<8>(); break;
    case 16384: go.template operator()<16>(); break;
    case 32768: go.template operator()<32>(); break;
    default: throw Error(kbit::detail::concat("hadamard power-of-two kernel: chunk ", r.size));
  }
  detail::check_launch("hadamard kernel");
}

template <typename T>
void launch_cta_kernel(const T* in, T* out, const ChunkGrid& g, const Rotation& r, bool inverse, bool in_place,
                       const uint32_t* device_signs, cudaStream_t stream) {
  int p = 1;
  for (int f : {12, 20, 28})
    if (r.size % f == 0 && ((r.size / f) & (r.size / f - 1)) == 0) p = f;
  const int q = int(r.size / p);
  // Sub-chunks of Q1 = E * lpc elements (step 1), H = q / Q1 values per column (step 2).
  KBIT_REQUIRE(p > 1, "hadamard CTA kernel: chunk ", r.size, " is a power of two");
  // Few rows of q = 32..256 (a decode step's activations): one CTA per row.
  if (q >= 32 && q <= 256 && g.chunks <= kRowsKernelMaxRows) {
    launch_rows_kernel<T>(in, out, g, r, p, inverse, device_signs, stream);
    return;
  }
  const int e = q < 8 ? 1 : (q <= 256 ? 8 : (q == 512 ? 16 : 32));
  const int q1 = std::min(q, 1024), h = q / q1;
  const int lpc = q1 / e;
  const int threads = int(std::min<int64_t>(kCtaThreads, (r.size / e + 31) / 32 * 32));
  // Few chunks (a decode step's activations): split each chunk's order-p mix over up to 8
  // CTAs, each redoing step 1, so that more SMs share the mix.
  int parts = 1;  // in place, a CTA would overwrite what another still reads: one CTA per chunk
  while (p > 1 && !in_place && parts < 8 && g.chunks * parts * 2 <= 2 * int64_t(detail::sm_count()) &&
         q1 / (parts * 2) >= 32)
    parts *= 2;
  KBIT_REQUIRE(g.chunks * parts <= int64_t(0x7fffffff), "hadamard_rotate: too many chunks (", g.chunks, ")");
  // The sign words go to shared memory after the values where they fit (the largest chunks
  // read them from the parameter bank instead).
  const size_t value_bytes = size_t(r.size) * sizeof(float), sign_bytes = size_t((r.size + 31) / 32) * sizeof(uint32_t);
  const int stage_signs = !r.signs.empty() && value_bytes + sign_bytes <= kMaxSharedBytes ? 1 : 0;
  const size_t smem = value_bytes + (stage_signs ? sign_bytes : 0);
  auto go = [&]<int P, int E, int H>() {
    // Sign words for the largest chunk this instantiation serves (small parameter blocks
    // keep the common launches cheap).
    constexpr int kQ1 = E == 1 ? 4 : (E == 8 ? 256 : (E == 16 ? 512 : 1024));
    constexpr int kWords = (P * kQ1 * H + 31) / 32;
    auto launch = [&](auto kernel) {
      allow_shared_memory(kernel, smem);
      kernel<<<unsigned(g.chunks * parts), unsigned(threads), smem, stream>>>(in, out, g, lpc, parts, stage_signs,
                                                                               sign_bits<kWords>(r));
    };
    // The transpose only matters to the order-P mix (P = 1 has none).
    if constexpr (P > 1) {
      if (inverse) {
        launch(hadamard_cta_kernel<T, P, true, E, H, kWords>);
        return;
      }
    }
    launch(hadamard_cta_kernel<T, P, false, E, H, kWords>);
  };
  auto with_p = [&]<int P>() {
    {
      if (e == 1)
        go.template operator()<P, 1, 1>();
      else if (e == 8)
        go.template operator()<P, 8, 1>();
      else if (e == 16)
        go.template operator()<P, 16, 1>();
      else if (h == 1)
        go.template operator()<P, 32, 1>();
      else if (h == 2)
        go.template operator()<P, 32, 2>();
      else if constexpr (P == 12)  // 12 x 4096; 20 and 28 x 4096 exceed kMaxChunk
        go.template operator()<P, 32, 4>();
      else
        throw Error(kbit::detail::concat("hadamard CTA kernel: chunk ", r.size));
    }
  };
  switch (p) {
    case 12: with_p.template operator()<12>(); break;
    case 20: with_p.template operator()<20>(); break;
    default: with_p.template operator()<28>(); break;
  }
  detail::check_launch("hadamard kernel");
}

}  // namespace

void hadamard_rotate(const TensorView& in, const MutableTensorView& out, const Rotation& r, bool inverse,
                     cudaStream_t stream, const uint32_t* device_signs) {
  detail::check_device_view(in, "hadamard_rotate input");
  detail::check_device_view(out, "hadamard_rotate output");
  KBIT_REQUIRE(in.rows == out.rows && in.cols == out.cols, "hadamard_rotate: input [", in.rows, ", ", in.cols,
               "] and output [", out.rows, ", ", out.cols, "] differ");
  KBIT_REQUIRE(in.dtype == out.dtype, "hadamard_rotate: input and output dtypes differ");
  require_supported_rotation(r, in.cols);
  KBIT_REQUIRE(r.size <= kMaxChunk, "GPU Hadamard chunks are limited to ", kMaxChunk, " elements, got ", r.size);
  if (device_signs) {
    KBIT_REQUIRE(!r.signs.empty(), "hadamard_rotate: device_signs given for a rotation without signs");
    detail::check_device_pointer(device_signs, "hadamard_rotate device_signs");
    KBIT_REQUIRE(reinterpret_cast<uintptr_t>(device_signs) % 4 == 0, "hadamard_rotate: device_signs ", device_signs,
                 " is not 4-byte aligned");
  }
  if (in.rows == 0) return;
  ChunkGrid g{};
  g.chunk = r.size;
  g.chunks_per_row = in.cols / r.size;
  g.chunks = in.rows * g.chunks_per_row;
  g.in_stride = in.stride();
  g.out_stride = out.stride();
  g.scale = float(1.0 / std::sqrt(double(r.size)));
  g.inverse = inverse ? 1 : 0;
  const size_t es = dtype_size(in.dtype);
  g.vec = aligned16(in.data) && aligned16(out.data) && (size_t(g.in_stride) * es) % 16 == 0 &&
          (size_t(g.out_stride) * es) % 16 == 0 && (size_t(r.size) * es) % 16 == 0;
  // Overlapping input and output (in place, or shifted views of one buffer).
  const size_t in_bytes = size_t((in.rows - 1) * in.stride() + in.cols) * es;
  const size_t out_bytes = size_t((out.rows - 1) * out.stride() + out.cols) * es;
  const auto in_lo = reinterpret_cast<uintptr_t>(in.data), out_lo = reinterpret_cast<uintptr_t>(out.data);
  const bool in_place = in_lo < out_lo + out_bytes && out_lo < in_lo + in_bytes;
  const bool warp_sized = r.size >= 16 && r.size <= 1024 && (r.size & (r.size - 1)) == 0;
  detail::dispatch_float(in.dtype, [&]<typename T>() {
    const T* src = static_cast<const T*>(in.data);
    T* dst = static_cast<T*>(out.data);
    if (warp_sized)
      launch_warp_kernel<T>(src, dst, g, r, stream);
    else if ((r.size & (r.size - 1)) == 0)
      launch_pow2_kernel<T>(src, dst, g, r, in_place, stream);
    else
      launch_cta_kernel<T>(src, dst, g, r, inverse, in_place, device_signs, stream);
  });
}

}  // namespace kbit::cuda
