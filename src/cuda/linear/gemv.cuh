// The decode GEMV: y[M, N] = x[M, K] W^T (+ bias) (+ residual) for M = 1..4,
// W in the mma16 layout (layout.h, the same bytes the fused mma.sync kernel reads),
// x and y fp16 or bf16, fp16 products summed per 8 weights (HFMA2) or per 32-column block
// (tensor cores), fp32 across supertiles.
//
// Products: at M = 1 (and M = 2, k = 2) one HFMA2 per pair and token. From M = 3 (M = 2
// at k >= 3) the decoded pairs, which are m16n8k16 A fragments as they stand, go to the
// tensor cores: two mma.sync with fp16 accumulators per 32-column block, whatever M
// (kGemvTensorProducts: the rule and its measurements).
// Decode by table lookup in shared memory, replicated per lane (conflict-free):
// k = 4: one prmt turns a pair-code byte into the address of its packed fp16 pair
// (table of 256 x 256 bytes on a 64 KB boundary); k = 2: two bytes of a word give a
// quad code (two pairs) with one lop3, looked up with one 8-byte load (same table
// shape); k = 3: as k = 4, a quarter of the codes gathered from bits 6-7 of three words
// first; k = 5: the fused kernel's pair-code arithmetic, 32 replicas (one prmt joins a pair's 10-bit
// code: glm47 M = 1 k = 5 q 16.70 -> 15.56 us, shared_gu 31.95 -> 27.59; H200, 2026-12-04). Then the
// products against x held in shared memory as fp16.
// HFMA2: each lane sums 8 weights of a (row, block) in fp16; MMA: the block's 32 columns
// per row. The partial is scaled by the block scale with one more HFMA2 and converted to
// fp32 once per 128-column supertile.
// x is staged per CTA: each supertile of each token is stored as x * 2^e (|x| < 512 for
// HFMA2, < 64 for the MMAs' 4x longer sums) in fp16, so partial sums stay below 32768
// (|codebook| is normalised to 1, E4M4 / 16 < 2) whatever the activations' range; 2^-e
// comes back in the fp32 sum.
// Work split ("stream-K"): the (stripe, supertile) units of W are cut into equal
// contiguous ranges, one per warp, so every warp streams the same number of bytes
// with D units of loads in flight, across stripe boundaries. A stripe covered by
// one warp is written directly; a stripe split between warps is summed by the last
// warp to arrive (a counter), in warp order: bit-identical run to run. When all the
// stripe's warps are in one CTA (75-93% of the warps on glm47's large projections at
// M = 1) the pieces meet in shared memory instead of the workspace (a global fence and
// atomic, ~1.2 us at the end of a warp's range): a shared counter picks the last warp,
// an mbarrier that every lane arrives on orders the pieces before its sum.
// Launch: one CTA of 16 warps per SM (the tables and x take 64-228 KB of shared
// memory); grid of min(SMs, units / 32) CTAs, whole stripes per warp when splitting
// would gain less than 2x (1.33x at k = 2..4: gemv_dense_split, gemv_args.h).
// Grouped mode (kbit::expert_linear at decode): units over (tile of 1/2/4 rows of a
// non-empty expert, stripe, supertile) from the device offsets; x can be staged through
// a row gather or SwiGLU (GemvArgs::x_gather, x_swiglu; kbit::moe_forward's folds).
// Measured (H200, 2026-12-04, fifty-eighth session, cuBLAS bf16 in the same run; BENCHMARKS.md): M = 1
// glm47 q k = 2 / 3 / 4 / 5 12.93 / 13.59 / 14.09 / 15.49 us (1.37 / 1.88 / 2.37 / 2.67 TB/s; cuBLAS bf16
// 34.49), shared_gu k = 5 27.54 (3.00 TB/s, 68% of 4.40). The loop streams at ~3.7 TB/s; the rest is the
// start (x staged ~2.7 us after entry, behind the grid's first weight wave) and the tail (the last warp
// exits ~3 us after the median one; kbit bench gemv-probe). Grouped (kbit::expert_linear at decode):
// BENCHMARKS.md, MoE tables. Each change and its A/B: docs/KERNEL_HISTORY.md.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdlib>
#include <unordered_map>

#include "../bulk_copy.cuh"
#include "../common.cuh"
#include "fused_linear.cuh"
#include "gemv_args.h"
#include "gemv_smem.h"

namespace kbit::cuda::detail {

// Per launch: where the regions are, how many warps have units (grouped: computed on
// the device) and how many rows of x a CTA stages.
struct GemvLaunch {
  int lut_off = 0, x_off = 0, x_scales_off = 0, tile_table_off = 0, x_bar_off = 0, local_off = -1;
  int active_warps = 0;
  int x_rows = 1;
  // x's raw rows copied by the copy engine (cp.async.bulk) into their staged places and
  // converted there, where LDGs would return behind the warps' first weight loads
  // (gemv_x_bulk: 16-byte rows, no SwiGLU).
  bool x_bulk = false;
  int class_cost[kGemvClasses] = {0, 0, 0};  // the mixed kernel's unit costs (gemv_class_cost)
};

__device__ __forceinline__ uint32_t hfma2_u32(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
__device__ __forceinline__ uint32_t hmul2_u32(uint32_t a, uint32_t b) { return mul2<__half>(a, b); }

// d += a b on the tensor cores, m16n8k16 with fp16 accumulators: d[0] rows g, d[1] rows
// g + 8, each for tokens 2 c and 2 c + 1 (lane = 4 g + c).
__device__ __forceinline__ void mma_16816_f16acc(uint32_t (&d)[2], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};\n"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d = a b (no accumulator in: C is the zero register, where zeroing d first cost an
// instruction per register).
__device__ __forceinline__ void mma_16816_f16(uint32_t (&d)[2], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%8,%8};\n"
      : "=r"(d[0]), "=r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0u));
}

// lds128, sts128: fused_linear.cuh

template <typename T>
__device__ __forceinline__ float bits16_to_float(uint32_t b) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(__ushort_as_half(uint16_t(b)));
  } else {
    return __uint_as_float(b << 16);
  }
}

// The raw 16-bit activations of 8 columns from col of staged row t: `a` from x's row t
// (its row x_gather[t] / x_gather_div when gathering; the gate half with SwiGLU), `b`
// the up half (SwiGLU only); zeros past K and past row M. Loads only, so that a thread
// can have several chunks in flight.
struct XRaw {
  uint4 a = make_uint4(0u, 0u, 0u, 0u), b = make_uint4(0u, 0u, 0u, 0u);
};
__device__ __forceinline__ XRaw load_x8_raw(const GemvArgs& a, int t, int col) {
  XRaw r;
  if (t >= a.M) return r;
  const int64_t row = a.x_gather ? int64_t(__ldg(a.x_gather + t) / a.x_gather_div) : int64_t(t);
  const uint16_t* p = static_cast<const uint16_t*>(a.x) + row * a.ldx + col;
  auto load8 = [&](const uint16_t* q) {
    if (a.x_vec && col + 8 <= a.K) return __ldg(reinterpret_cast<const uint4*>(q));
    uint32_t w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = (col + 2 * i < a.K ? uint32_t(q[2 * i]) : 0u) | (col + 2 * i + 1 < a.K ? uint32_t(q[2 * i + 1]) << 16 : 0u);
    return make_uint4(w[0], w[1], w[2], w[3]);
  };
  r.a = load8(p);
  if (a.x_swiglu) r.b = load8(p + a.K);
  return r;
}

// The 8 activations of a raw chunk as floats (SwiGLU applied and rounded to T as
// cuda::swiglu writes it).
template <typename T>
__device__ __forceinline__ void x8_to_float(const GemvArgs& a, const XRaw& r, float (&v)[8]) {
  auto unpack = [](const uint4& q, float (&out)[8]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = bits16_to_float<T>(w[i] & 0xffffu);
      out[2 * i + 1] = bits16_to_float<T>(w[i] >> 16);
    }
  };
  unpack(r.a, v);
  if (a.x_swiglu) {
    float up[8];
    unpack(r.b, up);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = Element<T>::to_float(Element<T>::from_float(v[i] / (1.0f + expf(-v[i])) * up[i]));
  }
}

