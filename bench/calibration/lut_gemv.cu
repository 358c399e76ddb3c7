// Calibration, not part of the library: a GEMV that looks up sums of activations instead of
// codebook values (tables of x, as LUT-GEMM / T-MAC do on CPUs), M = 1, k = 2, on glm47 q's
// shape (N = 12288, K = 5120). The question: does it relieve the shared-memory traffic that
// caps kbit's GEMV loop at k = 2 (40 wavefronts per 16 x 128 unit: quad lookups of fp16
// codebook values plus x; ~29 weights per SM clock where 4.40 TB/s needs ~60)?
//
// Tables: for each group of 4 columns ("quad") and each of the 256 codes of its 4 weights, the
// sum x0 cb[c0] + x1 cb[c1] + x2 cb[c2] + x3 cb[c3] in fp32, built per CTA for its slab of S
// supertiles (128 columns each) after x arrives. One lookup = 4 weights, one LDS.32; the 32
// quads of a supertile sit in the 32 banks (entry (s, Q, e) at (s/2) 64 KB + e 256 + (s%2) 128
// + Q 4), and a warp's 32 lanes look up 32 different quads at each step (lane = block b, row j;
// step i reads quad 8 b + (j + i) % 8, the keys stored in that rotated order), so lookups never
// conflict. One prmt makes each address (key byte into byte 1, the lane's quad offset into byte
// 0, bytes 2-3 the offset's zero sign bit). A block's 8 lookups are summed, times its E4M4
// scale (bits << 19 as an fp32, times 2^116: exact for subnormal codes too), into fp32.
// Per 16 x 128 unit and lane: 16 prmt, 16 LDS.32 (16 wavefronts per unit), 14 FADD, 2 FFMA.
//
// Layout (the probe's own): unit (slab g, row tile t, supertile s) at ((g RT + t) S + s) 576 B:
// 512 B of keys (lane l = 8 b + j: 16 B, rows j and j + 8 of block b, 8 rotated keys each),
// then 64 B of scales (lane l: 2 B, rows j and j + 8 of block b). CTA (g, r): slab g, row
// tiles [r RT / R, (r + 1) RT / R); its warps take equal contiguous unit ranges; partial rows
// meet in shared memory, the slabs' partials in a workspace summed by the last CTA of the row
// group (a counter; in slab order, bit-identical run to run).
//
// Measured (H100 80GB HBM3, 2026-12-06, session 76; bench/results/h100-lut-gemv-probe-v{2,3}-session76.txt):
// correct (relative error 1e-7 against fp64, bit-identical run to run) but slower than kbit's GEMV:
// glm47 q k = 2 15.6-16.5 us (kbit_gemv 13.46 in the same call), k = 4 22.6-24.1 (15.82). Without
// the slab sum (each CTA writes its partials and exits) 12.8-14.2 / 17.6-18.1: the K-slab
// reduction's fence, counter and last-CTA sum cost 2.2-3.3 us at 8-10 slabs, 6 at 20, 16 at 40;
// loads alone (no build, no lookups, no slab sum) 10.0 us against a bare read's 7.2; the table
// build 0.8-1.5 us after x arrives; the lookups 2.3-3 us more. Clusters of 8 (the slabs' partials
// over DSMEM): only 15 of the grid's 16 fit at once on the H100, 25 us. So the lookups' saving in
// shared-memory traffic (16 wavefronts per unit where kbit's GEMV takes 40) is eaten by what the
// tables bring: a build after x, and K cut into slabs that must be summed across CTAs.
//
// Build and run on the GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90a -Xptxas -v bench/calibration/lut_gemv.cu -o lut_gemv && ./lut_gemv
// `./lut_gemv 2` (or 4) runs one bit width only. Prints the relative error against an fp64 CPU reference, then per-call times (CUDA graph
// of 20 calls over 10 weight buffers, 177 MB, median of 15 replays) for the full kernel, the
// kernel without the table build (garbage tables: the build's cost), and loads only.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#define CK(x)                                                           \
  do {                                                                  \
    cudaError_t e = (x);                                                \
    if (e != cudaSuccess) {                                             \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

// Per bit width: columns per lookup group, groups per 32-column block, key bytes per lane and row,
// a unit's bytes, and the table bytes of a pair of supertiles (k = 2: two 32 KB tables in the halves of
// 256-byte rows; k = 4: 64 pairs per supertile, pairs 0-31 and 32-63 in two 64 KB regions, each row's
// halves the two supertiles).
template <int BITS>
struct Lut {
  static constexpr int kGroupCols = BITS == 2 ? 4 : 2;
  static constexpr int kGroupsPerBlock = 32 / kGroupCols;
  static constexpr int kLaneWords = 2 * kGroupsPerBlock / 4;  // key words per lane (rows j, j + 8)
  static constexpr int kKeyBytes = 32 * 4 * kLaneWords;
  static constexpr int kUnitBytes = kKeyBytes + 64;
  static constexpr int kPairBytes = BITS == 2 ? 65536 : 131072;
  static constexpr int kOffRegs = BITS == 2 ? 2 : 6;
  // Group read by lane (b, j) at step i: a warp's 32 lanes read 32 different banks.
  __host__ __device__ static int group(int b, int j, int i) {
    return BITS == 2 ? 8 * b + (j + i) % 8 : 16 * b + (j + i + 8 * (b >> 1)) % 16;
  }
};

struct Args {
  const uint8_t* w;
  const float* x;
  float* ws;          // [G][N] slab partials
  unsigned* counters; // [R]
  float* y;           // [N]
  const float* cb;    // 2^k levels times the tensor scale
  int N, K, G, R, RT;
};

template <int B, int E, typename F>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (B < E) {
    f(std::integral_constant<int, B>{});
    static_for<B + 1, E>(f);
  }
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
// The shared-memory offset of step I's entry within its supertile pair: byte 1 = the key, byte 0 =
// the group's bank offset. k = 2: offsets of 4 steps per register, bytes 2-3 the offset's zero sign.
// k = 4: offsets of 3 steps per register and the lane's region (pairs 32-63) in byte 3 -> byte 2.
template <int BITS, int I>
__device__ __forceinline__ uint32_t lut_addr(uint32_t keys, const uint32_t (&offs)[Lut<BITS>::kOffRegs]) {
  constexpr int p = I % 4;
  if constexpr (BITS == 2) {
    constexpr int m = I % 4;
    return prmt(keys, offs[(I / 4) % 2], uint32_t((4 + m) | (p << 4) | ((12 + m) << 8) | ((12 + m) << 12)));
  } else {
    constexpr int m = (I % 16) % 3;
    return prmt(keys, offs[(I % 16) / 3], uint32_t((4 + m) | (p << 4) | (7 << 8) | (15 << 12)));
  }
}

__device__ __forceinline__ uint4 ldg_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ldg_u16(const void* p) {
  unsigned short v;
  asm volatile("ld.global.nc.L1::no_allocate.u16 %0, [%1];" : "=h"(v) : "l"(p));
  return v;
}

__device__ __forceinline__ float e4m4_bits_scale(uint32_t byte_shifted19) {
  return __int_as_float(int(byte_shifted19)) * 0x1p116f;
}

// MODE 0: full; 1: no table build (tables as left in shared memory); 2: loads only; 3 and 5: full and loads
// only without the slab reduction (each CTA writes its partials and exits: the tail's cost). 6: loads only
// without x staging, barriers or partials (all of a warp's units requested at entry, then xor-ed: the
// pattern against a grid-stride read); 7: 6 without the 2-byte scale loads (keys only).
// CL = G > 0: the G slab CTAs of a row group form a thread-block cluster and sum the slabs'
// partials from each other's shared memory (no workspace, fence or counter).
template <int BITS, int S, int THREADS, int MODE, int RR, int CL>
__global__ void __launch_bounds__(THREADS, 1) lut_gemv(Args a) {
  using L = Lut<BITS>;
  constexpr int kWarps = THREADS / 32;
  constexpr int kPairs = (S + 1) / 2;
  constexpr int kLW = L::kLaneWords;
  extern __shared__ __align__(16) unsigned char smem[];
  unsigned char* tab = smem;                                          // kPairs x kPairBytes
  float* xs = reinterpret_cast<float*>(smem + kPairs * L::kPairBytes);  // S x 128
  float* cbs = xs + S * 128;                                          // 16
  float* part = cbs + 16;                                             // [rt_local][2][16]
  __shared__ unsigned last_flag;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = blockIdx.x % a.G, r = blockIdx.x / a.G;
  const int rt_begin = int((long long)r * a.RT / a.R), rt_end = int((long long)(r + 1) * a.RT / a.R);
  const int rtc = rt_end - rt_begin;
  const int units = rtc * S;
  const int ub = int((long long)warp * units / kWarps), ue = int((long long)(warp + 1) * units / kWarps);
  const unsigned char* wbase = a.w + ((size_t)g * a.RT + rt_begin) * S * L::kUnitBytes;

  // Ring of RR row tiles x S units in registers: the warp's first units requested first.
  uint32_t keys[RR][S][kLW];
  uint32_t scl[RR][S];
  auto load_unit = [&](int p, int s, int u) {
    const unsigned char* up = wbase + (size_t)u * L::kUnitBytes;
#pragma unroll
    for (int v = 0; v < kLW / 4; ++v) {
      const uint4 q = ldg_stream(up + 16 * kLW / 4 * lane + 16 * v);
      keys[p][s][4 * v] = q.x, keys[p][s][4 * v + 1] = q.y, keys[p][s][4 * v + 2] = q.z, keys[p][s][4 * v + 3] = q.w;
    }
    scl[p][s] = MODE == 7 ? 0u : ldg_u16(up + L::kKeyBytes + 2 * lane);
  };
  const int rt0 = ub / S;
#pragma unroll
  for (int p = 0; p < RR; ++p)
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const int u = (rt0 + p) * S + s;
      if (u >= ub && u < ue) load_unit(p, s, u);
    }

  // x of the slab, the codebook, zeroed partials.
  if (MODE < 6) {
    for (int i = threadIdx.x; i < S * 128; i += THREADS) xs[i] = a.x[(size_t)g * S * 128 + i];
    if (threadIdx.x < (1 << BITS)) cbs[threadIdx.x] = a.cb[threadIdx.x];
    for (int i = threadIdx.x; i < rtc * 32; i += THREADS) part[i] = 0.f;
    __syncthreads();
  }

  if (MODE == 0 || MODE == 3) {
    if constexpr (BITS == 2) {
      // Task (s, chunk c of 16 codes), lane = quad Q. Codes e = 16 c + i: digits d0 = i & 3,
      // d1 = i >> 2 (compile time), d2 = c & 3, d3 = c >> 2.
      const float cbv[4] = {cbs[0], cbs[1], cbs[2], cbs[3]};
      for (int t = warp; t < S * 16; t += kWarps) {
        const int s = t >> 4, c = t & 15;
        const float4 xv = reinterpret_cast<const float4*>(xs + s * 128)[lane];
        const float h = fmaf(xv.z, cbs[c & 3], xv.w * cbs[c >> 2]);
        float* row = reinterpret_cast<float*>(tab + (s >> 1) * 65536 + (c * 16) * 256 + (s & 1) * 128) + lane;
#pragma unroll
        for (int d1 = 0; d1 < 4; ++d1) {
          const float gsum = fmaf(xv.y, cbv[d1], h);
#pragma unroll
          for (int d0 = 0; d0 < 4; ++d0) row[(d1 * 4 + d0) * 64] = fmaf(xv.x, cbv[d0], gsum);
        }
      }
    } else {
      // Task (s, region h, chunk c of 16 codes), lane = pair P & 31. Codes e = 16 c + i: column
      // 2 P's code i (compile time), column 2 P + 1's code c.
      float cbv[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) cbv[i] = cbs[i];
      for (int t = warp; t < S * 32; t += kWarps) {
        const int s = t >> 5, h = (t >> 4) & 1, c = t & 15;
        const int P = 32 * h + lane;
        const float2 xv = reinterpret_cast<const float2*>(xs + s * 128)[P];
        const float hi = xv.y * cbs[c];
        float* row = reinterpret_cast<float*>(tab + (s >> 1) * 131072 + h * 65536 + (c * 16) * 256 + (s & 1) * 128) + lane;
#pragma unroll
        for (int i = 0; i < 16; ++i) row[i * 64] = fmaf(xv.x, cbv[i], hi);
      }
    }
    __syncthreads();
  }

  // The lane's group offsets per step (and region, k = 4).
  const int b = lane >> 3, j = lane & 7;
  uint32_t offs[L::kOffRegs];
#pragma unroll
  for (int m = 0; m < L::kOffRegs; ++m) offs[m] = 0;
  if constexpr (BITS == 2) {
#pragma unroll
    for (int i = 0; i < 8; ++i) offs[i / 4] |= uint32_t(4 * L::group(b, j, i)) << (8 * (i % 4));
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) offs[i / 3] |= uint32_t(4 * (L::group(b, j, i) & 31)) << (8 * (i % 3));
#pragma unroll
    for (int m = 0; m < L::kOffRegs; ++m) offs[m] |= uint32_t(b >> 1) << 24;
  }

  unsigned xor_acc = 0;
  const int rt_last = (ue - 1) / S;
  for (int rt = rt0; rt <= rt_last && ub < ue; rt += RR) {
#pragma unroll
    for (int p = 0; p < RR; ++p) {
      const int rtp = rt + p;
      if (rtp > rt_last) break;
      float acc0 = 0.f, acc1 = 0.f;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        const int u = rtp * S + s;
        uint32_t k[kLW];
#pragma unroll
        for (int v = 0; v < kLW; ++v) k[v] = keys[p][s][v];
        const uint32_t sc = scl[p][s];
        // Refill the slot with the same supertile RR row tiles on (also where this unit is before
        // the warp's range: its slot was never loaded, the next one belongs to the range).
        const int un = u + RR * S;
        if (un >= ub && un < ue) load_unit(p, s, un);
        if (u < ub || u >= ue) continue;
        if (MODE == 2 || MODE >= 5) {
#pragma unroll
          for (int v = 0; v < kLW; ++v) xor_acc ^= k[v];
          xor_acc ^= sc;
          continue;
        }
        const unsigned char* t = tab + (s >> 1) * L::kPairBytes + (s & 1) * 128;
        auto look = [&](uint32_t addr) { return *reinterpret_cast<const float*>(t + addr); };
        // Row j: key words 0 .. kLW / 2 - 1; row j + 8: the rest. Four partial sums per row.
        float blk0 = 0.f, blk1 = 0.f;
        {
          float part0[4] = {0.f, 0.f, 0.f, 0.f}, part1[4] = {0.f, 0.f, 0.f, 0.f};
          static_for<0, kLW * 2>([&](auto I) {  // steps of a row: 4 per key word
            constexpr int i = decltype(I)::value;
            part0[i % 4] += look(lut_addr<BITS, i>(k[i / 4], offs));
            part1[i % 4] += look(lut_addr<BITS, i>(k[kLW / 2 + i / 4], offs));
          });
          blk0 = (part0[0] + part0[1]) + (part0[2] + part0[3]);
          blk1 = (part1[0] + part1[1]) + (part1[2] + part1[3]);
        }
        acc0 = fmaf(blk0, e4m4_bits_scale((sc & 0xffu) << 19), acc0);
        acc1 = fmaf(blk1, e4m4_bits_scale((sc & 0xff00u) << 11), acc1);
      }
      if (MODE == 2 || MODE >= 5) continue;
      // Sum the 4 blocks (lanes 8 apart), then lanes 0..7 hold rows j, j + 8.
      acc0 += __shfl_xor_sync(0xffffffffu, acc0, 8);
      acc1 += __shfl_xor_sync(0xffffffffu, acc1, 8);
      acc0 += __shfl_xor_sync(0xffffffffu, acc0, 16);
      acc1 += __shfl_xor_sync(0xffffffffu, acc1, 16);
      const int piece = (rtp * S >= ub) ? 0 : 1;
      if (lane < 8) {
        float* pp = part + (rtp * 2 + piece) * 16;
        pp[j] = acc0;
        pp[j + 8] = acc1;
      }
    }
  }
  if ((MODE == 2 || MODE >= 5) && xor_acc == 0x9e3779b9u) a.y[0] = 1.f;
  if (MODE >= 6) return;
  __syncthreads();

  const int row0 = rt_begin * 16, rows = rtc * 16;
  if constexpr (CL > 0) {
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    const int per = (rows + CL - 1) / CL, my0 = g * per, my1 = min(rows, my0 + per);
    for (int i = my0 + int(threadIdx.x); i < my1; i += THREADS) {
      const int rt = i >> 4, rr = i & 15;
      float v[CL];
#pragma unroll
      for (int gg = 0; gg < CL; ++gg) {
        const float* rp = cluster.map_shared_rank(part, gg);
        v[gg] = rp[(rt * 2) * 16 + rr] + rp[(rt * 2 + 1) * 16 + rr];
      }
      float sum = 0.f;
#pragma unroll
      for (int gg = 0; gg < CL; ++gg) sum += v[gg];
      a.y[row0 + i] = sum;
    }
    cluster.sync();
    return;
  }
  // The CTA's slab partial of its rows, then the last CTA of the row group sums the slabs.
  for (int i = threadIdx.x; i < rows; i += THREADS) {
    const int rt = i >> 4, rr = i & 15;
    a.ws[(size_t)g * a.N + row0 + i] = part[(rt * 2) * 16 + rr] + part[(rt * 2 + 1) * 16 + rr];
  }
  if (MODE >= 3) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned prev = atomicAdd(a.counters + r, 1u);
    last_flag = (prev == unsigned(a.G - 1));
    if (last_flag) a.counters[r] = 0;  // ready for the next call
  }
  __syncthreads();
  if (last_flag) {
    __threadfence();
    // All of a row's slab partials requested at once (8 at a time), summed in slab order.
    for (int i = threadIdx.x; i < rows; i += THREADS) {
      float sum = 0.f;
      for (int g0 = 0; g0 < a.G; g0 += 8) {
        float v[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = g0 + q < a.G ? __ldcg(a.ws + (size_t)(g0 + q) * a.N + row0 + i) : 0.f;
#pragma unroll
        for (int q = 0; q < 8; ++q) sum += v[q];
      }
      a.y[row0 + i] = sum;
    }
  }
}

