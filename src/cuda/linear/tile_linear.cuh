// Tile kernel (the fused path's wgmma_tile items): y[M, N] = x[M, K] W^T (+ bias)
// (+ residual) for larger M (64 tokens and up), W in the mma16 layout, x and y fp16 or
// bf16, fp32 accumulation.
//
// Computes y^T = W x^T per CTA tile of WARPS x 16 rows of W (one 16-row stripe per warp,
// 64 rows per warpgroup) by 8 * NT tokens (64 or 128), over a K split. Per supertile (128
// columns) each warp decodes its stripe's 16 x 128 weights as the mma.sync path does
// (k = 2, and k = 3 at one warpgroup: prmt from register pools; k >= 3 at two warpgroups:
// the shared-memory pair table; else levels by warp shuffle; tile_decode) and
// writes them as bf16/fp16 rows into a shared-memory A buffer (two, alternating), row g of
// each 8 at A row tile_row_of^-1(g) so that a quarter warp's 16-byte stores hit 8 bank groups;
// one thread copies the tokens' 128 columns of x with TMA (two 64-column boxes, mbarrier per
// slot) into a ring of 4 slots, two supertiles ahead (x not 16-byte aligned: every thread
// stores its share of the current supertile instead). Both are K-major with the 128-byte
// swizzle (wgmma_ss.cuh), so that no reordering of K is needed. Each
// warpgroup then issues 8 wgmma.mma_async m64nNk16 reading both operands from shared
// memory, and decodes the next supertile while they run (one group in flight). Weights are
// loaded into registers D supertiles ahead (streamed, evict-first), as in the fused kernel.
// Splits along K and the epilogue are the fused kernel's (finish_item). Launch: persistent
// CTAs (SMs x resident CTAs), items = (stripe group, K split, token tile), stripe groups
// fastest so that the CTAs running at once share a token tile of x in L2.
// Warp-specialised forms (tile_ws_kernel: n_tiles 32, 256 tokens; tile_ws_small_kernel: the plan's
// warps = 16 at 64 / 128 tokens): 8 warps decode into the A buffers for two warpgroups that only multiply.
// Grouped mode (kbit::expert_linear, FusedArgs::grouped_tiles): items run over the token
// tiles of a table that grouped_tile_table.cu writes just before (expert, first row, end
// row), W's stripes offset by the expert; no splits.
// Stream-K (wgmma_stream items, TileArgs::sk, tile_schedule.h): the tiles' supertiles cut
// into one equal range per CTA, a cut tile's pieces reduced in K order by the last to
// arrive (reduce_stream_k_partials). Otherwise a part-empty last wave splits along K (the split tail).
// Measured (H200, cuBLAS bf16 in the same run; BENCHMARKS.md): M = 64 (2026-12-03, fiftieth session,
// re-tuned) glm47 k = 4 q 35.00 us (0.96x), o 35.35 (1.08x), shared_gu 61.17 (1.01x), shared_dn 35.24
// (1.08x); M = 512 glm47 q k = 4 119.2 us (forty-seventh session; cuBLAS bf16 ~85), kbit::linear 0.64-0.91x
// over the 72 dense rows. At M = 512 the card runs this kernel at 1.67 GHz of its 1.98 (power; ncu
// --clock-control none). Each change and its A/B: docs/KERNEL_HISTORY.md.
#pragma once

#include "../tensor_map.h"
#include "tile_schedule.h"
#include "fused_linear.cuh"
#include "wgmma_ss.cuh"

namespace kbit::cuda::detail {

// Slots of the activation ring: TMA copies run kTileXSlots - 2 supertiles ahead, and the slot
// refilled is the one read by the group two supertiles back (complete by then).
constexpr int kTileXSlots = 4;

// How a tile kernel turns k >= 3's codes into levels (k = 2: always by prmt from its register
// pool): by prmt from byte pools in registers (pools: k = 3, decode_pairs_k3_pools), from the
// shared-memory pair table (table), or by warp shuffle (shuffle).
enum class TileDecode { pools, table, shuffle };

// The levels (x's 16-bit type) as byte pools for a decode by prmt from registers: low bytes of
// levels 4i .. 4i + 3 in lo[i], high bytes in hi[i]. k = 2 gets k2_level_pools' two registers
// (the same loop: fused_linear.cuh's k2_level_pools could become level_pools<2> the next time
// the fused kernels change and run on a GPU).
template <int KB>
struct LevelPools {
  static constexpr int regs = KB <= 3 ? (1 << KB) / 4 : 1;
  uint32_t lo[regs], hi[regs];
};
template <int KB>
__device__ __forceinline__ LevelPools<KB> level_pools(const uint16_t (&codebook16)[32]) {
  LevelPools<KB> p{};
  if constexpr (KB <= 3) {
#pragma unroll
    for (int i = 0; i < (1 << KB); ++i) {
      const uint32_t v = codebook16[i];
      p.lo[i / 4] |= (v & 0xffu) << (8 * (i % 4));
      p.hi[i / 4] |= (v >> 8) << (8 * (i % 4));
    }
  }
  return p;
}

// decode_pairs' A registers for k = 3 from the byte pools, no table and no shuffle: each pair
// code byte spread to two selector nibbles, one prmt for the low and one for the high bytes of
// two pairs, two prmts to interleave them: ~3 instructions per pair, all on the integer pipes.
// (k = 4 needs ~5: one prmt per half of the levels, then one to pick by bit 3. Measured in the
// tile kernels against the pair table, H200, 2026-12-03: 8-10% slower in the 256-token kernel's
// decode warps, 10-19% in the 64/128-token kernel; k = 3 1-3% slower than the table there.)
__device__ __forceinline__ void decode_pairs_k3_pools(const uint32_t (&w)[6], int j, int s, const LevelPools<3>& p,
                                                      uint32_t (&a)[4]) {
  const uint32_t codes = pair_code_bytes<3>(w, j, s);
  const uint32_t sel = (codes & 0x07070707u) | ((codes << 1) & 0x70707070u);  // byte r: element 0 | element 1 << 4
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // pairs 2h, 2h + 1
    const uint32_t sh = sel >> (16 * h);
    const uint32_t lo = __byte_perm(p.lo[0], p.lo[1], sh), hi = __byte_perm(p.hi[0], p.hi[1], sh);
    a[2 * h] = __byte_perm(lo, hi, 0x5140u);
    a[2 * h + 1] = __byte_perm(lo, hi, 0x7362u);
  }
}

// Block j (32 columns) of a stripe's supertile decoded and scaled as both tile kernels
// write it to their A buffers: rows g and g + 8 of the stripe, columns 32j + 8c .. + 7, one
// 16-byte row each. kDecode: k >= 3's levels (TileDecode); k = 2 by prmt from pools.lo[0] /
// pools.hi[0].
template <int KB, typename T, TileDecode kDecode>
__device__ __forceinline__ void decode_scaled_block(const uint32_t (&w)[2 * KB], uint2 scales, int j, uint32_t lut_lane,
                                                    const LevelPools<KB>& pools, uint32_t cb_lane, uint4& row_g,
                                                    uint4& row_g8) {
  const uint32_t s_lo = scale_pair<T>(scales.x, j), s_hi = scale_pair<T>(scales.y, j);
  uint32_t a[2][4];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    if constexpr (KB == 2) {
      decode_pairs<KB>(w, j, s, lut_lane, pools.lo[0], pools.hi[0], a[s]);
    } else if constexpr (kDecode == TileDecode::pools) {
      static_assert(KB == 3, "the pools decode k = 2 and 3");
      decode_pairs_k3_pools(w, j, s, pools, a[s]);
    } else if constexpr (kDecode == TileDecode::table) {
      decode_pairs<KB>(w, j, s, lut_lane, 0u, 0u, a[s]);
    } else {
      decode_pairs_shuffle<KB>(w, j, s, cb_lane, a[s]);
    }
  }
  row_g = make_uint4(mul2<T>(a[0][0], s_lo), mul2<T>(a[0][2], s_lo), mul2<T>(a[1][0], s_lo), mul2<T>(a[1][2], s_lo));
  row_g8 = make_uint4(mul2<T>(a[0][1], s_hi), mul2<T>(a[0][3], s_hi), mul2<T>(a[1][1], s_hi), mul2<T>(a[1][3], s_hi));
}

// The tile kernel's parameters: the fused kernel's, and x's TMA map (boxes of 64 columns x
// the token tile, 128-byte swizzle) when x_tma.
struct TileArgs {
  FusedArgs f;
  CUtensorMap x_map;
  bool x_tma = false;
  WsSchedule ws;       // the 256-token kernel's tiles and split tail (tile_schedule.h)
  StreamKSchedule sk;  // the 64/128-token kernel's stream-K ranges (wgmma_stream items), or off
};