// k = 2: the k-steps decoded in registers, by prmt from the four levels (decode_pairs: ~6
// ALU instructions per 4 pairs), instead of by the quad table (1 PRMT + 1 LDS.64 per 2
// pairs, 2 shared-memory wavefronts): bit 2j + s is k-step s of block j, for every M and
// for grouped tiles. At k = 2 the table's lookups and x's reads
// need more shared-memory wavefronts per unit than the SM serves at full HBM rate; registers
// move part of that work to the ALUs. One block of four measured best (H200, 2026-12-02,
// glm47 k = 2): block 3 (0xc0) against the table alone 1.1% faster at M = 1, 1.3% at M = 2;
// block 0 (0x03) against block 3 another 1.7-2.7% at M = 1 and 0.3-0.8% at M = 2 except
// shared_gu (+0.2-0.5%); blocks 1 and 3 (0xcc) 1.5% and all (0xff) 13% slower than the table
// alone (the issue slots). glm47's M = 4 rows take another path and did not move.
inline constexpr unsigned kGemvK2RegisterSteps = 0x03u;

// The products of M tokens on the tensor cores (m16n8k16, fp16 accumulators; the decoded
// pairs are already A fragments) instead of one HFMA2 per pair and token: their cost does
// not grow with M. Measured (H200, 2026-12-02, glm47, GEMV forced, A/B in one call,
// h200-ab-gemv-tensor-products-session35.txt), time with MMAs / with HFMA2: M = 3, 4
// 0.65-0.97 at k = 2 and 4 (q M = 4 k = 2 22.7 -> 16.5 us, shared_gu 44.3 -> 29.0); M = 2
// 0.92-0.98 at k = 3, 4 and 0.97-1.00 at k = 5 on q, o, shared_gu, shared_dn (kv, a small
// W, 1.02-1.06: the dispatcher takes the fused kernel there), 1.02-1.03 at k = 2; M = 1
// 1.03-1.15 (latency: the MMA chain is longer than the HFMA2 one, and only one token of the
// eight is useful).
// M = 2, k = 2 on the MMAs with the two k-steps' chains split (each from zero, both added with
// the block scale): H100 0.975-0.985 of HFMA2's time on glm47, H200 1.027 (0.998-1.043; 2026-12-05,
// bench/results/gemv-mma-m2-k2-split-chains-dropped-session68.patch): HFMA2 kept there.
template <int KB, int M>
inline constexpr bool kGemvTensorProducts = M >= 3 || (M == 2 && KB >= 3);

