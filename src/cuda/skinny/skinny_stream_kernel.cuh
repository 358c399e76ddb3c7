// Skinny GEMM, streaming kernel: C[M, N] = A[M, K] W[N, K]^T (+ bias) (+ R), fp32
// accumulation, M = 1..16; the other kernel of kbit::skinny_gemm (loaders `registers`,
// `staged` and `async`; skinny_kernel.cuh is the TMA ring).
//
// Why: a plain kernel reads the Kimi-K3 latent weight (51.4 MB) in 12.9 us when its load
// instructions each cover 4 rows x 128 bytes or wider, with 448 CTAs (bench/calibration/
// read_floor.cu), while the TMA ring without any MMA streams it in 15.2 us (ninth session).
// So each warp fetches its own W with plain loads or cp.async: no producer warp, no
// CTA-wide ring, no barrier in the loop.
//
// Layout: C^T = W A^T with mma.sync.m16n8k16, 16 rows of W the A operand, 8 tokens the
// B operand (as in the ring kernel). A CTA owns 16 rows; K is cut into batches of BC = 64
// or 128 columns, and warp w takes batches w, w + WARPS, ... Lane (g, c)
// multiplies 16 bytes of rows g and g + 8 at columns 32 j + 8 c of each 32-column step j
// with 16 bytes of token g at the same columns (the k order permuted alike for both
// operands). Loaders:
//  - registers: each lane loads exactly those 16 bytes (each load instruction covers 8
//    rows x 64 bytes);
//  - staged: lane (q = lane / 8, u = lane % 8) loads 16 bytes at column 64 p + 8 u of rows
//    4 i + q (4 rows x 128 bytes per instruction), stores them to the warp's own tile of shared
//    memory (16-byte chunks XOR-swizzled by 4 (row & 1): conflict-free both ways) and
//    reads the fragments back; only __syncwarp, no CTA barrier in the loop;
//  - async: the staged layout, but filled with cp.async (no registers in flight) into a
//    ring of a.stages tiles per warp (the default: the fastest at every M <= 16); it
//    also takes R = 2 stripes (32-row CTAs, 64-column batches) whose MMAs share each A
//    fragment, for half the A traffic per byte of W at M > 8 (Kimi M = 9-16: 17.5-18.3
//    us against 18.9-19.6 with one stripe, commit 8bc3276).
// A: with the async loader and 16-byte aligned rows, each batch's columns of A (token rows
// 0..min(M, 8 NT) - 1) are copied into the same tile below W's rows, in the same copy group
// (cp.async.ca: through L1, which the CTAs of an SM share), so the MMAs never wait on a
// global load of A (ncu at M = 16 had 3.2 of 8.5 cycles per issue on L1TEX). With it one
// stripe beats two again at M = 9-16 (commit 5d93ccc sweep). Otherwise A is read through
// L1 as each batch is used. W loads carry
// L1::no_allocate and an L2 evict-first policy. With PDL the first D - 1 batches of W are requested before
// griddepcontrol.wait; the next kernel is triggered at entry when the whole grid is resident, else after
// the main loop (skinny_pdl_trigger). Partial sums: skinny_reduce.cuh (warp order, cluster rank order).
// Launch: grid (row groups of 16 R rows, splits), WARPS * 32 threads, at most 128 registers
// per thread (four CTAs of 4 warps per SM; 32-row CTAs spilled with the register loaders).
// Measured (H200, 2026-12-01, thirty-first session, Kimi-K3 latent N = 7168, K = 3584, bf16 + residual,
// the tuned async shapes, every row valid against fp64; BENCHMARKS.md): isolated M = 1-8 14.28-14.35 us,
// M = 9-16 14.60-14.94 (cuBLAS addmm 17.1-17.9 / 15.4-15.5: 1.04-1.25x); chained with PDL 12.76-13.01 /
// 13.68-13.88; a plain read of W 12.8. The isolated call's extra ~1.5 us is its head and tail (the warps
// whose first batch lands last finish last; kbit bench skinny-probe). Each change and its A/B:
// docs/KERNEL_HISTORY.md.
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

// Columns per batch (the instantiated kslice values): 128 or 256 bytes of each row.
constexpr int kStreamBatchColumnsSmall = 64, kStreamBatchColumnsLarge = 128;