// The 64/128-token kernel decodes k >= 3 through the pair table with two warpgroups; one
// warpgroup keeps the shuffles, because 32 KB more per CTA halve its CTAs per SM (H200,
// 2026-12-01, glm47 M = 64 k = 3: q 47.2 -> 65.9 us with the table at 4 warps, o 45.4 ->
// 39.1 at 8).
// k = 3 at one warpgroup by the register pools instead (H200, 2026-12-03, A/B in one run, two
// rounds: glm47 M = 64 moe_dn 11.16 -> 10.48 us, moe_gu 17.57 -> 17.05).
template <int KB, int WARPS>
constexpr TileDecode tile_decode() {
  if (KB == 3 && WARPS == 4) return TileDecode::pools;
  return KB >= 3 && WARPS == 8 ? TileDecode::table : TileDecode::shuffle;
}
template <int KB, int WARPS>
constexpr bool tile_uses_pair_table() { return tile_decode<KB, WARPS>() == TileDecode::table; }

template <int KB, int NT, int WARPS>
constexpr size_t tile_smem_bytes() {
  // x ring, two A buffers, the ring's mbarriers, the pair table and 1 KB to align the
  // swizzle atoms to 1024 bytes.
  return size_t(kTileXSlots) * NT * 8 * 256 + 2 * size_t(WARPS) * 16 * 256 + 8 * kTileXSlots +
         (tile_uses_pair_table<KB, WARPS>() ? PairLut<KB>::words * 4 : 0) + 1024;
}
static_assert(tile_smem_bytes<4, 16, 8>() <= 227 * 1024, "the largest tile kernel fits an H100/H200 SM");

// A row of lane g's stripe row g (and g + 8): the inverse of tile_row_of.
__device__ __forceinline__ int tile_a_row(int g) { return (g >> 1) | ((g & 1) << 2); }

// Token tile `tile` of `tokens` rows: its first row, its end row and the weight stripe of
// `stripe` (0: the first). Dense: tile * tokens, M, stripe; grouped (`grouped` =
// FusedArgs::grouped_tiles, written by launch_grouped_tile_table): the table's entry and the
// expert's stripe in stacked W.
__device__ __forceinline__ void token_tile_rows(const FusedArgs& args, const int4* grouped, int tile, int tokens,
                                                int stripe, int& m0, int& m_end, int64_t& w_stripe) {
  if (grouped) {
    const int4 t = grouped[1 + tile];
    m0 = t.y, m_end = t.z, w_stripe = int64_t(t.x) * args.stripes + stripe;
  } else {
    m0 = tile * tokens, m_end = args.M, w_stripe = stripe;
  }
}

// A K piece's end, per warp: store the warp's fp32 partial (NT x 4 values per lane, 16-byte
// stores) at `own` (this lane's float4 of n-tile 0; n-tile nt at + 32 nt) and make it
// visible. (The lane is the caller's to add: added here, the 256-token kernel spilled.)
template <int NT>
__device__ __forceinline__ void store_partial(const float (&acc)[NT][4], float4* own) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) __stcg(own + nt * 32, make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]));
  __threadfence();
  __syncwarp();
}

// Then count the arrival on `counter` (after the stores, so that its address is not live with
// them): how many pieces arrived before this one.
__device__ __forceinline__ unsigned arrive_after_partial(unsigned* counter) {
  unsigned arrived = 0;
  if ((threadIdx.x & 31) == 0) arrived = atomicAdd(counter, 1u);
  return __shfl_sync(0xffffffffu, arrived, 0);
}

// The last piece to arrive: acc = part(0) + ... + part(pieces - 1) in that (K) order
// (bit-identical whichever arrives last), and the counter reset for the next call.
// part(i): this lane's float4 of n-tile 0 of piece i.
template <int NT, typename Part>
__device__ __forceinline__ void sum_partials_in_order(float (&acc)[NT][4], int pieces, unsigned* counter, Part part) {
  __threadfence();
  const float4* p0 = part(0);  // piece 0 apart: one loop with a branch on i spilled the 256-token kernel
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const float4 v = __ldcg(p0 + nt * 32);
    acc[nt][0] = v.x, acc[nt][1] = v.y, acc[nt][2] = v.z, acc[nt][3] = v.w;
  }
  for (int i = 1; i < pieces; ++i) {
    const float4* p = part(i);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 v = __ldcg(p + nt * 32);
      acc[nt][0] += v.x, acc[nt][1] += v.y, acc[nt][2] += v.z, acc[nt][3] += v.w;
    }
  }
  if ((threadIdx.x & 31) == 0) *counter = 0;  // ready for the next call on the stream
}

// A K piece's end, per warp: store the partial at part(mine) and return false unless this is
// the last of `pieces` to arrive, which sums them all in K order into acc.
// part(i): the float4 of lane 0, n-tile 0 of piece i's partial (n-tile nt at + 32 nt).
template <int NT, typename Part>
__device__ __forceinline__ bool reduce_partials_in_order(float (&acc)[NT][4], int mine, int pieces, unsigned* counter,
                                                         Part part) {
  const int lane = threadIdx.x & 31;
  store_partial<NT>(acc, part(mine) + lane);
  if (arrive_after_partial(counter) != unsigned(pieces - 1)) return false;
  sum_partials_in_order<NT>(acc, pieces, counter, [&](int i) { return part(i) + lane; });
  return true;
}

// A stream-K segment's end (StreamKSchedule), per warp: the segments of `item` are those of
// CTAs first_cta .. last_cta, in K order; CTA b's partial sits in slot sk.slot(b, item) of
// WARPS x 16 rows x 8 NT tokens (a private layout), the counter is the item's warp's.
template <int NT, int WARPS>
__device__ __forceinline__ bool reduce_stream_k_partials(const FusedArgs& args, const StreamKSchedule& sk,
                                                         float (&acc)[NT][4], int64_t cta, int64_t item, int warp) {
  constexpr int64_t kSlotFloats = int64_t(WARPS) * NT * 128;
  const int64_t first = sk.first_cta(item), pieces = sk.last_cta(item) - first + 1;
  auto part = [&](int i) {
    return reinterpret_cast<float4*>(args.tile_partials + sk.slot(first + i, item) * kSlotFloats) + warp * NT * 32;
  };
  return reduce_partials_in_order<NT>(acc, int(cta - first), int(pieces), args.counters + item * WARPS + warp, part);
}