// Pair codes of k-step s of block j as packed fp16 pairs a[0..3] (rows g, g+8, g, g+8).
// pool_lo / pool_hi: k = 2's levels for the register decode (k2_level_pools).
template <int KB>
__device__ __forceinline__ void gemv_decode(const uint32_t (&w)[2 * KB], int j, int s, uint32_t lut_lane,
                                            uint32_t pool_lo, uint32_t pool_hi, uint32_t (&a)[4]) {
  if constexpr (KB == 2) {
    if ((kGemvK2RegisterSteps >> (2 * j + s)) & 1u) {
      decode_pairs<2>(w, j, s, 0u, pool_lo, pool_hi, a);
      return;
    }
  }
  if constexpr (KB == 3 || KB == 4) {
    // address = lut + 256 * code + 4 * lane: the code byte goes straight into byte 1.
    const uint32_t codes = pair_code_bytes<KB>(w, j, s);
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

// GROUPED: the tile table in shared memory from the device offsets: tile_start[e], the
// first tile of expert e (tiles of `rows` rows), and row_start[e] = offsets[e], for e in
// 0..experts. One thread per expert and pass (one pass up to 512 experts): a warp scan of
// the tile counts, the warps' totals through shared memory, two CTA barriers per pass.
// (The fused kernel's build_tile_table has warp 0 walk ceil(E / 32) experts per lane,
// a serial chain of shared-memory loads, 17 per lane at E = 512.)
__device__ __forceinline__ void build_gemv_tile_table(const int32_t* offsets, int experts, int rows,
                                                      int32_t* tile_start, int32_t* row_start,
                                                      int32_t* warp_tiles, int count_lo = 0,
                                                      int count_hi = 0x7fffffff) {
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
  int carry = 0;  // tiles before this pass's first expert
  for (int e0 = 0; e0 < experts; e0 += kGemvWarps * 32) {
    const int e = e0 + int(threadIdx.x);
    int lo = 0, hi = 0;
    if (e < experts) lo = offsets[e], hi = offsets[e + 1];
    // Tiles only for experts whose row count is in [count_lo, count_hi] (a class of the mixed
    // kernel: gemv_class_min_rows / max_rows); the others own rows but no tiles here.
    const int count = hi - lo >= count_lo && hi - lo <= count_hi ? udiv(hi - lo + rows - 1, rows) : 0;
    const int incl = warp_inclusive_sum(count, lane);
    if (lane == 31) warp_tiles[warp] = incl;
    __syncthreads();
    const int w_tiles = lane < kGemvWarps ? warp_tiles[lane] : 0;
    const int before = carry + __reduce_add_sync(0xffffffffu, lane < warp ? w_tiles : 0);
    if (e < experts) {
      tile_start[e] = before + incl - count, row_start[e] = lo;
      if (e == experts - 1) tile_start[experts] = before + incl, row_start[experts] = hi;
    }
    carry += __reduce_add_sync(0xffffffffu, w_tiles);
    __syncthreads();  // warp_tiles is rewritten by the next pass; the table is complete after the last
  }
}

// GROUPED (kbit::expert_linear): W stacks args.experts matrices of args.stripes stripes,
// x and y are [args.M, *] rows in expert order, expert e owning rows [offsets[e],
// offsets[e + 1]) (device memory). The units are (tile of M rows of one non-empty
// expert, stripe, supertile); a segment (tile, stripe) plays the part of a stripe.
// The CTAs a body runs on: all of the grid, or one class of the mixed kernel (CTAs
// [cta_base, cta_base + ctas) running the experts whose rows make tiles of M rows). tile_base:
// the class's first tile among all classes' (its counters follow the classes before it).
// The class's row counts follow from its tile rows M (1: one row, 2: two, 4: three or more).
struct GemvClass {
  int cta = 0, ctas = 1, cta_base = 0, tile_base = 0;
};

// CLASS >= 0: the mixed kernel's class (gemv_class_of), whose tiles have M rows.
template <int KB, typename T, int M, bool GROUPED, int CLASS = -1>
__device__ __forceinline__ void gemv_body(const GemvArgs& args, const GemvLaunch& launch, const GemvClass cls) {
  constexpr bool MIXED = CLASS >= 0;
  static_assert(!MIXED || (GROUPED && gemv_class_rows(CLASS) == M), "a class of the mixed tiles, M rows each");
  constexpr int D = KB == 2 ? 6 : (KB == 3 ? 4 : 3);  // units of weight loads in flight per warp (~3 KB)
  constexpr int kThreads = kGemvWarps * 32;
  extern __shared__ __align__(16) uint32_t smem_words[];  // the fused kernel's name and type
  uint8_t* smem = reinterpret_cast<uint8_t*>(smem_words);
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(smem));
  const int lut_off = launch.lut_off, x_off = launch.x_off;
  float* x_scales = reinterpret_cast<float*>(smem + launch.x_scales_off);  // [rows][S]: 2^-e per supertile
  const float tensor_scale = args.meta->tensor_scale;  // issued early, used at the end
  // Diagnostics only (GemvArgs::probe): a phase's %globaltimer, lane 0 of each warp.
  unsigned long long* const probe =
      args.probe ? args.probe + (int64_t(blockIdx.x) * kGemvWarps + warp) * kGemvProbeSlots : nullptr;
  auto stamp = [&](int slot) {
    if (probe && lane == 0) {
      unsigned long long t;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
      probe[slot] = t;
    }
  };
  stamp(kProbeEntry);
  if (probe && lane == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    probe[kProbeSmid] = sm;
  }
#ifdef KBIT_GEMV_PROBE_PHASES
  auto stamp_phase = stamp;
#else
  auto stamp_phase = [](int) {};
#endif
  // PDL: let the next call's CTAs start on the SMs this grid leaves (its weight loads and
  // table build overlap this call's tail); they wait (griddepcontrol.wait) before reading
  // anything this call writes. Only when this call was itself launched with PDL.
  if (args.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  const int64_t S = args.supertiles;
  const int US = args.stripes * int(S);  // units per tile (one matrix)
  int64_t U = US;                        // all units
  int active_warps = launch.active_warps;
  // GROUPED: [experts + 1] each (build_gemv_tile_table), then the scan's per-warp counts.
  // kRowTiles: row_expert, the expert of each row the CTA stages (-1: none), written below.
  int32_t* tile_start = reinterpret_cast<int32_t*>(smem + launch.tile_table_off);
  int32_t* row_start = tile_start + args.experts + 1;
  int32_t* const row_expert = tile_start;
  // GROUPED with 1-row tiles: tile t is row t whatever the routing, so the units, the
  // warps' ranges and the rows a CTA stages are known without the offsets. x is requested
  // before the offsets arrive and the weights right after one round trip to them (the
  // tile table's scan, its barriers and a search were on that path).
  constexpr bool kRowTiles = GROUPED && M == 1 && !MIXED;
  int row_base = 0;  // GROUPED: the first row of x that the CTA stages
  // MIXED: the class's tiles lie anywhere in x's rows, so the CTA stages its tiles' rows
  // through a map, M per tile from its first tile (staged_src[r]: x's row, args.M for none).
  int mixed_t_first = 0, staged_rows = launch.x_rows;
  int32_t* const staged_src = row_start + args.experts + 1 + kGemvWarps;
  if constexpr (GROUPED) {
    // The offsets come from the routing kernel: wait for it before reading them.
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if constexpr (!kRowTiles) {
      if constexpr (MIXED) {
        build_gemv_tile_table(args.expert_offsets, args.experts, M, tile_start, row_start, row_start + args.experts + 1,
                              gemv_class_min_rows(CLASS), gemv_class_max_rows(CLASS));
      } else {
        build_gemv_tile_table(args.expert_offsets, args.experts, M, tile_start, row_start, row_start + args.experts + 1);
      }
      stamp_phase(kProbeOffsetsRead);
    }
    const int tiles = kRowTiles ? args.M : tile_start[args.experts];
    U = int64_t(tiles) * US;
    // Whole segments, one per warp, where an even share would save a warp at most
    // kGemvSplitSlack units: a split segment's pieces meet through a counter and a second
    // pass, which costs about that much.
    const int all_warps = cls.ctas * kGemvWarps, segments = tiles * args.stripes;
    const int even_share = udiv(int(U) + all_warps - 1, all_warps);
    active_warps = segments < all_warps && int(S) <= even_share + kGemvSplitSlack ? segments
                                                                                 : int(min(int64_t(all_warps), U));
    if (U == 0) return;
  }
  // GROUPED: the expert of a tile (the last e whose first tile is <= it) and its first row.
  // The tile is the same in every lane and all 32 lanes call: two rounds of one shared load
  // and a ballot (experts in 32 slots of ceil(E / 32), then within the slot), where a binary
  // search was ~8 dependent shared loads (log2 E) on the way to the first weight requests.
  auto expert_of = [&](int tile) {
    if constexpr (kRowTiles) {
      const int e = row_expert[tile - row_base];
      return e >= 0 && e < args.experts ? e : -1;  // -1: a row no expert owns (or inconsistent offsets)
    }
    const int per = (args.experts + 31) >> 5;
    const int c = lane * per;
    const unsigned slots = __ballot_sync(0xffffffffu, c < args.experts && tile_start[c] <= tile);  // bit 0: start 0
    const int base = (31 - __clz(slots)) * per, f = base + lane;
    const unsigned within = __ballot_sync(0xffffffffu, lane < per && f < args.experts && tile_start[f] <= tile);
    return base + 31 - __clz(within);
  };
  auto first_row = [&](int tile, int e) { return kRowTiles ? tile : row_start[e] + (tile - tile_start[e]) * M; };
  const int wg = cls.cta * kGemvWarps + warp;
  const bool active = wg < active_warps;
  // Warp w's units start at w * uq + min(w, ur): the first ur warps take uq + 1. 32-bit
  // arithmetic (U < 2^30, the host checks; active_warps <= U): the w * U / warps form
  // needed 64-bit divisions (emulated, dozens of dependent instructions), five on the
  // split-stripe sum at the end of the kernel. Unsigned (udiv, common.cuh says why).
  const int uq = udiv(int(U), max(active_warps, 1)), ur = int(U) - uq * active_warps;
  auto range_start = [&](int w) { return w * uq + min(w, ur); };
  // The warp whose range holds unit u (two 32-bit divisions at most, per split stripe).
  auto owner = [&](int u) {
    const int big = ur * (uq + 1);  // the units of the first ur warps
    return u < big ? udiv(u, uq + 1) : ur + udiv(u - big, uq);
  };
  const int u0 = active ? range_start(wg) : 0;
  const int u1 = active ? range_start(wg + 1) : 0;
  if constexpr (GROUPED) {
    if (cls.cta * kGemvWarps >= active_warps) return;  // the whole CTA has no units
  }

  // The first D units of weights: they do not depend on the previous kernel.
  using StageT = Stage<KB>;
  // A ring of D + 1 stages: unit u + D loads into the stage consumed one step ago, so
  // the current stage is never copied (a plain D-ring cost ~18 register moves per unit).
  StageT stages[D + 1];
  const uint2* wbase = args.words + lane;
  const uint2* scbase = args.scales + g;
  // GROUPED: W's unit for unit u is u + (expert - tile) * US; u only grows, so the
  // expert is looked up once per tile.
  int load_tile_end = 0, load_shift = 0;
  auto load_stage = [&](StageT& sg, int u) {
    if constexpr (GROUPED) {
      if (u >= load_tile_end) {
        const int tile = udiv(u, US);
        const int e = expert_of(tile);
        load_shift = ((kRowTiles ? max(e, 0) : e) - tile) * US;  // a row without an expert reads expert 0's
        load_tile_end = (tile + 1) * US;
      }
      u += load_shift;
    }
    const uint2* p = wbase + int64_t(u) * (KB * 32);
#pragma unroll
    for (int q = 0; q < KB; ++q) sg.w[q] = load_stream(p + q * 32);
    sg.scales = __ldg(scbase + int64_t(u) * 8);
  };
  // Loads ahead of the unit being computed. Dense: nothing past the range's end. Grouped:
  // the range's last unit again (that measured 1-3% faster there than no load; the reasons
  // are not known).
  auto load_ahead = [&](StageT& sg, int u) {
    if constexpr (GROUPED) {
      load_stage(sg, min(u, u1 - 1));
    } else if (u < u1) {
      load_stage(sg, u);
    }
  };
  // x's first batch of chunks is requested before the weights: dense calls without PDL
  // (with PDL, x may not be written yet) and grouped calls (below; they have waited for the
  // previous kernel already). Its data reaches the registers only with the warp's first
  // weights (~3 us after entry; a lone cold load takes 0.2-0.5: kbit bench first-load,
  // 2026-12-02), which the loop needs first anyway; issuing the weights later measured
  // slower (4e73e85).
  // (Two chunks, no SwiGLU half: few registers live across the weight requests; M = 1
  // up to K = 8192 is all of x.)
  constexpr int kXBatch = 4, kXEarly = kGemvXEarlyChunks;  // chunks of 8 columns per thread in flight
  const int x_row_chunks = int(S * 16), x_chunks = launch.x_rows * x_row_chunks;  // 16 | row_chunks
  const bool early_x = !GROUPED && !args.pdl && !args.x_swiglu;
  uint4 x_early[kXEarly];
  auto request_early_x = [&](int row_base) {
#pragma unroll
    for (int b = 0; b < kXEarly; ++b) {
      const int chunk = int(threadIdx.x) + b * kThreads;
      if (chunk < x_chunks) x_early[b] = load_x8_raw(args, row_base + udiv(chunk, x_row_chunks), umod(chunk, x_row_chunks) * 8).a;
    }
  };
  // x by bulk copies (GemvLaunch::x_bulk): warp 0 arms the barrier and issues one copy of K
  // values per staged row that holds data (x_staged_row(r) < M) to its place in the staged x;
  // every thread waits on it after a CTA barrier (for the barrier's init) and converts in place.
  const uint32_t xs = sbase + uint32_t(x_off), x_bar = sbase + uint32_t(launch.x_bar_off);
  // (Not in the mixed kernel: its three bodies spilled 4 bytes at k = 4, fp16, with them.)
  const bool x_bulk = !MIXED && launch.x_bulk;
  auto x_staged_row = [&](int r) { return MIXED ? staged_src[r] : row_base + r; };  // args.M and up: none
  auto issue_x_bulk = [&](int rows) {
    if (warp != 0) return;
    if (lane == 0) {
      mbarrier_init(x_bar, 1);
      mbarrier_init_fence();
    }
    __syncwarp();
    const uint32_t row_bytes = uint32_t(args.K) * 2;
    unsigned copies = 0;
    for (int r0 = 0; r0 < rows; r0 += 32)
      copies += __popc(__ballot_sync(0xffffffffu, r0 + lane < rows && x_staged_row(r0 + lane) < args.M));
    if (lane == 0) mbarrier_arrive_expect_tx(x_bar, copies * row_bytes);
    for (int r = lane; r < rows; r += 32) {
      const int t = x_staged_row(r);
      if (t >= args.M) continue;
      const int64_t row = args.x_gather ? int64_t(__ldg(args.x_gather + t) / args.x_gather_div) : int64_t(t);
      bulk_copy_to_shared(xs + uint32_t(r) * uint32_t(S * 256), static_cast<const uint16_t*>(args.x) + row * args.ldx,
                          row_bytes, x_bar);
    }
  };
  if (x_bulk && !args.pdl && !GROUPED) issue_x_bulk(launch.x_rows);
  else if (early_x) request_early_x(0);
  // GROUPED: the CTA stages only the rows of the tiles its units span (launch.x_rows at
  // most, rows past args.M are zeros), from row_base on. Its first chunks are requested
  // before the weights, as in dense calls. (After the weights measured 1-2% faster at T = 1
  // and 2-4% slower at T = 16 on GLM-4.7, H200, 2026-12-02; not understood, the loop's
  // work is the same; bench/results/h200-ab-grouped-gemv-start-v5-session40.jsonl.)
  if constexpr (GROUPED) {
    const int w_first = cls.cta * kGemvWarps, w_last = min(w_first + kGemvWarps, active_warps) - 1;
    const int cu0 = range_start(w_first), cu1 = range_start(w_last + 1);
    const int t_first = udiv(cu0, US), t_last = udiv(cu1 - 1, US);
    if constexpr (kRowTiles) {
      row_base = t_first;
      const int rows = t_last + 1 - row_base;
      if (rows > launch.x_rows) __trap();  // host bound broken
      if (x_bulk) issue_x_bulk(launch.x_rows);
      else if (!args.x_swiglu) request_early_x(row_base);
      // row_expert[r] for the CTA's rows: thread e writes expert e's rows in the window, a
      // thread per row outside [offsets[0], offsets[E]) writes -1. One round trip to the
      // offsets and one CTA barrier.
      const int i = int(threadIdx.x);
      const int covered_lo = args.expert_offsets[0], covered_hi = args.expert_offsets[args.experts];
      for (int e0 = 0; e0 < args.experts; e0 += kThreads) {
        const int e = e0 + i;
        int lo = 0, hi = 0;
        if (e < args.experts) lo = args.expert_offsets[e], hi = args.expert_offsets[e + 1];
        for (int r = max(lo, row_base), r_end = min(hi, row_base + rows); r < r_end; ++r) row_expert[r - row_base] = e;
      }
      for (int r = i; r < rows; r += kThreads)
        if (row_base + r < covered_lo || row_base + r >= covered_hi) row_expert[r] = -1;
      stamp_phase(kProbeOffsetsRead);
      __syncthreads();
    } else if constexpr (MIXED) {
      mixed_t_first = t_first;
      staged_rows = (t_last + 1 - t_first) * M;
      if (staged_rows > launch.x_rows) __trap();  // the kernel's class split bounds it
      for (int r = int(threadIdx.x); r < staged_rows; r += kThreads) {
        const int tile = t_first + r / M;
        int lo = 0, hi = args.experts - 1;  // the last expert whose first tile is <= tile: its owner
        while (lo < hi) {
          const int mid = (lo + hi + 1) >> 1;
          if (tile_start[mid] <= tile) lo = mid;
          else hi = mid - 1;
        }
        const int src = row_start[lo] + (tile - tile_start[lo]) * M + r % M;
        staged_src[r] = src < row_start[lo + 1] ? src : args.M;
      }
      __syncthreads();
    } else {
      row_base = first_row(t_first, expert_of(t_first));
      if (first_row(t_last, expert_of(t_last)) + M - row_base > launch.x_rows) __trap();  // host bound broken
      if (x_bulk) issue_x_bulk(launch.x_rows);
      else if (!args.x_swiglu) request_early_x(row_base);
    }
  }
  if (active) {
#pragma unroll
    for (int d = 0; d < D; ++d) load_ahead(stages[d], u0 + d);
  }
  stamp(kProbeLoadsIssued);

  // The pair table from the normalised fp16 codebook in the arguments. k = 5: lane l holds
  // level l (one parameter load per thread) and the 16 rounds of the table take their
  // levels by shuffle, where indexed parameter loads (32 addresses per warp, served one
  // at a time by the constant cache) made the call 1-2.4% slower (H200 A/B, 2026-12-01).
  // k = 2..4 keep the parameter loads (4-16 addresses): shuffles were slower at k = 2
  // (+2-5%), the same at k = 3, 4. A generic load of the parameter buffer queues behind
  // the weight requests instead (table 1-2 us later).
  // Built after the first weight requests, under their latency (grouped calls too: built
  // while the offsets were in flight it delayed the requests; H200, 2026-12-02, forty-first
  // session: GLM-4.7 moe_dn T = 1 16.2 -> 15.6 us, Qwen3-Coder-Next moe_gu T = 1 10.1 -> 9.4).
  // (All threads: the k = 5 loop runs whole warps.)
  static_assert((1 << (2 * 5)) * 8 % kThreads == 0, "the k = 5 table loop runs whole warps (the shuffles)");
  uint32_t lut_lane = 0;
  {
    [[maybe_unused]] const uint32_t cb_lane = KB == 5 ? uint32_t(args.codebook16[lane]) : 0u;
    auto level = [&](int i) -> uint32_t {
      if constexpr (KB == 5) {
        return __shfl_sync(0xffffffffu, cb_lane, i);  // every lane of the warp is here (loops of whole CTAs)
      } else {
        return args.codebook16[i];
      }
    };
    if constexpr (KB == 2) {
      const uint32_t lut = sbase + uint32_t(lut_off);
      if (lut & 0xffffu) __trap();  // the host placed the table on a 64 KB boundary of the window
      for (int i = int(threadIdx.x); i < 256 * 16; i += kThreads) {  // 16 x 16 bytes per entry (32 lanes)
        // quad code b: pair 0 = (b & 3, b >> 4 & 3), pair 1 = (b >> 2 & 3, b >> 6 & 3)
        const int b = i >> 4;
        const uint32_t p0 = level(b & 3) | level((b >> 4) & 3) << 16;
        const uint32_t p1 = level((b >> 2) & 3) | level((b >> 6) & 3) << 16;
        sts128(lut + uint32_t(b) * 256 + uint32_t(i & 15) * 16, make_uint4(p0, p1, p0, p1));
      }
      lut_lane = lut + uint32_t(lane) * 8;
    } else if constexpr (KB == 3 || KB == 4) {
      const uint32_t lut = sbase + uint32_t(lut_off);
      if (lut & 0xffffu) __trap();  // the host placed the table on a 64 KB boundary of the window
      constexpr int mask = (1 << KB) - 1;
      for (int i = int(threadIdx.x); i < 256 * 8; i += kThreads) {  // 8 x 16 bytes per entry (32 lanes)
        const int e = i >> 3;
        const uint32_t v = level(e & mask) | level((e >> KB) & mask) << 16;
        sts128(lut + uint32_t(e) * 256 + uint32_t(i & 7) * 16, make_uint4(v, v, v, v));
      }
      lut_lane = lut + uint32_t(lane) * 4;
    } else {  // 2^(2k) pair codes x 32 lanes
      const uint32_t lut = sbase + uint32_t(lut_off);
      for (int i = int(threadIdx.x); i < (1 << (2 * KB)) * 8; i += kThreads) {
        const int entry = i >> 3;
        const uint32_t v = level(entry & ((1 << KB) - 1)) | level(entry >> KB) << 16;
        sts128(lut + uint32_t(i) * 16, make_uint4(v, v, v, v));
      }
      lut_lane = lut + uint32_t(lane) * 4;
    }
  }
  stamp(kProbeTableBuilt);
  // x, y, the residual and the workspace may come from the previous kernel.
  if constexpr (!GROUPED) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (x_bulk && args.pdl) issue_x_bulk(launch.x_rows);
  }

  // Stage x: each run of 16 threads converts one supertile (128 values) of one token to
  // fp16 times 2^e, e chosen from the run's absmax so that |x| * 2^e < 2^kXLog2Max: 512
  // for the HFMA2 products (8 products per fp16 partial), 64 for the MMAs (32 per partial).
  constexpr bool kTensor = kGemvTensorProducts<KB, M>;
  constexpr int kXLog2Max = kTensor ? 6 : 9;
  const bool has_local = launch.local_off >= 0;
  float* const local_pieces = reinterpret_cast<float*>(smem + (has_local ? launch.local_off : 0));
  // Per warp w of the CTA, for the split stripe that starts in w's range (its last one) when
  // all its warps are in this CTA: an arrival counter (picks the warp that sums) and an
  // mbarrier that all the stripe's lanes arrive on (orders the pieces before the sum).
  unsigned* const local_counters = reinterpret_cast<unsigned*>(local_pieces + kGemvLocalPieceFloats);
  const uint32_t local_bars = sbase + uint32_t(has_local ? launch.local_off : 0) +
                              uint32_t(kGemvLocalPieceFloats * 4 + kGemvWarps * 4);
  if (has_local && active && lane == 0) {
    local_counters[warp] = 0;
    const int s0 = udiv(u1 - 1, int(S)) * int(S);
    const int first = owner(s0), last = owner(s0 + int(S) - 1);
    if (first == wg && last != wg && first / kGemvWarps == last / kGemvWarps)
      mbarrier_init(local_bars + uint32_t(warp) * 8, uint32_t(32 * (last - first + 1)));
  }  // used after the staging barrier
  const int64_t kpad = S * 128;
  {
    // Chunks of 8 columns; a thread loads kBatch chunks before converting any, so that
    // long rows (K = 12288, or 4 rows) do not pay one global latency per chunk. With bulk
    // copies the raw chunks are in place already: loaded from there, converted in place.
    constexpr int kBatch = kXBatch;
    const int row_chunks = x_row_chunks, chunks = MIXED ? staged_rows * x_row_chunks : x_chunks;
    const bool requested_early = !x_bulk && (early_x || (GROUPED && !MIXED && !args.x_swiglu));
    if (x_bulk) {
      __syncthreads();  // the barrier's init, by warp 0
      mbarrier_wait(x_bar, 0);
    }
    // One chunk: x8 as floats, its run's 2^e, the fp16 values stored in place (the same for
    // the 16 threads of a run).
    auto convert_store = [&](int chunk, const XRaw& raw, bool first) {
      float v[8];
      x8_to_float<T>(args, raw, v);
      // (The comparison makes the stamp wait for x's data; it folds away without the probe phases.)
      if (first && v[0] != 12345.0f) stamp_phase(kProbeXArrived);
      float m = 0.0f;
#pragma unroll
      for (int i = 0; i < 8; ++i) m = fmaxf(m, fabsf(v[i]));
      const unsigned half_warp = 0xffffu << (threadIdx.x & 16);  // a run of 16 threads
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(half_warp, m, off));
      int e = 0;
      if (m > 0.0f && isfinite(m)) {
        int ex;
        frexpf(m, &ex);  // m in [2^(ex-1), 2^ex): m * 2^(kXLog2Max - ex) below 2^kXLog2Max
        e = max(-100, min(100, kXLog2Max - ex));
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
    };
    if (x_bulk) {
      // The copied rows' chunks from shared memory; rows without data and columns past K
      // are zeros (never copied).
      for (int chunk = int(threadIdx.x); chunk < chunks; chunk += kThreads) {
        XRaw raw;
        if (x_staged_row(udiv(chunk, row_chunks)) < args.M && umod(chunk, row_chunks) * 8 < args.K)
          raw.a = lds128(xs + uint32_t(chunk) * 16);
        convert_store(chunk, raw, chunk == int(threadIdx.x));
      }
    } else {
      for (int c0 = int(threadIdx.x); c0 < chunks; c0 += kBatch * kThreads) {
        XRaw raw[kBatch];
        const int early = requested_early && c0 == int(threadIdx.x) ? kXEarly : 0;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int chunk = c0 + b * kThreads;
          if (b < early) {
            if (chunk < chunks) raw[b].a = x_early[b];
          } else if (chunk < chunks) {
            raw[b] = load_x8_raw(args, x_staged_row(udiv(chunk, row_chunks)), umod(chunk, row_chunks) * 8);
          }
        }
#pragma unroll
        for (int b = 0; b < kBatch; ++b) {
          const int chunk = c0 + b * kThreads;
          if (chunk >= chunks) break;  // the same for the 16 threads of a run
          convert_store(chunk, raw[b], b == 0 && c0 == int(threadIdx.x));
        }
      }
    }
  }
  __syncthreads();
  stamp(kProbeXStaged);
  if (probe && lane == 0) probe[kProbeUnits] = (unsigned long long)(u1 - u0);
  if (!active) return;

  // Piece of a stripe: [pu0, pu1) units. Sums the 4 lanes of a row pair, then writes y
  // (whole stripe) or a piece; the last piece of a split stripe sums all in warp order.
  const uint32_t x_lane = sbase + uint32_t(x_off) + uint32_t(8 * c) * 2;
  const T* bias = static_cast<const T*>(args.bias);
  const T* res = static_cast<const T*>(args.residual);
  T* y = static_cast<T*>(args.y);
  // The compute cursor's tile: its first row, end row and row in the staged x.
  int tile_m0 = 0, tile_m_end = args.M, tile_xrow = 0, tile_seg0 = 0;
  // Lane c's 8 staged columns 32 j + 8 c .. + 8 of staged row r at supertile st, and that
  // row's 2^-e there.
  auto x_chunk = [&](int r, int st, int j) { return lds128(x_lane + uint32_t((r * kpad + st * 128 + 32 * j) * 2)); };
  auto x_scale_of = [&](int r, int st) { return x_scales[r * S + st]; };
  auto enter_tile = [&](int tile) {
    if constexpr (kRowTiles) {
      tile_m0 = tile;
      tile_m_end = expert_of(tile) >= 0 ? tile + 1 : tile;  // no store for a row without an expert
      tile_xrow = tile - row_base;
      tile_seg0 = tile * args.stripes;
    } else if constexpr (GROUPED) {
      const int e = expert_of(tile);
      tile_m0 = first_row(tile, e);
      tile_m_end = row_start[e + 1];
      tile_xrow = MIXED ? (tile - mixed_t_first) * M : tile_m0 - row_base;
      tile_seg0 = tile * args.stripes;
    }
  };
  // y for lane c's token, rows 16 * stripe + g and + 8: scale, bias, residual.
  auto store = [&](int stripe, float v0, float v1) {
    const int64_t token = int64_t(tile_m0) + c;
    if (c < M && token < tile_m_end) {
      const float sc = tensor_scale * args.out_factor;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = int64_t(stripe) * 16 + g + 8 * h;
        if (row < args.N) {
          float v = (h ? v1 : v0) * sc;
          if (bias) v += Element<T>::to_float(bias[row]);
          if (res) v += Element<T>::to_float(res[token * args.ldr + row]);
          y[token * args.ldy + row] = Element<T>::from_float(v);
        }
      }
    }
  };
  // A warp has two piece slots: 0 for the split stripe its range starts in, 1 for the one
  // it ends in. The writer knows which by where its piece starts; a reader finds warp w's
  // piece of a stripe in slot 0 when w's range starts inside that stripe.
  auto own_slot = [&](int piece_start) { return piece_start == u0 ? 0 : 1; };
  // Workspace pieces: slots of 16 rows x M tokens (MIXED: x 4, whatever the class's M, since
  // the classes' warps share the slots' numbering); counters: the class's after those before.
  constexpr int kPieceFloats = 16 * (MIXED ? kGemvMaxM : M);
  unsigned* const counters = args.counters + int64_t(cls.tile_base) * args.stripes;
  float* const pieces = args.pieces + int64_t(cls.cta_base) * (2 * kGemvWarps * kPieceFloats);
  auto slot_of = [&](int w, int stripe_seg) { return range_start(w) >= stripe_seg * int(S) ? 0 : 1; };
  // acc: HFMA2 products [token][row g + 8 h], lane c's quarter of the columns; MMAs [token
  // 2 c + i][row g + 8 h], whole rows.
  constexpr int kAccTokens = kTensor ? 2 : M;
  auto finish = [&](int stripe_seg, int pu0, int pu1, float (&acc)[kAccTokens][2]) {
    const int stripe = stripe_seg - tile_seg0;  // within the matrix (dense: the segment is the stripe)
    // lane c handles token c
    float v0 = 0.0f, v1 = 0.0f;
    if constexpr (kTensor) {
      // held by lane (g, c / 2) as its token 2 (c / 2) + (c & 1)
      const int src = (lane & ~3) | (c >> 1);
      const float t0h0 = __shfl_sync(0xffffffffu, acc[0][0], src), t1h0 = __shfl_sync(0xffffffffu, acc[1][0], src);
      const float t0h1 = __shfl_sync(0xffffffffu, acc[0][1], src), t1h1 = __shfl_sync(0xffffffffu, acc[1][1], src);
      v0 = (c & 1) ? t1h0 : t0h0, v1 = (c & 1) ? t1h1 : t0h1;
    } else {
#pragma unroll
      for (int t = 0; t < M; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          acc[t][h] += __shfl_xor_sync(0xffffffffu, acc[t][h], 1);
          acc[t][h] += __shfl_xor_sync(0xffffffffu, acc[t][h], 2);
        }
#pragma unroll
      for (int t = 0; t < M; ++t)
        if (t == c) v0 = acc[t][0], v1 = acc[t][1];
    }
    if (pu0 != stripe_seg * int(S) || pu1 != (stripe_seg + 1) * int(S)) {
      const int first = owner(stripe_seg * int(S)), last = owner(stripe_seg * int(S) + int(S) - 1);
      if (has_local && first / kGemvWarps == last / kGemvWarps) {
        // Every piece of the stripe is in this CTA: the pieces meet in shared memory (a
        // shared atomic and an mbarrier instead of ~1.2 us of global fence, atomic and
        // loads), summed by the last warp to arrive in warp order as below.
        float* piece = local_pieces + (2 * warp + own_slot(pu0)) * 16 * M;
        if (c < M) piece[g * M + c] = v0, piece[(g + 8) * M + c] = v1;
        const int base = (first / kGemvWarps) * kGemvWarps;
        const uint32_t bar = local_bars + uint32_t(first - base) * 8;
        mbarrier_arrive(bar);  // release: this lane's piece values
        __syncwarp();
        unsigned arrived = 0;
        if (lane == 0) arrived = atomicAdd(local_counters + (first - base), 1u);
        arrived = __shfl_sync(0xffffffffu, arrived, 0);
        if (arrived != unsigned(last - first)) return;
        mbarrier_wait(bar, 0);  // acquire: every lane of every warp has arrived (at once, in practice)
        v0 = 0.0f, v1 = 0.0f;
        if (c < M)
          for (int w = first; w <= last; ++w) {
            const float* p = local_pieces + (2 * (w - base) + slot_of(w, stripe_seg)) * 16 * M;
            v0 += p[g * M + c], v1 += p[(g + 8) * M + c];
          }
      } else {
        float* piece = pieces + (2 * int64_t(wg) + own_slot(pu0)) * kPieceFloats;
        if (c < M) piece[g * M + c] = v0, piece[(g + 8) * M + c] = v1;
        __threadfence();
        __syncwarp();
        unsigned arrived = 0;
        if (lane == 0) arrived = atomicAdd(counters + stripe_seg, 1u);
        arrived = __shfl_sync(0xffffffffu, arrived, 0);
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
                const float* p = pieces + (2 * int64_t(w) + slot_of(w, stripe_seg)) * kPieceFloats;
                p0[i] = __ldcg(p + g * M + c), p1[i] = __ldcg(p + (g + 8) * M + c);
              }
            }
#pragma unroll
            for (int i = 0; i < 8; ++i) v0 += p0[i], v1 += p1[i];
          }
        if (lane == 0) counters[stripe_seg] = 0;  // ready for the next call on the stream
      }
    }
    store(stripe, v0, v1);
  };

  uint32_t pool_lo = 0, pool_hi = 0;  // k = 2's levels for kGemvK2RegisterSteps
  if constexpr (KB == 2 && kGemvK2RegisterSteps != 0) k2_level_pools(args.codebook16, pool_lo, pool_hi);
  // hacc (rows g, g + 8) += the partials p_lo, p_hi times their rows' block scales (= on
  // the first block).
  auto add_scaled = [](uint32_t (&hacc)[2], uint32_t p_lo, uint32_t p_hi, uint32_t s_lo, uint32_t s_hi, bool first) {
    if (first) {
      hacc[0] = hmul2_u32(p_lo, s_lo), hacc[1] = hmul2_u32(p_hi, s_hi);
    } else {
      hacc[0] = hfma2_u32(p_lo, s_lo, hacc[0]), hacc[1] = hfma2_u32(p_hi, s_hi, hacc[1]);
    }
  };
  float acc[kAccTokens][2];