// The floor: a grid-stride read of the same bytes, 4 x 16 B in flight per thread.
__global__ void __launch_bounds__(512) bare_read(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = ldg_stream(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { const uint4 v = ldg_stream(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678u) out[0] = acc;
}

static float e4m4_decode(uint8_t e) {
  const int E = e >> 4, m = e & 15;
  if (e == 0) return 0.f;
  if (E == 0) return std::ldexp(float(m), -14);
  return std::ldexp(1.f + m / 16.f, E - 11);
}

template <int BITS, int S, int THREADS, int MODE, int RR, int CL>
struct Variant {
  static size_t smem(int rtc_max) {
    return size_t((S + 1) / 2) * Lut<BITS>::kPairBytes + (S * 128 + 16) * 4 + size_t(rtc_max) * 32 * 4;
  }
  // The launch configuration (a cluster of CL CTAs where CL > 0); `attr` must outlive its use.
  static cudaLaunchConfig_t config(int grid, int rtc_max, cudaStream_t st, cudaLaunchAttribute& attr) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(THREADS);
    cfg.dynamicSmemBytes = smem(rtc_max);
    cfg.stream = st;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = CL > 0 ? CL : 1, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = CL > 0 ? 1 : 0;
    return cfg;
  }
  static void launch(const Args& a, int rtc_max, cudaStream_t st) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(a.G * a.R, rtc_max, st, attr);
    CK(cudaLaunchKernelEx(&cfg, lut_gemv<BITS, S, THREADS, MODE, RR, CL>, a));
  }
  static void setup(int rtc_max) {
    CK(cudaFuncSetAttribute(lut_gemv<BITS, S, THREADS, MODE, RR, CL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            int(smem(rtc_max))));
  }
};