template <int KB, typename T, int NT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1) tile_linear_kernel(const __grid_constant__ TileArgs targs) {
  static_assert(WARPS == 4 || WARPS == 8, "tile items: one or two warpgroups");
  static_assert(NT == 8 || NT == 16, "tile items: 64 or 128 tokens");
  const FusedArgs& args = targs.f;
  constexpr int kTokens = NT * 8;
  constexpr uint32_t kXSlotBytes = kTokens * 256;   // tokens x 128 columns x 2 bytes
  constexpr uint32_t kXHalfBytes = kTokens * 128;   // 64 of the columns (one swizzle atom wide)
  constexpr uint32_t kABufBytes = WARPS * 16 * 256;  // the CTA's rows x 128 columns
  constexpr uint32_t kAGroupBytes = 64 * 256;       // one warpgroup's 64 rows
  constexpr uint32_t kAHalfBytes = 64 * 128;        // 64 of their columns
  constexpr int D = KB == 2 ? 4 : (KB == 3 ? 3 : 2);  // supertiles of weight loads in flight per warp
  constexpr int kStores = kTokens * 16 / (WARPS * 32);  // 16-byte x chunks per thread (no TMA)
  static_assert(kStores * WARPS * 32 == kTokens * 16, "x chunks divide among the threads");
  using StageT = Stage<KB>;
  extern __shared__ __align__(16) uint8_t tile_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int wg = warp / 4, wl = warp % 4;
  const uint32_t smem_base = (uint32_t(__cvta_generic_to_shared(tile_smem)) + 1023u) & ~1023u;
  const uint32_t x_ring = smem_base, a_bufs = smem_base + kTileXSlots * kXSlotBytes;
  const uint32_t x_bars = a_bufs + 2 * kABufBytes;  // one mbarrier per ring slot
  const uint32_t lut = x_bars + 8 * kTileXSlots;     // k >= 3's pair table
  __shared__ uint32_t cb16[32];

  if (args.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) {
    for (int s = 0; s < kTileXSlots; ++s) mbarrier_init(x_bars + 8 * s, 1);
    mbarrier_init_fence();
  }
  constexpr TileDecode kDecode = tile_decode<KB, WARPS>();
  constexpr bool kTable = tile_uses_pair_table<KB, WARPS>();
  uint32_t cb_lane = 0;
  LevelPools<KB> pools{};
  if constexpr (KB == 2 || kDecode == TileDecode::pools) {
    pools = level_pools<KB>(args.codebook16);
  } else if constexpr (kTable) {
    fill_pair_table<KB>(lut, args.codebook16, cb16);  // published by the item loop's first barrier
  } else {
    cb_lane = uint32_t(args.codebook16[lane & ((1 << KB) - 1)]);
  }
  const uint32_t lut_lane = lut + uint32_t(lane % PairLut<KB>::replicas) * 4;
  const float ts = args.meta->tensor_scale * kScalePairFactor<T>;
  const uint16_t* x = static_cast<const uint16_t*>(args.x);
  const int units = (args.stripes + WARPS - 1) / WARPS;
  // Grouped (expert_linear): items over the table's token tiles (launch_grouped_tile_table),
  // written by the kernel just before this one.
  const int4* grouped = args.grouped_tiles;
  if (grouped) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int items = grouped ? grouped[0].x * units : units * args.splits * args.tiles;
  // This lane's A rows and their byte offsets (the chunk is added per store): row g of the
  // stripe goes to A row tile_a_row(g), so that lanes g = 2p, 2p + 1 of a quarter warp write
  // rows p and p + 4 of an atom, whose swizzles differ in bit 2 (8 distinct bank groups).
  const int a_row = 16 * wl + tile_a_row(g);
  const bool x_tma = targs.x_tma;
  // Work: items blockIdx.x, + gridDim.x, ...; or (stream-K) this CTA's range of the items'
  // supertiles, item by item, each piece a segment.
  const StreamKSchedule& sk = targs.sk;
  const bool stream_k = sk.on() && !grouped;
  // Tiles without K splits store through store_full_tile (which skips tokens from m_end on,
  // so partial token tiles too): 128-token tiles (H200, 2026-12-01, A/B in two runs: glm47 q
  // M = 128 k = 4 49.9 -> 46.8 us), stream-K 64-token tiles (2026-12-02, one binary each in
  // one run, M = 64 k = 4: glm47 q 37.0 -> 35.6 us, qwen3 shared_dn 10.0 -> 8.5, geomean of
  // all 18 dense projections 0.905) and grouped tiles, nearly all partial (2026-12-02, two
  // runs of each binary, k = 4: Qwen3 moe_dn T = 4096 664 -> 512 us, GLM-4.7 1489 -> 1309).
  // Not 64-token tiles with whole K splits (wgmma_tile): there the branch cost the split
  // items (o, shared_dn, shared_gu at M = 64) 1.3-1.6% more than it gained q (39.8 -> 38.8).
  // Allowing them measured neutral (2026-12-02, geomean 0.9999-1.0013 at M = 64, 100): no
  // tuned plan uses those items (tile-pair-stores-dense-whole-k-dropped-session40.patch).
  const bool pair_stores =
      args.splits == 1 && (NT == 16 || stream_k || grouped != nullptr) && pair_stores_allowed(args);
  uint32_t iteration = 0;  // supertiles run by this CTA so far: ring slot and mbarrier parity
  int64_t next = stream_k ? sk.begin(blockIdx.x) : int64_t(blockIdx.x);
  const int64_t stop = stream_k ? sk.begin(int64_t(blockIdx.x) + 1) : int64_t(items);

  while (next < stop) {
    int item, split, st_begin, st_end;
    if (stream_k) {
      item = int(next / args.supertiles), split = 0;
      st_begin = int(next % args.supertiles);
      st_end = int(min(int64_t(args.supertiles), st_begin + (stop - next)));
      next += st_end - st_begin;
    } else {
      item = int(next), split = (item / units) % args.splits;
      st_begin = split * args.supertiles_per_split;
      st_end = min(args.supertiles, st_begin + args.supertiles_per_split);
      next += gridDim.x;
    }
    const int unit = item % units;
    int stripe = unit * WARPS + warp;
    const bool stores = stripe < args.stripes;  // a warp past the last stripe streams it again, stores nothing
    stripe = min(stripe, args.stripes - 1);
    int m0, m_end;
    int64_t w_stripe;  // in the stacked experts' rows when grouped
    token_tile_rows(args, grouped, item / (units * args.splits), kTokens, stripe, m0, m_end, w_stripe);
    const int st_last = st_end - 1;
    const uint2* wbase = args.words + w_stripe * args.supertiles * KB * 32 + lane;
    const uint2* sbase = args.scales + w_stripe * args.supertiles * 8 + g;

    float acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

    auto load_stage = [&](StageT& sg, int st) { load_weight_stage<KB>(sg, wbase, sbase, st, st_last); };
    // TMA: thread 0 requests supertile st's two 64-column boxes of the token tile into the
    // slot of CTA iteration `it` (rows past M and columns past K arrive as zeros).
    auto request_x_tile = [&](int st, uint32_t it) {
      if (threadIdx.x == 0 && st < st_end) {
        const uint32_t slot = it % kTileXSlots, bar = x_bars + 8 * slot;
        mbarrier_arrive_expect_tx(bar, kXSlotBytes);
        tensor_copy_2d(x_ring + slot * kXSlotBytes, &targs.x_map, st * 128, m0, bar);
        tensor_copy_2d(x_ring + slot * kXSlotBytes + kXHalfBytes, &targs.x_map, st * 128 + 64, m0, bar);
      }
    };

    __syncthreads();  // every warp is done with the previous item's ring and A buffers (and the barriers are initialised)
    StageT stages[D];
#pragma unroll
    for (int d = 0; d < D; ++d) load_stage(stages[d], st_begin + d);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");  // x, residual, workspace: after the previous kernel
    if (x_tma) {
#pragma unroll
      for (int s = 0; s < kTileXSlots - 2; ++s) request_x_tile(st_begin + s, iteration + s);
    }

    for (int st0 = st_begin; st0 < st_end; st0 += D) {
#pragma unroll
      for (int d = 0; d < D; ++d) {
        const int st = st0 + d;
        if (st >= st_end) break;
        const uint32_t slot = iteration % kTileXSlots;
        const uint32_t x_tile = x_ring + slot * kXSlotBytes;
        const StageT cur = stages[d];
        load_stage(stages[d], st + D);
        // Decode this warp's 16 x 128 weights into A buffer `iteration % 2` (free: its last
        // reader, the group two supertiles back, completed before this warpgroup's last wait),
        // blocks j = 2h, 2h + 1 (64 columns, one swizzle atom wide) at a time: rows g and g + 8,
        // columns 32j + 8c .. + 7.
        uint32_t w[2 * KB];
#pragma unroll
        for (int u = 0; u < KB; ++u) w[2 * u] = cur.w[u].x, w[2 * u + 1] = cur.w[u].y;
        const uint32_t a_buf = a_bufs + (iteration & 1) * kABufBytes + uint32_t(wg) * kAGroupBytes;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int jb = 0; jb < 2; ++jb) {
            uint4 row_g, row_g8;
            decode_scaled_block<KB, T, kDecode>(w, cur.scales, 2 * h + jb, lut_lane, pools, cb_lane, row_g,
                                               row_g8);
            const uint32_t at = a_buf + uint32_t(h) * kAHalfBytes;
            sts128(at + sw128_offset(a_row, 4 * jb + c), row_g);
            sts128(at + sw128_offset(a_row + 8, 4 * jb + c), row_g8);
          }
        }
        if (!x_tma) {  // x not 16-byte aligned: this supertile's activations by plain loads (rare: not unrolled)
#pragma unroll 1
          for (int u = 0; u < kStores; ++u) {
            const int i = int(threadIdx.x) + u * WARPS * 32;
            const int chunk = i & 7, r = i >> 3, tok = r % kTokens, half = r / kTokens;
            sts128(x_tile + uint32_t(half) * kXHalfBytes + sw128_offset(tok, chunk),
                   load_x8(x, args.ldx, args.M, args.K, false, m0 + tok, st * 128 + half * 64 + chunk * 8));
          }
        }
        // The decoded rows (generic-proxy stores) become visible to the tensor cores' reads,
        // and this supertile's x has landed.
        fence_proxy_async_shared();
        if (x_tma) mbarrier_wait(x_bars + 8 * slot, (iteration / kTileXSlots) & 1);
        __syncthreads();
        if (x_tma) request_x_tile(st + kTileXSlots - 2, iteration + kTileXSlots - 2);  // into the slot read two back
        wgmma_fence();
        // The eight k16 steps' descriptors as one add each to the supertile's first (the
        // address arithmetic was ~11 instructions per step, a quarter of the loop's).
        const uint32_t a_lo = wgmma_desc_sw128_lo(a_buf), x_lo = wgmma_desc_sw128_lo(x_tile);
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const uint32_t k_off = uint32_t(q >> 2), k_in = uint32_t(q & 3) * 32;
          wgmma_ss<T, NT>(acc, wgmma_desc_sw128_from_lo(a_lo + ((k_off * kAHalfBytes + k_in) >> 4)),
                          wgmma_desc_sw128_from_lo(x_lo + ((k_off * kXHalfBytes + k_in) >> 4)));
        }
        wgmma_commit();
        wgmma_wait_ss<1, NT>(acc);
        ++iteration;
      }
    }
    wgmma_wait_ss<0, NT>(acc);
    if (!stores) continue;  // (the next item starts with a barrier every warp reaches)
    // A stream-K segment short of the whole K: only the item's last segment to arrive goes on.
    if (stream_k && st_end - st_begin < args.supertiles &&
        !reduce_stream_k_partials<NT, WARPS>(args, sk, acc, blockIdx.x, item, warp))
      continue;
    if (pair_stores && stripe * 16 + 16 <= args.N) {  // warp-uniform
      store_full_tile<T, NT, true>(args, acc, stripe, m0, m_end, ts);
      continue;
    }
    finish_item<T, NT, true>(args, acc, stripe, split, m0, m_end, ts);
  }
}