// Rows of one tile: the W rows of the CTA and, in the async ring, the A rows of its token
// tiles (A's batch columns travel with W's, so the MMAs never wait on a global load of A).
__host__ __device__ constexpr int stream_tile_rows(int stripes, int n_tiles, bool async_ring) {
  return 16 * stripes + (async_ring ? 8 * n_tiles : 0);
}

// Tiles per warp: 0 (registers), 1 (staged) or the ring's stages (async).
__host__ __device__ constexpr size_t stream_shared_bytes(int warps, int stripes, int n_tiles, int batch_columns,
                                                        int tiles_per_warp, bool async_ring) {
  const size_t tiles =
      size_t(warps) * tiles_per_warp * stream_tile_rows(stripes, n_tiles, async_ring) * batch_columns * 2;
  const size_t red = reduction_bytes(warps, stripes, n_tiles);
  return tiles > red ? tiles : red;
}

// 16 bytes of W: no L1 allocation, evict-first in L2 (read once per call).
__device__ __forceinline__ uint4 load_w16(const uint16_t* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}

// The loaders of this kernel (SkinnyLoader registers, staged, async).
constexpr int kLoadRegisters = 0, kLoadStaged = 1, kLoadAsync = 2;

}  // namespace skinny

// BC: columns per batch (64 or 128); D: batches in flight per warp (registers, staged; the
// async loader takes a.stages at run time); LOADER: kLoadRegisters, kLoadStaged, kLoadAsync.
// EARLY_REFILL (async loader, PDL launches): a tile is refilled as soon as its batch is in
// registers, before the MMAs, so `stages` batches stay in flight (and are requested before
// griddepcontrol.wait) instead of stages - 1. Measured on the H200 (2026-12-01), Kimi-K3:
// chained with PDL M = 4-8 13.7-13.9 -> 13.0-13.2 us, M = 9-16 14.3-14.4 -> 14.2-14.3; but
// isolated calls 0.5-0.7 us slower (probably because the deeper first burst is served less
// evenly across the warps, and the last warps set the time), so plain launches keep the
// late refill.
template <typename T, int NT, int WARPS, int BC, int D, int LOADER, int R = 1, bool EARLY_REFILL = false>
__global__ void __launch_bounds__(WARPS * 32, 512 / (WARPS * 32)) skinny_stream_kernel(const __grid_constant__ SkinnyArgs a) {
  using namespace skinny;
  constexpr int kSteps = BC / 32;         // 32-column MMA steps per batch
  constexpr int kRows = 16 * R;           // rows of a CTA (R stripes of 16)
  constexpr int kLoads = 2 * kSteps * R;  // 16-byte W loads per lane per batch
  static_assert(R == 1 || LOADER != kLoadRegisters, "registers: one stripe");
  constexpr int kRowBytes = BC * 2;       // a row of the staged tile
  constexpr bool STAGED = LOADER != kLoadRegisters;  // the shared-memory tile layout
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, c = lane & 3;
  const int splits = int(gridDim.y), split = int(blockIdx.y);
  const int batches = (a.K + BC - 1) / BC;
  // This CTA's batches [b0, b1): never empty (the host keeps splits <= batches).
  const int b0 = int(int64_t(batches) * split / splits), b1 = int(int64_t(batches) * (split + 1) / splits);
  const int mine = b1 - b0 > warp ? (b1 - b0 - warp + WARPS - 1) / WARPS : 0;
  const int row_base = int(blockIdx.x) * kRows;
  // Diagnostics only (SkinnyArgs::probe, in KBIT_SKINNY_PROBE builds): a phase's
  // %globaltimer, lane 0 of each warp; compiled out otherwise.
  auto stamp = [&](int slot, unsigned long long value = 0, bool timer = true) {
    if (kSkinnyProbeBuilt && a.probe && lane == 0) {
      if (timer) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(value));
      a.probe[((int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * WARPS + warp) * kSkinnyProbeSlots + slot] = value;
    }
  };
  stamp(kSkinnyProbeEntry);
  skinny_pdl_trigger(a, true);
  const uint64_t policy = l2_evict_first_policy();

  // Load l of a batch. registers: rows g + 8 h (h = l / kSteps), columns 32 j + 8 c
  // (j = l % kSteps). staged, async: rows 4 (l % 4R) + q, columns 64 (l / 4R) + 8 u.
  auto row_of = [&](int l) {
    return STAGED ? 4 * (l % (4 * R)) + (lane >> 3) : g + 8 * (l / kSteps);
  };
  auto col_of = [&](int l) {
    return STAGED ? 64 * (l / (4 * R)) + 8 * (lane & 7) : 32 * (l % kSteps) + 8 * c;
  };
  // 32-bit offsets from the row group's first row (the host keeps 16 rows below 2^31
  // elements): half the registers of one pointer per load. Rows past N read row N - 1.
  const uint16_t* const wbase = a.w + int64_t(row_base) * a.ldw;
  const int ldw = int(a.ldw);
  int w_off[kLoads];
#pragma unroll
  for (int l = 0; l < kLoads; ++l) w_off[l] = (min(row_base + row_of(l), a.N - 1) - row_base) * ldw + col_of(l);
  const uint16_t* const xbase = static_cast<const uint16_t*>(a.x);

  auto load_w = [&](uint4(&dst)[kLoads], int i) {
    const int col0 = (b0 + warp + i * WARPS) * BC;
#pragma unroll
    for (int l = 0; l < kLoads; ++l)
      dst[l] = col0 + col_of(l) < a.K ? load_w16(wbase + (w_off[l] + col0), policy) : make_uint4(0, 0, 0, 0);
  };
  // A comes from L1 (or L2 on first touch) as the batch is used: keeping it in flight as
  // long as W would cost registers that the weights need.
  auto load_x = [&](uint4(&dst)[kSteps][NT], int i) {
    const int col0 = (b0 + warp + i * WARPS) * BC;
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int t = min(nt * 8 + g, a.M - 1), col = col0 + 32 * j + 8 * c;
        const uint16_t* p = xbase + int64_t(t) * a.ldx + col;
        dst[j][nt] = col >= a.K ? make_uint4(0, 0, 0, 0)
                     : a.x_vec  ? __ldg(reinterpret_cast<const uint4*>(p))
                                : load_x8(p);
      }
  };

  constexpr bool kTwoChains = R * NT <= 2;
  // Warp 0's bias and R, requested before the loop; not by the async instance with 128
  // columns and 16 tokens, which is at the 128-register cap without them (16 bytes spilled).
  constexpr bool kEarlyAddends = !(LOADER == kLoadAsync && BC == 128 && NT == 2);
  EpilogueAddends<T, NT, R> addends;
  float acc[R][NT][4], acc_hi[R][NT][4];
  zero(acc);
  zero(acc_hi);
  // The warp's tile (staged), or ring of a.stages tiles (async).
  const int tiles_per_warp = LOADER == kLoadAsync ? a.stages : 1;
  constexpr int kTileBytes = stream_tile_rows(R, NT, LOADER == kLoadAsync) * kRowBytes;  // W rows, then A rows
  unsigned char* const tile = smem + size_t(warp) * tiles_per_warp * kTileBytes;
  // Fragments of rows 16 r + g, 16 r + g + 8 from a staged tile.
  auto read_tile = [&](const unsigned char* t, uint4(&frag)[R][2][kSteps]) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < kSteps; ++j) {
          const int row = 16 * r + g + 8 * h, chunk = (4 * j + c) ^ (4 * (row & 1));
          frag[r][h][j] = *reinterpret_cast<const uint4*>(t + row * kRowBytes + chunk * 16);
        }
  };
  // With R = 2 the two stripes share each A fragment: half the A loads per byte of W.
  auto multiply = [&](const uint4(&frag)[R][2][kSteps], const uint4(&x)[kSteps][NT]) {
#pragma unroll
    for (int j = 0; j < kSteps; ++j)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint4 w0 = frag[r][0][j], w1 = frag[r][1][j];
        const uint32_t lo[4] = {w0.x, w1.x, w0.y, w1.y}, hi[4] = {w0.z, w1.z, w0.w, w1.w};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          mma_16816<T>(acc[r][nt], lo, x[j][nt].x, x[j][nt].y);
          mma_16816<T>(kTwoChains ? acc_hi[r][nt] : acc[r][nt], hi, x[j][nt].z, x[j][nt].w);
        }
      }
  };
  auto compute = [&](const uint4(&w)[kLoads], const uint4(&x)[kSteps][NT]) {
    uint4 frag[R][2][kSteps];  // [stripe][half][step]
    if constexpr (STAGED) {
      __syncwarp();  // the previous batch's fragments have been read
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int row = row_of(l), chunk = (col_of(l) / 8) ^ (4 * (row & 1));
        *reinterpret_cast<uint4*>(tile + row * kRowBytes + chunk * 16) = w[l];
      }
      __syncwarp();
      read_tile(tile, frag);
    } else {
#pragma unroll
      for (int l = 0; l < kLoads; ++l) frag[0][l / kSteps][l % kSteps] = w[l];
    }
    multiply(frag, x);
  };

  if constexpr (LOADER == kLoadAsync) {
    // Batch i goes to tile i % stages of the warp's ring as one copy group per thread
    // (the tile index is kept as a counter: a modulo by the run-time ring length compiles to
    // a division sequence on the loop's path):
    // W's rows, then (16-byte aligned A) A's rows 0..min(M, 8 NT) - 1 at the same columns,
    // both swizzled alike. Waiting until stages - 1 groups are pending means batch i has
    // landed (for this thread's copies; __syncwarp shares them with the warp).
    const int stages = a.stages;
    const uint32_t ring = shared_address(tile);
    constexpr int kChunksPerRow = BC / 8;                       // 16-byte chunks of a tile row
    constexpr int kACopies = (8 * NT * kChunksPerRow + 31) / 32;  // per lane, at most
    const bool a_in_ring = a.x_vec != 0;
    const int a_rows = min(a.M, 8 * NT), a_chunks = a_in_ring ? a_rows * kChunksPerRow : 0;
    auto issue_w = [&](int i, int slot) {
      const int col0 = (b0 + warp + i * WARPS) * BC;
      const uint32_t dst = ring + uint32_t(slot * kTileBytes);
#pragma unroll
      for (int l = 0; l < kLoads; ++l) {
        const int row = row_of(l), chunk = (col_of(l) / 8) ^ (4 * (row & 1));
        cp_async16_evict_first(dst + uint32_t(row * kRowBytes + chunk * 16), wbase + (w_off[l] + col0),
                 col0 + col_of(l) < a.K ? 16 : 0, policy);
      }
    };
    auto issue_a = [&](int i, int slot) {
      const int col0 = (b0 + warp + i * WARPS) * BC;
      const uint32_t dst = ring + uint32_t(slot * kTileBytes);
#pragma unroll
      for (int u = 0; u < kACopies; ++u) {
        const int q = lane + 32 * u;
        if (q < a_chunks) {
          const int t = q / kChunksPerRow, cc = q % kChunksPerRow, col = col0 + 8 * cc;
          const uint16_t* src = xbase + int64_t(t) * a.ldx + (col < a.K ? col : 0);
          cp_async16_through_l1(dst + uint32_t((kRows + t) * kRowBytes + ((cc ^ (4 * (t & 1))) * 16)), src, col < a.K ? 16 : 0);
        }
      }
    };
    // A's fragments from the tile: token rows past M read row M - 1 (never stored).
    auto read_x_tile = [&](const unsigned char* t, uint4(&dst)[kSteps][NT]) {
#pragma unroll
      for (int j = 0; j < kSteps; ++j)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int row = min(nt * 8 + g, a.M - 1), chunk = (4 * j + c) ^ (4 * (row & 1));
          dst[j][nt] = *reinterpret_cast<const uint4*>(t + (kRows + row) * kRowBytes + chunk * 16);
        }
    };
    // The first stages - kLag batches (kLag = 1, or 0 with EARLY_REFILL): W before
    // griddepcontrol.wait (it does not depend on the previous kernel), A after it, all in one
    // copy group followed by empty ones up to stages - kLag groups, so that batch i
    // (i >= stages - kLag) is group i as in the loop below.
    constexpr int kLag = EARLY_REFILL ? 0 : 1;
    for (int i = 0; i + kLag < stages; ++i)
      if (i < mine) issue_w(i, i);
    if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
    for (int i = 0; i + kLag < stages; ++i)
      if (i < mine) issue_a(i, i);
    for (int i = 0; i + kLag < stages; ++i) cp_async_commit();
    if (kEarlyAddends && warp == 0) load_epilogue_addends<T, NT, R>(addends, a, row_base);
    int cur = 0;  // i % stages: the tile of batch i
    for (int i = 0; i < mine; ++i) {
      if constexpr (!EARLY_REFILL) {  // batch i + stages - 1 into the tile batch i - 1 left
        const int freed = cur == 0 ? stages - 1 : cur - 1;
        if (i + stages - 1 < mine) issue_w(i + stages - 1, freed), issue_a(i + stages - 1, freed);
        cp_async_commit();  // an empty group past the end keeps the count
      }
      uint4 xv[kSteps][NT];
      if (!a_in_ring) load_x(xv, i);
      cp_async_wait_pending(stages - 1);  // groups 0..i complete: batch i has landed
      __syncwarp();
      if constexpr (kSkinnyProbeBuilt)
        if (i == 0) stamp(kSkinnyProbeFirstBatch);
      const unsigned char* slot = tile + cur * kTileBytes;
      if (a_in_ring) read_x_tile(slot, xv);
      uint4 frag[R][2][kSteps];
      read_tile(slot, frag);
      __syncwarp();  // read before the tile is refilled
      if constexpr (EARLY_REFILL) {  // batch i is in registers: its tile takes batch i + stages
        if (i + stages < mine) issue_w(i + stages, cur), issue_a(i + stages, cur);
        cp_async_commit();
      }
      multiply(frag, xv);
      cur = cur + 1 == stages ? 0 : cur + 1;
    }
    cp_async_wait_pending(0);
  } else {
  uint4 wv[D][kLoads];
  // Weights first: they do not depend on the previous kernel.
#pragma unroll
  for (int d = 0; d + 1 < D; ++d)
    if (d < mine) load_w(wv[d], d);
  if (a.pdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (kEarlyAddends && warp == 0) load_epilogue_addends<T, NT, R>(addends, a, row_base);
  // Batch i sits in slot i % D; the W loads of batch i + D - 1 go out before batch i is used.
  for (int i0 = 0; i0 < mine; i0 += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int i = i0 + d;
      if (i < mine) {  // warp-uniform: mma.sync needs the whole warp
        uint4 xv[kSteps][NT];
        load_x(xv, i);
        if (i + D - 1 < mine) load_w(wv[(d + D - 1) % D], i + D - 1);
        compute(wv[d], xv);
      }
    }
  }
  }
  stamp(kSkinnyProbeLoopDone);
  if constexpr (kTwoChains) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][nt][i] += acc_hi[r][nt][i];
  }
  // The tiles are free once every warp is past its loop (reduce_and_store begins with a
  // CTA barrier).
  reduce_and_store<T, NT, WARPS, R, kEarlyAddends>(acc, reinterpret_cast<float*>(smem), a, row_base, addends);
  if (kSkinnyProbeBuilt && a.probe) {
    stamp(kSkinnyProbeStored);
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    stamp(kSkinnyProbeSm, sm, false);
    stamp(kSkinnyProbeBatches, unsigned(mine), false);
    stamp(kSkinnyProbeWarps, unsigned(WARPS), false);
  }
}