#pragma unroll
  for (int t = 0; t < kAccTokens; ++t) acc[t][0] = acc[t][1] = 0.0f;
  int seg = udiv(u0, int(S)), piece_u0 = u0;  // segment: (tile, stripe); dense: the stripe
  int st = umod(u0, int(S));
  enter_tile(udiv(u0, US));
  for (int base = u0; base < u1; base += D + 1) {
#pragma unroll
    for (int d = 0; d <= D; ++d) {
      const int u = base + d;
      if (u >= u1) break;
      load_ahead(stages[(d + D) % (D + 1)], u + D);
      const StageT& cur = stages[d];
      uint32_t w[2 * KB];
#pragma unroll
      for (int q = 0; q < KB; ++q) w[2 * q] = cur.w[q].x, w[2 * q + 1] = cur.w[q].y;
      // hacc[t][h]: the fp16 partial of rows g + 8 h. HFMA2: token t, lane (g, c)'s 8 weights
      // per block; MMA (one entry): tokens 2 c and 2 c + 1, the block's 32 columns.
      uint32_t hacc[kTensor ? 1 : M][2];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a0[4], a1[4];
        gemv_decode<KB>(w, j, 0, lut_lane, pool_lo, pool_hi, a0);
        gemv_decode<KB>(w, j, 1, lut_lane, pool_lo, pool_hi, a1);
        const uint32_t s_lo = scale_pair<__half>(cur.scales.x, j), s_hi = scale_pair<__half>(cur.scales.y, j);
        if constexpr (kTensor) {
          // Two MMAs: lane (g, c)'s B fragment is token g's 8 columns 32 j + 8 c .. + 8, one
          // LDS.128 for both k-steps (tokens g >= M are zeros); c_row[h]: rows g + 8 h. The
          // row's block scale by one HFMA2 (|partial| < 4 blocks x 32 x 64 x 2).
          uint4 xv = make_uint4(0u, 0u, 0u, 0u);
          if (g < M) xv = x_chunk(tile_xrow + g, st, j);
          uint32_t c_row[2];
          mma_16816_f16(c_row, a0, xv.x, xv.y);
          mma_16816_f16acc(c_row, a1, xv.z, xv.w);
          add_scaled(hacc[0], c_row[0], c_row[1], s_lo, s_hi, j == 0);
        } else {
          // One HFMA2 per pair and token, the block scale by one more.
#pragma unroll
          for (int t = 0; t < M; ++t) {
            const uint4 xv = x_chunk(tile_xrow + t, st, j);
            uint32_t pg = hmul2_u32(a0[0], xv.x), ph = hmul2_u32(a0[1], xv.x);
            pg = hfma2_u32(a0[2], xv.y, pg), ph = hfma2_u32(a0[3], xv.y, ph);
            pg = hfma2_u32(a1[0], xv.z, pg), ph = hfma2_u32(a1[1], xv.z, ph);
            pg = hfma2_u32(a1[2], xv.w, pg), ph = hfma2_u32(a1[3], xv.w, ph);
            add_scaled(hacc[t], pg, ph, s_lo, s_hi, j == 0);
          }
        }
      }
      // Into fp32 times the supertile's 2^-e of each token (MMA: tokens 2 c, 2 c + 1). Every
      // lane, without a branch (but grouped k = 4, below): a token past M has zero products
      // (x's rows g >= M are zeros in the B fragment), takes row M - 1's scale, and finish
      // never reads it. (A branch on 2 c + i < M cost ~8 more instructions per unit at M = 2
      // (SASS): without it, with the first MMA on a zero C, dense M = 2 at k = 3, 4 2-4% faster
      // on glm47, H200, 2026-12-03.)
      if constexpr (kTensor) {
        // Grouped k = 4 keeps the branch: without it GLM-4.7 T = 8, 16 ran 0-2.5% slower (H200,
        // settled A/Bs on two machines, 2026-12-03), while every other instance gained.
        constexpr bool kBranchFree = !(GROUPED && KB == 4);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if (kBranchFree || 2 * c + i < M) {
            const float x_scale = x_scale_of(tile_xrow + min(2 * c + i, M - 1), st);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hacc[0][h]));
              acc[i][h] = fmaf(i ? f.y : f.x, x_scale, acc[i][h]);
            }
          }
        }
      } else {
#pragma unroll
        for (int t = 0; t < M; ++t) {
          const float x_scale = x_scale_of(tile_xrow + t, st);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&hacc[t][h]));
            acc[t][h] = fmaf(f.x + f.y, x_scale, acc[t][h]);
          }
        }
      }
      if (++st == S || u + 1 == u1) {
        if (u + 1 == u1) stamp(kProbeLastUnit);
        finish(seg, piece_u0, u + 1, acc);
        if (piece_u0 == u0) stamp(kProbeFirstPiece);
        if (u + 1 == u1) stamp(kProbeExit);
#pragma unroll
        for (int t = 0; t < kAccTokens; ++t) acc[t][0] = acc[t][1] = 0.0f;
        piece_u0 = u + 1;
        if (st == S) {
          st = 0;
          if (++seg - tile_seg0 == args.stripes && u + 1 < u1) enter_tile(udiv(u + 1, US));
        }
      }
    }
  }
}