// Unit j of the schedule: a whole tile (split -1) or one K split of a tail tile.
struct WsUnit {
  int tile, split, st_begin, st_count;
};
__device__ __forceinline__ WsUnit ws_unit(const WsSchedule& s, int j, int supertiles) {
  if (j < s.full_items) return {j, -1, 0, supertiles};
  const int u = j - s.full_items, split = u % s.tail_splits, begin = split * s.per_split;
  return {s.full_items + u / s.tail_splits, split, begin, min(supertiles, begin + s.per_split) - begin};
}

// The CTA's next unit and the cursor past it. Stream-K (sk on): cursor runs over this CTA's
// range of the tiles' supertiles (sk.begin(b) .. sk.begin(b + 1)), one segment per tile it
// touches (split -1; a segment shorter than the tile is a piece for
// reduce_stream_k_partials). Else: units blockIdx.x, + gridDim.x, ... of the ws schedule.
// 32-bit cursors (the launcher checks the work fits): 64-bit ones spilled at k = 2.
__device__ __forceinline__ WsUnit ws_next_unit(const TileArgs& targs, bool stream_k, int stop, int& cursor) {
  const int supertiles = targs.f.supertiles;
  if (!stream_k) {
    const WsUnit u = ws_unit(targs.ws, cursor, supertiles);
    cursor += int(gridDim.x);
    return u;
  }
  const int tile = cursor / supertiles, begin = cursor % supertiles;
  const int count = min(supertiles - begin, stop - cursor);
  cursor += count;
  return {tile, -1, begin, count};
}

// A tail unit's end, per MMA warp (w8: its warp among the 8, i.e. its 16 rows): the warp's
// fp32 partial goes to slot first_slot + split (a private layout), and the tile's last unit
// to arrive sums the `splits` partials in split order (reduce_partials_in_order).
template <int NT>
__device__ __forceinline__ bool reduce_tail_partials(const FusedArgs& args, float (&acc)[NT][4], int first_slot,
                                                     int split, int splits, unsigned* counter, int w8) {
  constexpr int64_t kSlotFloats = int64_t(128) * NT * 8;  // 128 rows x the tile's tokens (kWsPartialTileFloats at NT 32)
  auto part = [&](int sp) {
    return reinterpret_cast<float4*>(args.tile_partials + int64_t(first_slot + sp) * kSlotFloats) + (w8 * NT) * 32;
  };
  return reduce_partials_in_order<NT>(acc, split, splits, counter, part);
}

// A stream-K segment's end in the 256-token kernel, per MMA warp (w8: its 16 rows of the
// tile): reduce_stream_k_partials' slots, counter and K order, in 32-bit arithmetic, with the
// warp's own slot given and the tile's pieces counted only after the stores: with the 128
// accumulators live the schedule's divisions spilled (k = 2).
template <int NT>
__device__ __forceinline__ bool reduce_ws_stream_k_pieces(const FusedArgs& args, const StreamKSchedule& sk,
                                                          float (&acc)[NT][4], int own_slot, int tile, int w8) {
  const int lane = threadIdx.x & 31;
  float4* const parts = reinterpret_cast<float4*>(args.tile_partials) + w8 * NT * 32 + lane;
  constexpr int64_t kSlot = int64_t(128) * NT * 8 / 4;  // float4s per slot: 128 rows x the tile's tokens
  store_partial<NT>(acc, parts + own_slot * kSlot);
  unsigned* counter = args.counters + tile * 8 + w8;
  const unsigned arrived = arrive_after_partial(counter);
  const StreamKRanges32 r(sk);
  const int first = r.first_cta(tile), pieces = r.last_cta(tile) - first + 1;
  if (arrived != unsigned(pieces - 1)) return false;
  // Piece 0 is CTA first's last segment unless the tile starts its range; the others are
  // their CTAs' first segments.
  const int slot0 = 2 * first + (r.begin(first) == tile * r.supertiles ? 0 : 1);
  sum_partials_in_order<NT>(acc, pieces, counter, [&](int i) { return parts + (i == 0 ? slot0 : 2 * (first + i)) * kSlot; });
  return true;
}

// Warp-specialised tile kernel (wgmma_tile items with n_tiles 32): CTA tiles of 8 stripes
// (128 rows of W) x 256 tokens. Warpgroup 0 decodes (warp w: stripes w and w + 4) into a
// ring of kWsStages half-supertile stages (A: 128 rows x 64 columns, 16 KB) and thread 0
// copies x's matching 256 x 64 box by TMA into the stage (32 KB); warpgroups 1 and 2 only
// wait for a full stage, issue 4 wgmma.mma_async m64n256k16 over their 64 rows, and release
// the stage the group before read (one group in flight). 128 fp32 accumulators per consumer
// thread, which is why the decode lives in other warps. Barriers per stage: full (4 decode
// warps + the TMA's expected bytes) and empty (8 consumer warps). No K splits except for
// the tiles of a part-empty last wave (tile_schedule.h: split into up to 4 units along K,
// summed through fp32 partial tiles by the last unit to arrive), or with stream-K work
// (wgmma_stream items: each CTA a range of the tiles' supertiles, reduce_ws_stream_k_pieces);
// x must be 16-byte aligned (TMA), else the launcher runs the 128-token kernel (whole tiles
// or stream-K, as asked). 384 threads, one CTA per SM, persistent
// over (stripe group, token tile) tiles, then the tail's units.
// tile_ws_small_kernel below is the same design for 64- and 128-token tiles (dense stream-K
// plans of two warpgroups): 8 decode warps, one stripe each, 6 stages of 16 + 8 KB or 5 of 16 + 16.
template <int NT>
constexpr int ws_stages() { return NT == 32 ? 4 : NT == 16 ? 5 : 6; }
constexpr int kWsStages = ws_stages<32>();
// The ring, its barriers, k >= 3's pair table (the fused kernel's PairLut: 32 KB) and 1 KB
// to align the swizzle atoms to 1024 bytes.
constexpr uint32_t kWsABytes = 128 * 128;  // a stage's A: 128 rows x 64 columns
template <int NT>
constexpr uint32_t ws_x_bytes() { return NT * 8 * 128; }  // a stage's x: the tokens x 64 columns
template <int KB, int NT = 32>
constexpr size_t tile_ws_smem_bytes() {
  return size_t(ws_stages<NT>()) * (kWsABytes + ws_x_bytes<NT>()) + 16 * ws_stages<NT>() +
         (KB >= 3 ? PairLut<KB>::words * 4 : 0) + 1024;
}
static_assert(tile_ws_smem_bytes<4>() <= 227 * 1024, "the warp-specialised tile kernel fits an H100/H200 SM");
static_assert(tile_ws_smem_bytes<4, 8>() <= 227 * 1024, "the warp-specialised tile kernel fits an H100/H200 SM");
static_assert(tile_ws_smem_bytes<4, 16>() <= 227 * 1024, "the warp-specialised tile kernel fits an H100/H200 SM");