inline int stream_tiles_per_warp(const SkinnyShape& s) {
  return s.loader == SkinnyLoader::async ? s.stages : s.loader == SkinnyLoader::staged ? 1 : 0;
}

// The instantiated (kslice, stages): 64 columns x 2 or 3 batches, and with one token tile
// 128 columns x 2 (the others spill at 128 registers; check_skinny_shape refuses them).
// The async loader: 64 or 128 columns, any stages (a run-time ring).
template <typename T, int NT, typename F>
auto with_stream_instance(const SkinnyShape& s, F&& f) {
  using namespace skinny;
  auto with_warps = [&]<int WARPS>() {
    if (s.loader == SkinnyLoader::async) {
      if (s.stripes == 2) return f.template operator()<T, NT, WARPS, 64, 0, kLoadAsync, 2>();  // 128 spills
      return s.kslice == 128 ? f.template operator()<T, NT, WARPS, 128, 0, kLoadAsync, 1>()
                             : f.template operator()<T, NT, WARPS, 64, 0, kLoadAsync, 1>();
    }
    const bool staged = s.loader == SkinnyLoader::staged;
    if constexpr (NT == 1)
      if (s.kslice == 128) return staged ? f.template operator()<T, NT, WARPS, 128, 2, kLoadStaged, 1>()
                                         : f.template operator()<T, NT, WARPS, 128, 2, kLoadRegisters, 1>();
    if (s.stages == 2) return staged ? f.template operator()<T, NT, WARPS, 64, 2, kLoadStaged, 1>()
                                     : f.template operator()<T, NT, WARPS, 64, 2, kLoadRegisters, 1>();
    return staged ? f.template operator()<T, NT, WARPS, 64, 3, kLoadStaged, 1>()
                  : f.template operator()<T, NT, WARPS, 64, 3, kLoadRegisters, 1>();
  };
  if (s.warps == 4) return with_warps.template operator()<4>();
  return with_warps.template operator()<8>();
}