template <int KB, typename T, int M, bool GROUPED>
__global__ void __launch_bounds__(kGemvWarps * 32, 1) gemv_kernel(const GemvArgs args, const GemvLaunch launch) {
  GemvClass cls;
  cls.cta = int(blockIdx.x), cls.ctas = int(gridDim.x);
  gemv_body<KB, T, M, GROUPED>(args, launch, cls);
}

// Grouped tiles by expert (kTileRowsByExpert): every CTA counts each class's tiles from
// the offsets and cuts the grid the same way (gemv_class_split): in proportion to the
// classes' work (tiles x unit cost), none below its fewest CTAs for its staged rows
// (gemv_class_min_ctas; the host checked that they fit for any routing). CTAs
// [base_c, base_c + ctas_c) run class c's body.
template <int KB, typename T>
__global__ void __launch_bounds__(kGemvWarps * 32, 1) gemv_mixed_kernel(const GemvArgs args, const GemvLaunch launch) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the offsets come from the routing kernel
  // The classes' tile counts in the pair table's place: every thread reads them before the
  // body's first barrier, and the body writes the table only after it. (Static shared memory
  // would not fit beside the 227 KB of dynamic memory.)
  extern __shared__ __align__(16) uint32_t smem_words[];
  int* const class_tiles = reinterpret_cast<int*>(reinterpret_cast<uint8_t*>(smem_words) + launch.lut_off);
  if (threadIdx.x < kGemvClasses) class_tiles[threadIdx.x] = 0;
  __syncthreads();
  int tiles[kGemvClasses] = {0, 0, 0};
  for (int e = int(threadIdx.x); e < args.experts; e += kGemvWarps * 32) {
    const int n = args.expert_offsets[e + 1] - args.expert_offsets[e];
#pragma unroll
    for (int c = 0; c < kGemvClasses; ++c) tiles[c] += int(gemv_class_tiles(c, n));  // 0 outside the class
  }