// An MMA warpgroup's share of one segment (stage_count stages) in the warp-specialised kernels:
// per stage wait until it is full, issue its four wgmma over 64 columns, and hand the stage
// before it back once that stage's group is done (one group in flight); the last stage goes
// back after the final wait. `it` counts stages over the CTA's whole range (the ring's slot
// and phase); acc starts at zero.
template <typename T, int NT, int kStages>
__device__ __forceinline__ void ws_mma_segment(float (&acc)[NT][4], int stage_count, uint32_t a_ring, uint32_t a_rows,
                                               uint32_t x_ring, uint32_t full_bars, uint32_t empty_bars, uint32_t& it,
                                               int lane) {
  constexpr uint32_t kABytes = kWsABytes, kXBytes = ws_x_bytes<NT>();
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
  const uint32_t segment_first = it;
  for (int s = 0; s < stage_count; ++s) {
    const uint32_t stage = it % kStages;
    mbarrier_wait(full_bars + 8 * stage, (it / kStages) & 1);
    const uint32_t a_st = a_ring + stage * kABytes + a_rows, x_st = x_ring + stage * kXBytes;
    wgmma_fence();
    const uint32_t a_lo = wgmma_desc_sw128_lo(a_st), x_lo = wgmma_desc_sw128_lo(x_st);
#pragma unroll
    for (int q = 0; q < 4; ++q)
      wgmma_ss<T, NT>(acc, wgmma_desc_sw128_from_lo(a_lo + uint32_t(q) * 2), wgmma_desc_sw128_from_lo(x_lo + uint32_t(q) * 2));
    wgmma_commit();
    wgmma_wait_ss<1, NT>(acc);
    if (it != segment_first) {  // the previous stage's group is done: hand the stage back
      __syncwarp();
      if (lane == 0) mbarrier_arrive(empty_bars + 8 * ((it - 1) % kStages));
    }
    ++it;
  }
  wgmma_wait_ss<0, NT>(acc);
  __syncwarp();
  if (lane == 0) mbarrier_arrive(empty_bars + 8 * ((it - 1) % kStages));
}

template <int KB, typename T>
__global__ void __launch_bounds__(384, 1) tile_ws_kernel(const __grid_constant__ TileArgs targs) {
  constexpr int NT = 32, kTokens = 256, kStripes = 8;
  constexpr uint32_t kABytes = kWsABytes, kXBytes = ws_x_bytes<NT>();
  constexpr int D = KB == 2 ? 4 : (KB == 3 ? 3 : 2);
  using StageT = Stage<KB>;
  const FusedArgs& args = targs.f;
  extern __shared__ __align__(16) uint8_t tile_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int wg = warp / 4, wl = warp % 4;
  const uint32_t smem_base = (uint32_t(__cvta_generic_to_shared(tile_smem)) + 1023u) & ~1023u;
  const uint32_t a_ring = smem_base, x_ring = smem_base + kWsStages * kABytes;
  const uint32_t full_bars = x_ring + kWsStages * kXBytes, empty_bars = full_bars + 8 * kWsStages;

  if (args.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // k >= 3: the pair table after the ring and the barriers (fill_pair_table): the lone
  // decode warp per scheduler, stalled mostly on its shuffles, was what the tensor cores
  // waited for (ncu, glm47 q M = 4096).
  const uint32_t lut = empty_bars + 8 * kWsStages;
  __shared__ uint32_t cb16[32];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      mbarrier_init(full_bars + 8 * s, 5);   // 4 decode warps + the TMA's arrive.expect_tx
      mbarrier_init(empty_bars + 8 * s, 8);  // the 8 MMA warps
    }
    mbarrier_init_fence();
  }
  if constexpr (KB >= 3) fill_pair_table<KB>(lut, args.codebook16, cb16);
  __syncthreads();
  const int units = (args.stripes + kStripes - 1) / kStripes;  // tile = token tile * units + unit
  // Grouped (expert_linear): the token tiles come from the table (launch_grouped_tile_table,
  // the kernel just before this one), no tail splits; the host's work is a bound.
  const int4* grouped = args.grouped_tiles;
  if (grouped) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int work = grouped ? min(targs.ws.work(), grouped[0].x * units) : targs.ws.work();
  // Stream-K (wgmma_stream items, dense only): this CTA's range of the tiles' supertiles.
  const StreamKSchedule& sk = targs.sk;
  const bool stream_k = sk.on() && !grouped;
  const int range_begin = stream_k ? int(sk.begin(blockIdx.x)) : int(blockIdx.x);
  const int stop = stream_k ? int(sk.begin(int64_t(blockIdx.x) + 1)) : work;

  if (wg == 0) {  // decode warps
    LevelPools<KB> pools{};
    if constexpr (KB == 2) pools = level_pools<KB>(args.codebook16);
    const uint32_t lut_lane = lut + uint32_t(lane % PairLut<KB>::replicas) * 4;
    const int a_row = 16 * wl + tile_a_row(g);  // stripe w's rows; stripe w + 4 64 rows on
    uint32_t it = 0;
    for (int cursor = range_begin; cursor < stop;) {
      const WsUnit wu = ws_next_unit(targs, stream_k, stop, cursor);
      const int unit = wu.tile % units, nst = wu.st_count;
      int m0, m_end;
      int64_t w_stripe0;
      token_tile_rows(args, grouped, wu.tile / units, kTokens, 0, m0, m_end, w_stripe0);
      const int s0 = min(unit * kStripes + wl, args.stripes - 1), s1 = min(unit * kStripes + wl + 4, args.stripes - 1);
      const int st_last = nst - 1;
      const int64_t st0_off = (w_stripe0 + s0) * args.supertiles + wu.st_begin,
                    st1_off = (w_stripe0 + s1) * args.supertiles + wu.st_begin;
      const uint2* wb0 = args.words + st0_off * KB * 32 + lane;
      const uint2* wb1 = args.words + st1_off * KB * 32 + lane;
      const uint2* sb0 = args.scales + st0_off * 8 + g;
      const uint2* sb1 = args.scales + st1_off * 8 + g;
      StageT st0[D], st1[D];
#pragma unroll
      for (int d = 0; d < D; ++d) {
        load_weight_stage<KB>(st0[d], wb0, sb0, d, st_last);
        load_weight_stage<KB>(st1[d], wb1, sb1, d, st_last);
      }
      // A stage's decoded rows, [which stripe][block jb][row g, row g + 8], decoded one stage
      // ahead: between the stores of stage s and its proxy fence the warp decodes stage s + 1,
      // so that the fence finds the stores done (ncu: ~6% of the decode warps' samples sat on
      // the fence when it followed the stores at once).
      uint4 v[8];
      auto decode_stage = [&](const StageT& c0, const StageT& c1, int h) {
#pragma unroll
        for (int which = 0; which < 2; ++which) {
          const StageT& cs = which ? c1 : c0;
          uint32_t w[2 * KB];
#pragma unroll
          for (int u = 0; u < KB; ++u) w[2 * u] = cs.w[u].x, w[2 * u + 1] = cs.w[u].y;
#pragma unroll
          for (int jb = 0; jb < 2; ++jb)
            decode_scaled_block<KB, T, TileDecode::table>(w, cs.scales, 2 * h + jb, lut_lane, pools, 0u,
                                             v[which * 4 + jb * 2], v[which * 4 + jb * 2 + 1]);
        }
      };
      decode_stage(st0[0], st1[0], 0);  // the item's first stage
      asm volatile("griddepcontrol.wait;\n" ::: "memory");  // x: after the previous kernel
      for (int sb = 0; sb < nst; sb += D) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
          const int st = sb + d;  // of the unit's supertiles
          if (st >= nst) break;
          const StageT cur0 = st0[d], cur1 = st1[d];
          load_weight_stage<KB>(st0[d], wb0, sb0, st + D, st_last);
          load_weight_stage<KB>(st1[d], wb1, sb1, st + D, st_last);
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // one stage per 64 columns
            const uint32_t stage = it % kWsStages;
            mbarrier_wait(empty_bars + 8 * stage, ((it / kWsStages) & 1) ^ 1);  // a fresh barrier passes
            if (threadIdx.x == 0) {
              mbarrier_arrive_expect_tx(full_bars + 8 * stage, kXBytes);
              tensor_copy_2d(x_ring + stage * kXBytes, &targs.x_map, (wu.st_begin + st) * 128 + 64 * h, m0,
                             full_bars + 8 * stage);
            }
            const uint32_t a_st = a_ring + stage * kABytes;
#pragma unroll
            for (int which = 0; which < 2; ++which)
#pragma unroll
              for (int jb = 0; jb < 2; ++jb) {
                const int row = a_row + 64 * which;
                sts128(a_st + sw128_offset(row, 4 * jb + c), v[which * 4 + jb * 2]);
                sts128(a_st + sw128_offset(row + 8, 4 * jb + c), v[which * 4 + jb * 2 + 1]);
              }
            // The next stage: this supertile's second half, or the next supertile's first
            // (st0[(d + 1) % D] holds supertile st + 1: not refilled yet, or refilled with it).
            if (h == 0) {
              decode_stage(cur0, cur1, 1);
            } else if (st + 1 < nst) {
              decode_stage(st0[(d + 1) % D], st1[(d + 1) % D], 0);
            }
            fence_proxy_async_shared();  // the decoded rows, for the tensor cores' reads
            __syncwarp();
            if (lane == 0) mbarrier_arrive(full_bars + 8 * stage);
            ++it;
          }
        }
      }
    }
  } else {  // MMA warpgroups: rows 64 (wg - 1) .. + 63 of the tile
    const float ts = args.meta->tensor_scale * kScalePairFactor<T>;
    const uint32_t a_rows = uint32_t(wg - 1) * 64 * 128;
    const bool pair_stores = pair_stores_allowed(args);  // 4-byte pair stores (store_full_tile), full or partial tiles
    uint32_t it = 0;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");  // residual, y: after the previous kernel
    for (int cursor = range_begin; cursor < stop;) {
      const WsUnit wu = ws_next_unit(targs, stream_k, stop, cursor);
      const int unit = wu.tile % units;
      int m0, m_end;
      int64_t w_stripe0;
      token_tile_rows(args, grouped, wu.tile / units, kTokens, 0, m0, m_end, w_stripe0);
      int stripe = unit * kStripes + 4 * (wg - 1) + wl;
      const bool stores = stripe < args.stripes;
      stripe = min(stripe, args.stripes - 1);
      float acc[NT][4];
      ws_mma_segment<T, NT, kWsStages>(acc, 2 * wu.st_count, a_ring, a_rows, x_ring, full_bars, empty_bars, it, lane);
      const int w8 = 4 * (wg - 1) + wl;  // this warp's 16 rows of the tile
      if (wu.split >= 0 && stores) {  // a tail unit: only the last of the tile's units goes on
        const int tail_tile = wu.tile - targs.ws.full_items;
        if (!reduce_tail_partials<NT>(args, acc, tail_tile * targs.ws.tail_splits, wu.split, targs.ws.tail_splits,
                                      args.counters + tail_tile * 8 + w8, w8))
          continue;
      }
      // A stream-K segment short of the whole K: only the tile's last segment to arrive goes
      // on (reduce_stream_k_partials' layout, in 32-bit arithmetic).
      if (stream_k && stores && wu.st_count < args.supertiles) {
        // Slot 2b for CTA b's first segment (the one its range starts with, so the stages run
        // so far are its own: no register kept for the range's start), 2b + 1 for its last.
        const int own_slot = 2 * int(blockIdx.x) + (it == 2u * uint32_t(wu.st_count) ? 0 : 1);
        if (!reduce_ws_stream_k_pieces<NT>(args, sk, acc, own_slot, wu.tile, w8)) continue;
      }
      if (stores && pair_stores && stripe * 16 + 16 <= args.N) {  // warp-uniform (tokens past m_end: skipped)
        store_full_tile<T, NT, true>(args, acc, stripe, m0, m_end, ts);
      } else if (stores) {
        finish_item<T, NT, true, false>(args, acc, stripe, 0, m0, m_end, ts);
      }
    }
  }
}