template <int BITS, int S, int THREADS, int RR, int CL = 0>
static void run_config(int N, int K, int R, int buffers, int calls) {
  using L = Lut<BITS>;
  const int G = K / (S * 128), RT = N / 16;
  const int rtc_max = (RT + R - 1) / R;
  const size_t units = size_t(G) * RT * S, wbytes = units * L::kUnitBytes;
  std::mt19937 rng(1234);
  // Random codes and scales, the probe's layout.
  std::vector<uint8_t> codes(size_t(N) * K), scales(size_t(N) * (K / 32));
  for (auto& c : codes) c = rng() & ((1 << BITS) - 1);
  for (auto& s : scales) {
    const uint32_t v = rng() % 100;
    s = v < 2 ? 0 : v < 5 ? uint8_t(rng() % 16) : uint8_t(0x40 + rng() % 0x60);
  }
  std::vector<float> x(K);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  const float tscale = 0x1p-8f;
  const float bnf2[2] = {0.1964f, 0.6642f};
  const float bnf4[8] = {0.0499f, 0.1509f, 0.2551f, 0.3652f, 0.4846f, 0.6179f, 0.7739f, 0.9686f};
  float cb[16];
  const int half_levels = 1 << (BITS - 1);
  for (int i = 0; i < half_levels; ++i) {
    const float v = (BITS == 2 ? bnf2 : bnf4)[i] * tscale;
    cb[half_levels + i] = v;
    cb[half_levels - 1 - i] = -v;
  }
  std::vector<uint8_t> w(wbytes);
  for (int gg = 0; gg < G; ++gg)
    for (int rt = 0; rt < RT; ++rt)
      for (int s = 0; s < S; ++s) {
        uint8_t* up = w.data() + ((size_t(gg) * RT + rt) * S + s) * L::kUnitBytes;
        const int col0 = (gg * S + s) * 128;
        for (int l = 0; l < 32; ++l) {
          const int b = l >> 3, j = l & 7;
          for (int half = 0; half < 2; ++half) {
            const int row = rt * 16 + j + 8 * half;
            for (int i = 0; i < L::kGroupsPerBlock; ++i) {
              const int q = L::group(b, j, i);
              uint8_t key = 0;
              for (int c = 0; c < L::kGroupCols; ++c)
                key |= codes[size_t(row) * K + col0 + L::kGroupCols * q + c] << (BITS * c);
              up[4 * L::kLaneWords * l + L::kGroupsPerBlock * half + i] = key;
            }
            up[L::kKeyBytes + 2 * l + half] = scales[size_t(row) * (K / 32) + col0 / 32 + b];
          }
        }
      }
  std::vector<double> yref(N);
  for (int n = 0; n < N; ++n) {
    double acc = 0;
    for (int kb = 0; kb < K / 32; ++kb) {
      double bs = 0;
      for (int c = 0; c < 32; ++c) bs += double(x[kb * 32 + c]) * cb[codes[size_t(n) * K + kb * 32 + c]];
      acc += bs * e4m4_decode(scales[size_t(n) * (K / 32) + kb]);
    }
    yref[n] = acc;
  }

  std::vector<uint8_t*> dw(buffers);
  for (int i = 0; i < buffers; ++i) {
    CK(cudaMalloc(&dw[i], wbytes));
    CK(cudaMemcpy(dw[i], w.data(), wbytes, cudaMemcpyHostToDevice));
  }
  float *dx, *dws, *dy, *dcb;
  unsigned* dcnt;
  CK(cudaMalloc(&dx, K * 4));
  CK(cudaMalloc(&dws, size_t(G) * N * 4));
  CK(cudaMalloc(&dy, N * 4));
  CK(cudaMalloc(&dcb, 64));
  CK(cudaMalloc(&dcnt, (R + 1) * 4));
  CK(cudaMemcpy(dx, x.data(), K * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dcb, cb, 64, cudaMemcpyHostToDevice));
  CK(cudaMemset(dcnt, 0, (R + 1) * 4));
  Args a{dw[0], dx, dws, dcnt, dy, dcb, N, K, G, R, RT};
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  Variant<BITS, S, THREADS, 0, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 1, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 2, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 3, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 5, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 6, RR, CL>::setup(rtc_max);
  Variant<BITS, S, THREADS, 7, RR, CL>::setup(rtc_max);

  if (CL > 0) {
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = Variant<BITS, S, THREADS, 0, RR, CL>::config(G * R, rtc_max, nullptr, attr);
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, lut_gemv<BITS, S, THREADS, 0, RR, CL>, &cfg));
    printf("clusters of %d resident at once: %d (the grid has %d)\n", CL, clusters, R);
  }
  // Correctness (poisoned y), twice for bit-identity.
  std::vector<float> y1(N), y2(N);
  for (int rep = 0; rep < 2; ++rep) {
    CK(cudaMemset(dy, 0xff, N * 4));
    Variant<BITS, S, THREADS, 0, RR, CL>::launch(a, rtc_max, st);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(rep ? y2.data() : y1.data(), dy, N * 4, cudaMemcpyDeviceToHost));
  }
  double num = 0, den = 0;
  for (int n = 0; n < N; ++n) num += (y1[n] - yref[n]) * (y1[n] - yref[n]), den += yref[n] * yref[n];
  const bool same = memcmp(y1.data(), y2.data(), N * 4) == 0;
  printf("k=%d S=%d threads=%d RR=%d cluster=%d grid=%d (G=%d R=%d) smem=%zu B, %.2f MB: rel err %.3e, run-to-run %s\n", BITS, S, THREADS, RR, CL, G * R, G, R,
         Variant<BITS, S, THREADS, 0, RR, CL>::smem(rtc_max), wbytes / 1e6, std::sqrt(num / den), same ? "identical" : "DIFFERENT");

  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time_mode = [&](auto launch_one, const char* name) {
    cudaGraph_t gr;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int c = 0; c < calls; ++c) {
      Args ac = a;
      ac.w = dw[c % buffers];
      launch_one(ac);
    }
    CK(cudaStreamEndCapture(st, &gr));
    CK(cudaGraphInstantiate(&ge, gr, 0));
    std::vector<float> t;
    for (int rep = 0; rep < 18; ++rep) {
      CK(cudaEventRecord(e0, st));
      CK(cudaGraphLaunch(ge, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 3) t.push_back(ms * 1000.f / calls);
    }
    std::sort(t.begin(), t.end());
    const float med = t[t.size() / 2];
    printf("  %-28s %8.2f us  %5.2f TB/s (min %.2f)\n", name, med, wbytes / (med * 1e6), t.front());
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(gr));
  };
  time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 0, RR, CL>::launch(ac, rtc_max, st); }, "full");
  time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 1, RR, CL>::launch(ac, rtc_max, st); }, "no table build");
  time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 2, RR, CL>::launch(ac, rtc_max, st); }, "loads only");
  if (CL == 0) {
    time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 3, RR, CL>::launch(ac, rtc_max, st); }, "full, no slab sum");
    time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 5, RR, CL>::launch(ac, rtc_max, st); }, "loads only, no slab sum");
    time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 6, RR, CL>::launch(ac, rtc_max, st); }, "loads at entry, nothing else");
    time_mode([&](const Args& ac) { Variant<BITS, S, THREADS, 7, RR, CL>::launch(ac, rtc_max, st); }, "  the same, keys only");
  }
  if (CL == 0 && THREADS == 512) {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int per_sm : {1, 2, 4})
      time_mode([&](const Args& ac) {
        bare_read<<<sms * per_sm, 512, 0, st>>>(reinterpret_cast<const uint4*>(ac.w), wbytes / 16, dcnt + R);
      }, per_sm == 1 ? "bare read, 1 CTA / SM" : per_sm == 2 ? "bare read, 2 CTAs / SM" : "bare read, 4 CTAs / SM");
  }
  CK(cudaGetLastError());
  for (auto p : dw) CK(cudaFree(p));
  CK(cudaFree(dx));
  CK(cudaFree(dws));
  CK(cudaFree(dy));
  CK(cudaFree(dcb));
  CK(cudaFree(dcnt));
  CK(cudaStreamDestroy(st));
}

int main(int argc, char** argv) {
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs; glm47 q (N 12288, K 5120), M = 1\n", prop.name, prop.multiProcessorCount);
  const int N = 12288, K = 5120, calls = 20;
  const int only = argc > 1 ? atoi(argv[1]) : 0;
  if (only == 0 || only == 2) {
    run_config<2, 5, 512, 2>(N, K, 16, 10, calls);
    run_config<2, 5, 1024, 1>(N, K, 16, 10, calls);
    run_config<2, 4, 512, 2>(N, K, 13, 10, calls);
    run_config<2, 2, 512, 2>(N, K, 6, 10, calls);
  }
  if (only == 0 || only == 4) {
    run_config<4, 2, 512, 2>(N, K, 6, 6, calls);
    run_config<4, 2, 1024, 1>(N, K, 6, 6, calls);
    run_config<4, 1, 512, 2>(N, K, 3, 6, calls);
  }
  return 0;
}
