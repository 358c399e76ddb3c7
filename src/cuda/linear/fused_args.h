// Arguments and launch entry points of the fused dequantize + mma.sync kernel
// (fused_linear.cuh). Host code (src/dispatch) fills FusedArgs; the kernels are
// instantiated per bit width in fused_linear_k{2,3,4,5}.cu.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kbit/dtype.h"
#include "kbit/moe.h"
#include "kbit/quantized_matrix.h"
#include "linear_operands.h"

namespace kbit::cuda::detail {

struct FusedArgs : LinearOperands {
  float* partials = nullptr;    // [splits][token tiles * tile][stripes * 16] when splits > 1
  unsigned* counters = nullptr;  // [token tiles][stripes], zero between calls
  int64_t counter_count = 0;     // how many (checked by the stream-K tile items)
  // The 256-token tile kernel's split tail tiles (tile_schedule.h): partial tiles of
  // kWsPartialTileFloats, at most tile_partial_slots of them (0: no tail splits).
  float* tile_partials = nullptr;
  int64_t tile_partial_slots = 0;
  int M = 0, N = 0, K = 0;
  int supertiles = 0;      // per row (K / 128 rounded up)
  int stripes = 0;         // N / 16 rounded up
  int splits = 1;          // CTAs per stripe along K; none of them empty
  int supertiles_per_split = 0;
  int tiles = 1;           // token tiles: M / (8 n_tiles) rounded up
  bool x_vec = false;      // x rows 16-byte aligned and K % 8 == 0: 16-byte activation loads
  int max_ctas = 1 << 30;  // persistent grid size (SMs x resident CTAs)
  bool pdl = false;        // launch with programmatic stream serialization (weights load before the wait)
  // The codebook as x's 16-bit type (round to nearest even), from the matrix's host copy:
  // a parameter read, where a load through `meta` cost a global round trip before the
  // first weight request (the CTA waits on it at a barrier).
  uint16_t codebook16[32] = {};
  // Grouped (kbit::expert_linear): W stacks `experts` matrices of N rows each (stripes per
  // expert), x and y are [M, *] rows in expert order, expert e owning rows
  // [expert_offsets[e], expert_offsets[e + 1]) (device memory). Items run over the token
  // tiles of the non-empty experts only. Requires splits == 1, no bias, no residual.
  const int32_t* expert_offsets = nullptr;
  int experts = 0;  // 1..kbit::kMaxExperts (kbit/moe.h)
  // Grouped wgmma_tile items: the token tiles of the non-empty experts, written by
  // launch_grouped_tile_table into a workspace buffer of `grouped_tile_capacity` entries
  // (the launcher's; the tile kernels have no shared memory left for the fused kernel's table).
  int4* grouped_tiles = nullptr;
  int64_t grouped_tile_capacity = 0;
};

// Grouped tile table: entry 0 = {tiles, 0, 0, 0}; entry 1 + t = {expert, first row, end row
// of the expert, 0} for token tile t of `rows` rows (clamped to [0, rows_total)), over the non-empty experts in order
// (rows of an expert's last tile past its end belong to the next experts: computed, never
// stored). Needs ceil(P / rows) + experts + 1 entries for P rows in all; at most `capacity`
// are written. One CTA; it waits on the previous kernel (PDL) before reading the offsets.
void launch_grouped_tile_table(const int32_t* expert_offsets, int experts, int rows, int64_t rows_total, int4* table,
                               int64_t capacity, bool pdl, cudaStream_t stream);
inline int64_t grouped_tile_entries(int64_t rows_total, int experts, int rows) {
  return (rows_total + rows - 1) / rows + experts + 1;
}

// How items (16-row stripe or group of stripes, K split, token tile) go to warps:
// warp: one warp per item; cta: the warps of a CTA share each item's supertiles;
// stripes: an item is `warps` adjacent stripes over the same K range, one per warp of a
// CTA, which share the activations through a ring in shared memory; wgmma: stripes items of
// one or two warpgroups (4 or 8 warps, n_tiles 4 or 8) multiplying with wgmma.mma_async, the activations
// read from the ring by the tensor cores.
// cta_shuffle: cta items that decode by warp shuffle with no pair table (k >= 3; n_tiles 1
// or 2), for CTAs with too few supertiles to amortise the table's build.
// wgmma_tile: the tile kernel (tile_linear.cuh, sm_90a): CTA tiles of `warps` stripes x 64
// or 128 tokens (n_tiles 8 or 16), W decoded into shared memory and multiplied by
// wgmma.mma_async with both operands there, for M from 64 up; n_tiles 32: the
// warp-specialised variant, 8 stripes x 256 tokens.
// wgmma_stream: the same tile kernels (n_tiles 8, 16 or 32) with their tiles' K work cut
// evenly over the persistent CTAs (stream-K, tile_schedule.h), partial tiles summed in K order.
enum class FusedItems : uint8_t { warp, cta, stripes, wgmma, cta_shuffle, wgmma_tile, wgmma_stream };
// The largest n_tiles cta_shuffle items are built for (their shuffles and 16 tokens fit in 128 registers).
inline constexpr int kCtaShuffleMaxNTiles = 2;
// Stripes and wgmma items: a CTA item of adjacent stripes, one per warp, the warps sharing
// x through the CTA's ring (the item count, the ring and the split cost follow from it).
constexpr bool items_share_x(FusedItems i) {
  return i == FusedItems::stripes || i == FusedItems::wgmma || i == FusedItems::wgmma_tile ||
         i == FusedItems::wgmma_stream;
}

// Kernel shape: n-tiles of 8 tokens (1, 2, 4 or 8; wgmma_tile 8, 16 or 32), warps per CTA (4 or 8), item mode.
struct FusedShape {
  int n_tiles = 1;
  int warps = 4;
  FusedItems items = FusedItems::cta;
};

// Grid: min(items, max_ctas) persistent CTAs over items = stripe units x splits x token tiles.
void launch_fused_k2(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_fused_k3(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_fused_k4(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_fused_k5(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);

}  // namespace kbit::cuda::detail

namespace kbit::cuda::detail {
// Resident CTAs per SM of the instantiation for (bits, shape, dtype) on the current GPU.
int fused_occupancy_k2(FusedShape s, DType t);
int fused_occupancy_k3(FusedShape s, DType t);
int fused_occupancy_k4(FusedShape s, DType t);
int fused_occupancy_k5(FusedShape s, DType t);
// The tile kernel (FusedItems::wgmma_tile; tile_linear_k{2,3,4,5}.cu).
void launch_tile_k2(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_tile_k3(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_tile_k4(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
void launch_tile_k5(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream);
int tile_occupancy_k2(FusedShape s, DType t);
int tile_occupancy_k3(FusedShape s, DType t);
int tile_occupancy_k4(FusedShape s, DType t);
int tile_occupancy_k5(FusedShape s, DType t);
}  // namespace kbit::cuda::detail