// tile_ws_kernel for 64- and 128-token tiles (NT 8, 16) with stream-K work only (plans
// wgmma_stream, n_tiles 8 / 16, warps 16): 8 decode warps (warp w: stripe w of each tile) and two
// MMA warpgroups (m64n64k16 / m64n128k16 over rows 64 mw .. + 63), 512 threads, 6 or 5 stages of
// 16 KB of A + 8 / 16 KB of x. Dense only (no grouped mode, no split tail: each CTA runs its range
// of the tiles' supertiles, reduce_ws_stream_k_pieces). Against the 64/128-token tile kernel with
// 8 warps (whose warps decode and issue wgmma alike, a CTA barrier per supertile): H200,
// 2026-12-03, A/B in one binary, two rounds, tuned plans: M = 64 glm47 q / o / shared_dn 2-5%
// faster at k = 3 and 4 (q k = 4 34.99 -> 34.21 us), shared_gu k = 4 1% slower, Kimi latent k = 3
// 25.61 -> 23.58; M = 128 glm47 q / o / shared_dn 1-3% faster, shared_gu within 1%. Forced on
// every shape, Qwen3's 11-25% (M = 64) and 7-13% (M = 128) faster (bench/results/h200-ab-tile-ws-
// small-session49.*). Without tile_ws_kernel's grouped and split-tail branches (fiftieth session,
// A/B against the form with them, one call, two rounds, M = 64 / 128, k = 3, 4): Qwen3 1.3% /
// 0.5% faster by geomean (up to 5%), glm47's large q / o / shared_dn ~1% slower (q M = 64 k = 4
// 34.55 -> 34.93 us), geomean of 72 tuned rows 0.996 / 0.999. Its own template: one source
// generalised over both spilled 8 bytes in the 256-token instances (k = 2, 4; three
// arrangements tried), which sit at the 168-register cap.
template <int KB, typename T, int NT>
__global__ void __launch_bounds__(512, 1) tile_ws_small_kernel(const __grid_constant__ TileArgs targs) {
  static_assert(NT == 8 || NT == 16, "64 or 128 tokens (256: tile_ws_kernel)");
  constexpr int kTokens = NT * 8, kStripes = 8, kStages = ws_stages<NT>();
  constexpr uint32_t kABytes = kWsABytes, kXBytes = ws_x_bytes<NT>();
  constexpr int D = KB == 2 ? 4 : (KB == 3 ? 3 : 2);
  using StageT = Stage<KB>;
  const FusedArgs& args = targs.f;
  extern __shared__ __align__(16) uint8_t tile_smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int wl = warp % 4, mw = warp / 4 - 2;  // mw: the MMA warpgroup of warps 8..15
  const uint32_t smem_base = (uint32_t(__cvta_generic_to_shared(tile_smem)) + 1023u) & ~1023u;
  const uint32_t a_ring = smem_base, x_ring = smem_base + kStages * kABytes;
  const uint32_t full_bars = x_ring + kStages * kXBytes, empty_bars = full_bars + 8 * kStages;

  if (args.pdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // k >= 3: the pair table after the ring and the barriers (fill_pair_table), as in tile_ws_kernel.
  const uint32_t lut = empty_bars + 8 * kStages;
  __shared__ uint32_t cb16[32];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(full_bars + 8 * s, kStripes + 1);  // the decode warps + the TMA's arrive.expect_tx
      mbarrier_init(empty_bars + 8 * s, 8);            // the 8 MMA warps
    }
    mbarrier_init_fence();
  }
  if constexpr (KB >= 3) fill_pair_table<KB>(lut, args.codebook16, cb16);
  __syncthreads();
  const int units = (args.stripes + kStripes - 1) / kStripes;  // tile = token tile * units + unit
  // This CTA's range of the tiles' supertiles.
  const StreamKSchedule& sk = targs.sk;
  const int range_begin = int(sk.begin(blockIdx.x)), stop = int(sk.begin(int64_t(blockIdx.x) + 1));

  if (warp < kStripes) {  // decode warps: stripe `warp` of each tile
    LevelPools<KB> pools{};
    if constexpr (KB == 2) pools = level_pools<KB>(args.codebook16);
    const uint32_t lut_lane = lut + uint32_t(lane % PairLut<KB>::replicas) * 4;
    const int a_row = 16 * warp + tile_a_row(g);  // stripe w's rows start at A row 16 w
    uint32_t it = 0;
    for (int cursor = range_begin; cursor < stop;) {
      const WsUnit wu = ws_next_unit(targs, true, stop, cursor);
      const int unit = wu.tile % units, nst = wu.st_count, m0 = wu.tile / units * kTokens;
      const int st_last = nst - 1;
      const int64_t off = int64_t(min(unit * kStripes + warp, args.stripes - 1)) * args.supertiles + wu.st_begin;
      const uint2* const wb = args.words + off * KB * 32 + lane;
      const uint2* const sb = args.scales + off * 8 + g;
      StageT sts[D];
#pragma unroll
      for (int d = 0; d < D; ++d) load_weight_stage<KB>(sts[d], wb, sb, d, st_last);
      // A stage's decoded rows, [block jb][row g, row g + 8], decoded one stage ahead: between
      // the stores of stage s and its proxy fence the warp decodes stage s + 1, so that the
      // fence finds the stores done (ncu: ~6% of the 256-token kernel's decode warps' samples
      // sat on the fence when it followed the stores at once).
      uint4 v[4];
      auto decode_stage = [&](const StageT& cs, int h) {
        uint32_t w[2 * KB];
#pragma unroll
        for (int u = 0; u < KB; ++u) w[2 * u] = cs.w[u].x, w[2 * u + 1] = cs.w[u].y;
#pragma unroll
        for (int jb = 0; jb < 2; ++jb)
          decode_scaled_block<KB, T, TileDecode::table>(w, cs.scales, 2 * h + jb, lut_lane, pools, 0u, v[jb * 2],
                                                        v[jb * 2 + 1]);
      };
      decode_stage(sts[0], 0);  // the segment's first stage
      asm volatile("griddepcontrol.wait;\n" ::: "memory");  // x: after the previous kernel
      for (int sb0 = 0; sb0 < nst; sb0 += D) {
#pragma unroll
        for (int d = 0; d < D; ++d) {
          const int st = sb0 + d;  // of the segment's supertiles
          if (st >= nst) break;
          const StageT cur = sts[d];
          load_weight_stage<KB>(sts[d], wb, sb, st + D, st_last);
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // one stage per 64 columns
            const uint32_t stage = it % kStages;
            mbarrier_wait(empty_bars + 8 * stage, ((it / kStages) & 1) ^ 1);  // a fresh barrier passes
            if (threadIdx.x == 0) {
              mbarrier_arrive_expect_tx(full_bars + 8 * stage, kXBytes);
              tensor_copy_2d(x_ring + stage * kXBytes, &targs.x_map, (wu.st_begin + st) * 128 + 64 * h, m0,
                             full_bars + 8 * stage);
            }
            const uint32_t a_st = a_ring + stage * kABytes;
#pragma unroll
            for (int jb = 0; jb < 2; ++jb) {
              sts128(a_st + sw128_offset(a_row, 4 * jb + c), v[jb * 2]);
              sts128(a_st + sw128_offset(a_row + 8, 4 * jb + c), v[jb * 2 + 1]);
            }
            // The next stage: this supertile's second half, or the next supertile's first
            // (sts[(d + 1) % D] holds supertile st + 1: not refilled yet, or refilled with it).
            if (h == 0) {
              decode_stage(cur, 1);
            } else if (st + 1 < nst) {
              decode_stage(sts[(d + 1) % D], 0);
            }
            fence_proxy_async_shared();  // the decoded rows, for the tensor cores' reads
            __syncwarp();
            if (lane == 0) mbarrier_arrive(full_bars + 8 * stage);
            ++it;
          }
        }
      }
    }
  } else {  // MMA warpgroups: rows 64 mw .. + 63 of the tile
    const float ts = args.meta->tensor_scale * kScalePairFactor<T>;
    const uint32_t a_rows = uint32_t(mw) * 64 * 128;
    const bool pair_stores = pair_stores_allowed(args);  // 4-byte pair stores (store_full_tile), full or partial tiles
    uint32_t it = 0;
    asm volatile("griddepcontrol.wait;\n" ::: "memory");  // residual, y: after the previous kernel
    for (int cursor = range_begin; cursor < stop;) {
      const WsUnit wu = ws_next_unit(targs, true, stop, cursor);
      const int unit = wu.tile % units, m0 = wu.tile / units * kTokens;
      int stripe = unit * kStripes + 4 * mw + wl;
      const bool stores = stripe < args.stripes;
      stripe = min(stripe, args.stripes - 1);
      float acc[NT][4];
      ws_mma_segment<T, NT, kStages>(acc, 2 * wu.st_count, a_ring, a_rows, x_ring, full_bars, empty_bars, it, lane);
      // A segment short of the whole K: only the tile's last segment to arrive goes on.
      if (stores && wu.st_count < args.supertiles) {
        // Slot 2b for CTA b's first segment (the one its range starts with, so the stages run
        // so far are its own: no register kept for the range's start), 2b + 1 for its last.
        const int own_slot = 2 * int(blockIdx.x) + (it == 2u * uint32_t(wu.st_count) ? 0 : 1);
        if (!reduce_ws_stream_k_pieces<NT>(args, sk, acc, own_slot, wu.tile, 4 * mw + wl)) continue;
      }
      if (stores && pair_stores && stripe * 16 + 16 <= args.N) {  // warp-uniform (tokens past M: skipped)
        store_full_tile<T, NT, true>(args, acc, stripe, m0, args.M, ts);
      } else if (stores) {
        finish_item<T, NT, true, false>(args, acc, stripe, 0, m0, args.M, ts);
      }
    }
  }
}