#pragma unroll
  for (int c = 0; c < kGemvClasses; ++c) {
    const int sum = __reduce_add_sync(0xffffffffu, tiles[c]);
    if ((threadIdx.x & 31) == 0 && sum) atomicAdd(class_tiles + c, sum);
  }
  __syncthreads();
  int64_t class_tiles_now[kGemvClasses], ctas[kGemvClasses];
#pragma unroll
  for (int c = 0; c < kGemvClasses; ++c) class_tiles_now[c] = class_tiles[c];
  if (!gemv_class_split(class_tiles_now, int64_t(args.stripes) * args.supertiles, launch.x_rows, launch.class_cost,
                        gridDim.x, ctas))
    __trap();  // the host's bound broken
  GemvClass cls;
  int base = 0, tile_base = 0;
#pragma unroll
  for (int c = 0; c < kGemvClasses; ++c) {
    if (ctas[c] && int(blockIdx.x) >= base && int(blockIdx.x) < base + int(ctas[c])) {
      cls.cta = int(blockIdx.x) - base, cls.ctas = int(ctas[c]), cls.cta_base = base, cls.tile_base = tile_base;
      if (c == 0) gemv_body<KB, T, gemv_class_rows(0), true, 0>(args, launch, cls);
      else if (c == 1) gemv_body<KB, T, gemv_class_rows(1), true, 1>(args, launch, cls);
      else gemv_body<KB, T, gemv_class_rows(2), true, 2>(args, launch, cls);
      return;
    }
    base += int(ctas[c]), tile_base += class_tiles_now[c];
  }
}