// The instance that a launch of shape s over N rows runs: the early-refill one for some PDL
// launches of the async loader (skinny_early_refill).
template <typename TT, int N_, int WARPS, int BC, int D, int LOADER, int R>
auto stream_kernel_for(const SkinnyShape& s, int64_t n, bool pdl) {
  auto kernel = skinny_stream_kernel<TT, N_, WARPS, BC, D, LOADER, R>;
  if constexpr (LOADER == skinny::kLoadAsync)
    if (skinny_early_refill(pdl, s.splits, (n + 16 * R - 1) / (16 * R), 512 / (WARPS * 32), sm_count()))
      kernel = skinny_stream_kernel<TT, N_, WARPS, BC, D, LOADER, R, true>;
  return kernel;
}

// Not instantiated for 4 token tiles (M > 16): every shape spills there; the host checks
// (check_skinny_shape) keep such calls on the ring kernel.
template <typename T, int NT>
void launch_skinny_stream_nt(const SkinnyArgs& a, const SkinnyShape& s, cudaStream_t stream) {
  with_stream_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int BC, int D, int LOADER, int R>() {
    const size_t smem = skinny::stream_shared_bytes(WARPS, R, N_, BC, stream_tiles_per_warp(s), LOADER == skinny::kLoadAsync);
    const unsigned row_groups = unsigned((a.N + 16 * R - 1) / (16 * R));
    const int max_ctas_per_sm = kSkinnyStreamWarpsPerSm / WARPS;  // the register limit
    const auto kernel = stream_kernel_for<TT, N_, WARPS, BC, D, LOADER, R>(s, a.N, a.pdl);
    // Shared memory for the CTAs that the register limit lets an SM hold (16 warps), and
    // no more: the rest stays L1, which holds A for every CTA of the SM (114 KB at M = 16).
    // A grid of one wave gets room for its even share only (ceil(CTAs / SMs)): with PDL the
    // next call's CTAs, launched early into any free room, would otherwise pile up to 4 on
    // some SMs, and an SM's CTAs share its bandwidth (glm47 o, 320 CTAs, M = 1: 30.7 us
    // isolated; chained with PDL 39.7 with room for 4, 32.8 with 3). Clusters keep the full
    // room (their CTAs must share a GPC). The carveout is a launch attribute: graph nodes of
    // different shapes keep their own.
    const int ctas_per_sm = s.splits == 1 ? std::min(max_ctas_per_sm, even_share_per_sm(row_groups)) : max_ctas_per_sm;
    const int carveout = carveout_for(ctas_per_sm, smem);
    SkinnyArgs args = a;
    args.stages = s.stages, args.kslice = s.kslice;  // the async ring's length is read at run time
    allow_dynamic_smem(kernel, smem, "skinny stream kernel: shared memory");
    launch_skinny_grid(kernel, args, row_groups, s.splits, WARPS * 32, smem, ctas_per_sm, carveout, stream,
                       "skinny stream kernel: launch");
  });
}

template <typename T, int NT>
SkinnyKernelInfo skinny_stream_info_nt(const SkinnyShape& s, int64_t n, bool pdl) {
  return with_stream_instance<T, NT>(s, [&]<typename TT, int N_, int WARPS, int BC, int D, int LOADER, int R>() {
    cudaFuncAttributes attr{};
    check_cuda(cudaFuncGetAttributes(&attr, stream_kernel_for<TT, N_, WARPS, BC, D, LOADER, R>(s, n, pdl)),
               "skinny stream kernel: attributes");
    return SkinnyKernelInfo{attr.numRegs, int(attr.localSizeBytes),
                            skinny::stream_shared_bytes(WARPS, R, N_, BC, stream_tiles_per_warp(s), LOADER == skinny::kLoadAsync)};
  });
}

#define KBIT_INSTANTIATE_SKINNY_STREAM(T, NT)                                                          \
  template void launch_skinny_stream_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t); \
  template SkinnyKernelInfo skinny_stream_info_nt<T, NT>(const SkinnyShape&, int64_t, bool);

}  // namespace kbit::cuda::detail