template <int KB, typename T, int NT, int WARPS>
cudaError_t configure_tile_instance() {
  static const cudaError_t configured = cudaFuncSetAttribute(
      tile_linear_kernel<KB, T, NT, WARPS>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(tile_smem_bytes<KB, NT, WARPS>()));
  return configured;
}

// Calls f.template operator()<T, NT, WARPS>() for the tile instantiation of (shape, dtype).
template <typename F>
auto with_tile_instance(FusedShape s, DType t, F&& f) {
  KBIT_REQUIRE(device_has_wgmma(), "fused linear: wgmma_tile items need an sm_90 GPU (Hopper), this is ",
               kbit::cuda::device_description());
  KBIT_REQUIRE(s.warps == 4 || s.warps == 8, "fused linear: wgmma_tile items take 4 or 8 warps, got ", s.warps);
  KBIT_REQUIRE(s.n_tiles == 8 || s.n_tiles == 16, "fused linear: wgmma_tile items take n_tiles 8, 16 or 32, got ", s.n_tiles);
  auto typed = [&]<typename T>() {
    if (s.n_tiles == 8) return s.warps == 8 ? f.template operator()<T, 8, 8>() : f.template operator()<T, 8, 4>();
    return s.warps == 8 ? f.template operator()<T, 16, 8>() : f.template operator()<T, 16, 4>();
  };
  if (t == DType::f16) return typed.template operator()<__half>();
  KBIT_REQUIRE(t == DType::bf16, "fused linear: x must be F16 or BF16, got ", dtype_name(t));
  return typed.template operator()<__nv_bfloat16>();
}

// The warp-specialised kernel for NT token tiles: tile_ws_kernel at 256 tokens (4 decode warps
// + 8 MMA warps, 384 threads), tile_ws_small_kernel at 64 / 128 (8 + 8, 512 threads; stream-K
// plans of 16 warps only). The one place that maps NT to a kernel: configure, occupancy and
// launch all take it from here.
template <int KB, typename T, int NT>
constexpr auto ws_kernel() {
  if constexpr (NT == 32) return tile_ws_kernel<KB, T>;
  else return tile_ws_small_kernel<KB, T, NT>;
}
template <int NT>
constexpr int ws_threads() { return NT == 32 ? 384 : 512; }

template <int KB, typename T, int NT>
cudaError_t configure_tile_ws_instance() {
  static const cudaError_t configured = cudaFuncSetAttribute(
      ws_kernel<KB, T, NT>(), cudaFuncAttributeMaxDynamicSharedMemorySize, int(tile_ws_smem_bytes<KB, NT>()));
  return configured;
}

template <typename F>
auto with_dtype(DType t, F&& f) {
  if (t == DType::f16) return f.template operator()<__half>();
  KBIT_REQUIRE(t == DType::bf16, "fused linear: x must be F16 or BF16, got ", dtype_name(t));
  return f.template operator()<__nv_bfloat16>();
}