template <int KB, typename T, int M, bool GROUPED>
void launch_gemv_kernel(const GemvArgs& a, const GemvSmem& map, GemvLaunch launch, int64_t ctas, cudaStream_t stream) {
  auto kernel = gemv_kernel<KB, T, M, GROUPED>;
  const dim3 grid{unsigned(ctas)}, block{unsigned(kGemvWarps * 32)};
  launch.lut_off = int(map.lut), launch.x_off = int(map.x), launch.x_scales_off = int(map.x_scales);
  launch.tile_table_off = int(map.tile_table), launch.x_bar_off = int(map.x_bar);
  launch.local_off = int(map.local);
  launch.x_bulk = gemv_x_bulk(a, launch.x_rows);
  launch_maybe_pdl(kernel, grid, block, size_t(map.total), stream, a.pdl, "gemv kernel launch", a, launch);
  check_launch("gemv kernel");
}

// Resident CTAs per SM of an instantiation for a shared-memory size, asked once per
// size and thread (the query costs microseconds of host time on every eager call).
template <int KB, typename T, int M, bool GROUPED>
int gemv_ctas_per_sm(int64_t smem) {
  auto kernel = gemv_kernel<KB, T, M, GROUPED>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvMaxSmem));
  check_cuda(configured, "gemv: setting the shared memory size");
  static thread_local std::unordered_map<int64_t, int> occupancy;
  int& per_sm = occupancy[smem];
  if (per_sm == 0) {
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvWarps * 32, size_t(smem)),
               "gemv: occupancy");
    per_sm = std::max(per_sm, 1);
  }
  return per_sm;
}

template <int KB, typename T, int M>
void launch_gemv_instance(const GemvArgs& a, cudaStream_t stream) {
  const GemvSmem map = gemv_smem_map(KB, M, a.K, dynamic_smem_base());
  KBIT_REQUIRE(map.total <= kGemvMaxSmem, "gemv: M = ", M, ", K = ", a.K, " needs ", map.total,
               " bytes of shared memory, more than ", kGemvMaxSmem);
  const int per_sm = std::min(gemv_ctas_per_sm<KB, T, M, false>(map.total), kGemvMaxCtasPerSm);
  const int64_t units = int64_t(a.stripes) * a.supertiles;
  KBIT_REQUIRE(units < (int64_t(1) << 30), "gemv: W has too many 16 x 128 units (", units, ")");
  const GemvDenseSplit split = gemv_dense_split(KB, a.stripes, units, sm_count(), per_sm, a.max_ctas);
  const int64_t ctas = split.ctas, warps = split.warps;
  KBIT_REQUIRE(2 * warps * 16 * M <= a.piece_floats && a.stripes <= a.counter_count,
               "gemv: the workspace holds ", a.piece_floats, " partial floats and ", a.counter_count,
               " counters; this call needs ", 2 * warps * 16 * M, " and ", a.stripes);
  GemvLaunch launch;
  launch.active_warps = int(warps);
  launch.x_rows = M;
  launch_gemv_kernel<KB, T, M, false>(a, map, launch, ctas, stream);
}

// Grouped: the tiles (M rows of one expert) are known only on the device, so the host
// sizes everything for the most there can be: at most P / M + min(E, P) tiles for P
// rows, and a CTA's units span at most ceil(units per CTA / units per tile) + 1 tiles.
template <int KB, typename T, int M>
GemvGroupedPlan plan_grouped_instance(const GemvArgs& a) {
  GemvGroupedPlan p;
  const int64_t rows = a.M, experts = a.experts;
  const int64_t per_tile = int64_t(a.stripes) * a.supertiles;
  // (1-row tiles: exactly one per row.)
  const int64_t tiles = M == 1 ? rows : (rows + M - 1) / M + std::min(experts, rows);
  p.ctas = sm_count();  // one CTA of 16 warps per SM (the tables and x fill shared memory)
  const int64_t units = tiles * per_tile;
  // A warp's units: an even share, or one whole segment (the kernel's rule).
  const int64_t per_warp = std::max<int64_t>((units + p.ctas * kGemvWarps - 1) / (p.ctas * kGemvWarps), a.supertiles);
  const int64_t per_cta = int64_t(kGemvWarps) * per_warp;
  p.x_rows = std::min<int64_t>(((per_cta + per_tile - 1) / per_tile + 1) * M, rows + M - 1);
  p.smem = gemv_smem_map(KB, p.x_rows, a.K, dynamic_smem_base(), experts).total;
  p.segments = tiles * a.stripes;
  p.piece_floats = 2 * p.ctas * kGemvWarps * 16 * M;
  p.fits = units < (int64_t(1) << 30) && p.smem <= kGemvMaxSmem && p.segments <= a.counter_count &&
           p.piece_floats <= a.piece_floats;
  return p;
}

template <int KB, typename T, int M>
void launch_grouped_instance(const GemvArgs& a, cudaStream_t stream) {
  const GemvGroupedPlan p = plan_grouped_instance<KB, T, M>(a);
  KBIT_REQUIRE(p.fits, "grouped gemv: ", a.M, " rows over ", a.experts, " experts of K = ", a.K, " need ", p.smem,
               " bytes of shared memory (at most ", kGemvMaxSmem, "), ", p.segments, " counters (workspace: ",
               a.counter_count, ") and ", p.piece_floats, " partial floats (workspace: ", a.piece_floats, ")");
  gemv_ctas_per_sm<KB, T, M, true>(p.smem);  // sets the shared-memory limit
  GemvLaunch launch;
  launch.x_rows = int(p.x_rows);
  launch_gemv_kernel<KB, T, M, true>(a, gemv_smem_map(KB, p.x_rows, a.K, dynamic_smem_base(), a.experts), launch,
                                     p.ctas, stream);
}

// Tiles by expert (gemv_mixed_kernel): a CTA stages its tiles' rows, as many as shared memory
// holds (up to 64). Fits when the classes' fewest CTAs fit the grid for any routing of the
// rows: at most P 1-row tiles, P / 2 2-row tiles and 2P / 5 tiles of experts with >= 3 rows
// (5 rows make 2 tiles), all P tiles' counters, partials in 4-token slots.
template <int KB>
GemvGroupedPlan plan_grouped_mixed(const GemvArgs& a) {
  GemvGroupedPlan p;
  const int64_t rows = a.M, experts = a.experts, per_tile = int64_t(a.stripes) * a.supertiles;
  p.ctas = sm_count();
  const int64_t base = dynamic_smem_base();
  for (int64_t r = 1; r <= 64; ++r) {  // host arithmetic only
    const int64_t smem = gemv_smem_map(KB, r, a.K, base, experts, true).total;
    if (smem > kGemvMaxSmem) break;
    p.x_rows = r, p.smem = smem;
  }
  const int64_t worst_ctas = gemv_class_min_ctas(rows, per_tile, gemv_class_rows(0), p.x_rows) +
                             gemv_class_min_ctas(rows / 2, per_tile, gemv_class_rows(1), p.x_rows) +
                             gemv_class_min_ctas((2 * rows + 4) / 5, per_tile, gemv_class_rows(2), p.x_rows);
  p.segments = rows * a.stripes;
  p.piece_floats = 2 * p.ctas * kGemvWarps * 16 * kGemvMaxM;
  p.fits = p.x_rows >= gemv_class_rows(kGemvClasses - 1) && worst_ctas <= p.ctas && rows * per_tile < (int64_t(1) << 30) &&
           p.segments <= a.counter_count && p.piece_floats <= a.piece_floats;
  return p;
}

template <int KB, typename T>
void launch_grouped_mixed(const GemvArgs& a, cudaStream_t stream) {
  const GemvGroupedPlan p = plan_grouped_mixed<KB>(a);
  KBIT_REQUIRE(p.fits, "grouped gemv (tiles by expert): ", a.M, " rows over ", a.experts, " experts of K = ", a.K,
               " stage ", p.x_rows, " rows per CTA (", p.smem, " bytes of shared memory) and need ", p.segments,
               " counters (workspace: ", a.counter_count, ") and ", p.piece_floats, " partial floats (workspace: ",
               a.piece_floats, "), or more CTAs than one wave for some routing");
  auto kernel = gemv_mixed_kernel<KB, T>;
  static const cudaError_t configured =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvMaxSmem));
  check_cuda(configured, "gemv: setting the shared memory size (tiles by expert)");
  const GemvSmem map = gemv_smem_map(KB, p.x_rows, a.K, dynamic_smem_base(), a.experts, true);
  GemvLaunch launch;
  launch.x_rows = int(p.x_rows);
  for (int c = 0; c < kGemvClasses; ++c) launch.class_cost[c] = gemv_class_cost_now(KB, c);
  launch.lut_off = int(map.lut), launch.x_off = int(map.x), launch.x_scales_off = int(map.x_scales);
  launch.tile_table_off = int(map.tile_table), launch.x_bar_off = int(map.x_bar);
  launch.local_off = int(map.local);  // (x_bulk stays off: the kernel does not take it)
  launch_maybe_pdl(kernel, dim3(unsigned(p.ctas)), dim3(kGemvWarps * 32), size_t(map.total), stream, a.pdl,
                   "gemv kernel launch (tiles by expert)", a, launch);
  check_launch("gemv kernel (tiles by expert)");
}

template <int KB>
void launch_gemv(const GemvArgs& a, DType t, cudaStream_t stream) {
  auto typed = [&]<typename T>() {
    if (a.expert_offsets) {  // grouped: tiles of tile_rows rows
      switch (a.tile_rows) {
        case kTileRowsByExpert:
          // k = 5: the three bodies in one function spill (20-24 bytes at 128 registers).
          if constexpr (KB == 5) throw Error("grouped gemv: tiles by expert are for k = 2..4, not k = 5");
          else return launch_grouped_mixed<KB, T>(a, stream);
        case 1: return launch_grouped_instance<KB, T, 1>(a, stream);
        case 2: return launch_grouped_instance<KB, T, 2>(a, stream);
        case 4: return launch_grouped_instance<KB, T, 4>(a, stream);
        default:
          throw Error(kbit::detail::concat("grouped gemv: tile rows must be 1, 2, 4 or by expert (", kTileRowsByExpert,
                                           "), got ", a.tile_rows));
      }
    }
    KBIT_REQUIRE(a.M >= 1 && a.M <= kGemvMaxM, "gemv: M must be 1..", kGemvMaxM, ", got ", a.M);
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

template <int KB>
GemvGroupedPlan plan_grouped_gemv(const GemvArgs& a) {
  switch (a.tile_rows) {
    case kTileRowsByExpert:
      if constexpr (KB == 5) return GemvGroupedPlan{};  // not fitted: see launch_gemv
      else return plan_grouped_mixed<KB>(a);
    case 1: return plan_grouped_instance<KB, __half, 1>(a);
    case 2: return plan_grouped_instance<KB, __half, 2>(a);
    default: return plan_grouped_instance<KB, __half, 4>(a);
  }
}

}  // namespace kbit::cuda::detail