template <int KB>
void launch_tile(const FusedArgs& a_in, FusedShape s, DType t, cudaStream_t stream) {
  FusedArgs a = a_in;
  KBIT_REQUIRE(s.items != FusedItems::wgmma_stream || s.n_tiles == 8 || s.n_tiles == 16 || s.n_tiles == 32,
               "fused linear: wgmma_stream items take n_tiles 8, 16 or 32, got ", s.n_tiles);
  // Stream-K 64/128-token tiles of 16 warps (8 decode, 8 MMA) run on tile_ws_small_kernel; it reads
  // x by TMA, so an unaligned x takes the tile kernel's 8 warps instead (decode and MMA alike).
  KBIT_REQUIRE(s.warps != 16 || (s.items == FusedItems::wgmma_stream && (s.n_tiles == 8 || s.n_tiles == 16) &&
                                 a.expert_offsets == nullptr),
               "fused linear: 16 warps are the warp-specialised wgmma_stream kernel (n_tiles 8 or 16, dense), got n_tiles ",
               s.n_tiles);
  if (s.warps == 16 && !a.x_vec) s.warps = 8;
  const bool ws_small = s.warps == 16;
  if (s.n_tiles == 32 && !a.x_vec) {  // TMA needs 16-byte aligned x: the 128-token kernel instead
    s.n_tiles = 16, s.warps = 8;
    a.tiles = (a.M + 127) / 128;
  }
  // Grouped (expert_linear): the token tiles' table first, then items over at most every
  // row's tile plus one partial tile per expert (the device knows the exact count).
  const bool grouped = a.expert_offsets != nullptr;
  int64_t tiles_bound = a.tiles;
  if (grouped) {
    KBIT_REQUIRE(a.splits == 1 && !a.bias && !a.residual && a.experts >= 1 && a.experts <= kbit::kMaxExperts,
                 "fused linear: grouped mode needs splits = 1, no bias or residual, 1..", kbit::kMaxExperts, " experts");
    const int rows = s.n_tiles * 8;
    KBIT_REQUIRE(a.grouped_tiles && a.grouped_tile_capacity >= grouped_tile_entries(a.M, a.experts, rows),
                 "fused linear: the grouped tile table needs ", grouped_tile_entries(a.M, a.experts, rows),
                 " entries, the workspace has ", a.grouped_tile_capacity);
    launch_grouped_tile_table(a.expert_offsets, a.experts, rows, a.M, a.grouped_tiles, a.grouped_tile_capacity, a.pdl,
                              stream);
    a.pdl = true;  // the tile kernel's prologue overlaps the table's launch; it waits before reading the table
    tiles_bound = int64_t(a.tiles) + a.experts;
  } else {
    a.grouped_tiles = nullptr;
  }
  // The warp-specialised kernels read x by TMA (launch_tile maps an unaligned x to the tile kernel
  // above). 256 tokens: whole tiles with a split tail, or stream-K; 64 / 128 tokens: stream-K only.
  auto launch_ws = [&]<int NT>() {
    constexpr int kTok = NT * 8;
    KBIT_REQUIRE(device_has_wgmma(), "fused linear: wgmma_tile items need an sm_90 GPU (Hopper), this is ",
                 kbit::cuda::device_description());
    KBIT_REQUIRE(a.splits == 1, "fused linear: the warp-specialised tile kernel takes no K splits, got ", a.splits);
    KBIT_REQUIRE(a.tiles == (a.M + kTok - 1) / kTok, "fused linear: token tiles do not match n_tiles");
    // Partial tiles of 128 rows x kTok tokens: 256 / kTok of them in one of the workspace's slots.
    const int64_t partial_slots = a.tile_partial_slots * (256 / kTok);
    const int64_t items = (int64_t(a.stripes) + 7) / 8 * tiles_bound;
    KBIT_REQUIRE(items < (int64_t(1) << 29), "fused linear: too many work items");
    TileArgs ta{};
    dim3 grid;
    // 64 / 128-token tiles are stream-K only: launch_tile's check made their items wgmma_stream.
    if (NT != 32 || s.items == FusedItems::wgmma_stream) {  // stream-K: the tiles' supertiles evenly over the CTAs
      KBIT_REQUIRE(!grouped, "fused linear: wgmma_stream items have no grouped mode");
      // Two partial tiles per CTA: a workspace made for M <= 64 (one slot per SM) runs half the CTAs.
      KBIT_REQUIRE(a.tile_partials && partial_slots >= 2,
                   "fused linear: wgmma_stream items need partial tiles, the workspace has none (create it with "
                   "max_m > 16 on Hopper)");
      ta.sk = stream_k_schedule(items, std::min<int64_t>(a.max_ctas, partial_slots / 2), a.supertiles);
      KBIT_REQUIRE(ta.sk.work < (int64_t(1) << 31), "fused linear: too much stream-K work (", ta.sk.work, " supertiles)");
      KBIT_REQUIRE(a.counters && items * 8 <= a.counter_count, "fused linear: wgmma_stream items need ", items * 8,
                   " counters, the workspace has ", a.counter_count);
      grid = dim3(unsigned(ta.sk.ctas));
    } else if constexpr (NT == 32) {  // whole tiles, a part-empty last wave split along K
      const bool split_tail = a.tile_partials && !grouped;
      ta.ws = ws_schedule(items, a.max_ctas, a.supertiles, split_tail ? partial_slots : 0);
      grid = dim3(unsigned(std::max<int64_t>(1, std::min<int64_t>(ta.ws.work(), a.max_ctas))));
    }
    ta.f = a;
    ta.x_tma = true;
    ta.x_map = tensor_map_2d(a.x, a.M, a.K, a.ldx, kTok, 64, true, "fused linear (tile)", "x");
    with_dtype(t, [&]<typename T>() {
      check_cuda(configure_tile_ws_instance<KB, T, NT>(), "fused linear: setting the tile kernel's shared memory size");
      launch_maybe_pdl(ws_kernel<KB, T, NT>(), grid, dim3(ws_threads<NT>()), tile_ws_smem_bytes<KB, NT>(), stream, a.pdl,
                       "fused linear: tile kernel launch", ta);
    });
  };
  if (s.n_tiles == 32) {
    launch_ws.template operator()<32>();
    return;
  }
  if (ws_small) {
    if (s.n_tiles == 8) {
      launch_ws.template operator()<8>();
    } else {
      launch_ws.template operator()<16>();
    }
    return;
  }
  with_tile_instance(s, t, [&]<typename T, int NT, int WARPS>() {
    check_cuda(configure_tile_instance<KB, T, NT, WARPS>(), "fused linear: setting the tile kernel's shared memory size");
    KBIT_REQUIRE(a.tiles == (a.M + NT * 8 - 1) / (NT * 8), "fused linear: token tiles do not match n_tiles");
    const int64_t items = (int64_t(a.stripes) + WARPS - 1) / WARPS * a.splits * tiles_bound;
    KBIT_REQUIRE(items < (int64_t(1) << 31), "fused linear: too many work items");
    TileArgs t{};
    dim3 grid(unsigned(std::max<int64_t>(1, std::min<int64_t>(items, a.max_ctas))));
    if (s.items == FusedItems::wgmma_stream) {  // stream-K: the items' supertiles evenly over the CTAs
      KBIT_REQUIRE(!grouped && a.splits == 1, "fused linear: wgmma_stream items take no K splits and no grouped mode");
      t.sk = stream_k_schedule(items, a.max_ctas, a.supertiles);
      const int64_t floats = 2 * int64_t(t.sk.ctas) * WARPS * NT * 128;
      KBIT_REQUIRE(a.tile_partials && floats <= a.tile_partial_slots * kWsPartialTileFloats,
                   "fused linear: wgmma_stream items need ", floats * 4, " bytes of partial tiles, the workspace has ",
                   a.tile_partial_slots * kWsPartialTileFloats * 4, " (create it with max_m > 16 on Hopper)");
      KBIT_REQUIRE(a.counters && items * WARPS <= a.counter_count, "fused linear: wgmma_stream items need ",
                   items * WARPS, " counters, the workspace has ", a.counter_count);
      grid = dim3(unsigned(t.sk.ctas));
    }
    const size_t smem = tile_smem_bytes<KB, NT, WARPS>();
    t.f = a;
    // TMA needs a 16-byte aligned x with rows a multiple of 16 bytes apart (x_vec).
    t.x_tma = a.x_vec;
    if (t.x_tma) t.x_map = tensor_map_2d(a.x, a.M, a.K, a.ldx, NT * 8, 64, true, "fused linear (tile)", "x");
    launch_maybe_pdl(tile_linear_kernel<KB, T, NT, WARPS>, grid, dim3(WARPS * 32), smem, stream, a.pdl,
                     "fused linear: tile kernel launch", t);
    check_launch("fused linear tile kernel");
  });
}

template <int KB>
int tile_occupancy(FusedShape s, DType t) {
  // The warp-specialised kernels: 256 tokens, or 64 / 128 tokens with 16 warps.
  auto ws_occupancy = [&]<int NT>() {
    return with_dtype(t, [&]<typename T>() {
      check_cuda(configure_tile_ws_instance<KB, T, NT>(), "fused linear: setting the tile kernel's shared memory size");
      int blocks = 0;
      check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, ws_kernel<KB, T, NT>(), ws_threads<NT>(),
                                                               tile_ws_smem_bytes<KB, NT>()),
                 "fused linear: occupancy (tile)");
      return blocks;
    });
  };
  if (s.n_tiles == 32) return ws_occupancy.template operator()<32>();
  if (s.warps == 16) return s.n_tiles == 8 ? ws_occupancy.template operator()<8>() : ws_occupancy.template operator()<16>();
  return with_tile_instance(s, t, [&]<typename T, int NT, int WARPS>() {
    check_cuda(configure_tile_instance<KB, T, NT, WARPS>(), "fused linear: setting the tile kernel's shared memory size");
    int blocks = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, tile_linear_kernel<KB, T, NT, WARPS>, WARPS * 32,
                                                             tile_smem_bytes<KB, NT, WARPS>()),
               "fused linear: occupancy (tile)");
    return blocks;
  });
}

}  // namespace kbit::cuda::detail
