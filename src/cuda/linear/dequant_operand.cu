// Operand dequantize for the dequantize + cuBLASLt path of kbit::linear (prefill, large M):
// W in the mma16 layout -> W_hat[N, K] in x's 16-bit type, w = T(cb) * T(s * e4m4), one
// rounding of the product (the fused kernels' decoded weights, with the tensor scale s
// folded into the block scale: s is a power of two, so s * e4m4 is exact in bf16 and, in
// its normal range, in fp16). cuda::dequantize stays the bit-exact reference (fp32 product).
//
// Layout: (stripe, supertile) units interleaved over the grid's warps; per unit a lane
// loads its k 8-byte words (streamed, evict-first) and its 8-byte scale word, the next unit's
// loads issued before this one is decoded. Decode as the tile kernels': k = 2 by prmt from a
// register pool, k >= 3 one shared-memory pair-table load per pair (PairLut's codes, filled per CTA
// with few replicas: 4 KB, see kOperandReplicas).
// Lane (g, c) writes rows g and g + 8 of the stripe, 8 columns per block: a warp's 16-byte
// store covers 8 rows x 64 contiguous bytes, the unit 16 rows x 256 bytes.
// Launch: 256-thread CTAs, SMs x resident CTAs at most (fewer where the units run out).
// It replaces cuda::dequantize's mma16 kernel on this path (bit gathering per element, about
// 16 integer operations per weight). Measured (H200, 2026-12-03, dequantize + cuBLASLt forced,
// two rounds, BENCHMARKS.md): M = 512 2.6-16% faster than with that kernel on all 72 dense cases
// (geomean 0.925; Qwen3 2048 x 512 7.85 -> 6.58 us at k = 2, glm47 kv 27.0 -> 25.2 at k = 4),
// M = 4096 glm47 (one round) 0.966-1.008x its time. k >= 3 request their first weights before the pair
// table (2026-12-05): Qwen3 k = 4, 5 3.2-3.6% faster at M = 512 (docs/KERNEL_HISTORY.md). The 4 KB
// table in place of 32 KB (2026-12-05, H100, two rounds): Qwen3's small W at M = 512 and k >= 3 0.15-0.3 us
// (2.2%) faster, larger W and k = 2 unchanged.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../common.cuh"
#include "dequant_operand.h"
#include "fused_linear.cuh"

namespace kbit::cuda::detail {
namespace {

constexpr int kOperandThreads = 256;
constexpr int kOperandWarps = kOperandThreads / 32;

// Replicas of each pair-table entry: fewer than the fused kernels' (32 at k = 3, 4, 8 at k = 5,
// so that a warp's lookups never collide in a bank) keep the table at 4 KB (256 codes x 4 at
// k = 3, 4; 1024 x 1 at k = 5), filled in one 16-byte store per thread, at the price of bank
// conflicts in the lookups.
template <int KB>
constexpr int kOperandReplicas = KB == 5 ? 1 : 4;
template <int KB>
constexpr int operand_lut_words() {
  return KB >= 3 ? PairLut<KB>::entries * kOperandReplicas<KB> : 0;
}
template <int KB>
constexpr size_t operand_smem_bytes() {
  return size_t(operand_lut_words<KB>()) * 4;
}

// The pair table with kOperandReplicas<KB> copies of each entry (fill_pair_table's layout; its
// fill stores one entry 4 times per 16 bytes, these up to 4 entries).
template <int KB>
__device__ __forceinline__ void fill_operand_pair_table(uint32_t lut, const uint16_t (&codebook16)[32],
                                                        uint32_t (&cb16)[32]) {
  if (threadIdx.x < (1 << KB)) cb16[threadIdx.x] = codebook16[threadIdx.x];
  __syncthreads();
  for (int i = threadIdx.x; i < operand_lut_words<KB>() / 4; i += int(blockDim.x)) {
    uint32_t v[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = pair_table_entry<KB>(cb16, (i * 4 + q) / kOperandReplicas<KB>);
    sts128(lut + uint32_t(i) * 16, make_uint4(v[0], v[1], v[2], v[3]));
  }
}

// Block j's scale byte of a lane's scale word times the tensor scale, as a packed pair of T.
template <typename T>
__device__ __forceinline__ uint32_t block_amax_pair(uint32_t word, int j, float tensor_scale) {
  const uint32_t b = __byte_perm(word, 0u, 0x4440u + j);
  const float amax = __uint_as_float(b << 19) * 0x1p116f * tensor_scale;  // e4m4_decode(b) * s, exact
  uint32_t d;
  if constexpr (std::is_same_v<T, __half>) {
    asm("cvt.rn.f16x2.f32 %0, %1, %1;\n" : "=r"(d) : "f"(amax));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %1;\n" : "=r"(d) : "f"(amax));
  }
  return d;
}

// 8 consecutive outputs (a uint4 of T) at row, col: one 16-byte store where the row allows it.
__device__ __forceinline__ void store_run8(uint16_t* out, const OperandDequantArgs& a, int64_t row, int col, uint4 v) {
  if (row >= a.rows || col >= a.cols) return;
  uint16_t* p = out + row * a.ld + col;
  if (a.vec && col + 8 <= a.cols) {
    *reinterpret_cast<uint4*>(p) = v;
    return;
  }
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (col + i < a.cols) p[i] = uint16_t(words[i / 2] >> (16 * (i % 2)));
}

template <int KB, typename T>
__global__ void __launch_bounds__(kOperandThreads) dequantize_operand_kernel(const __grid_constant__ OperandDequantArgs a) {
  extern __shared__ __align__(16) uint8_t operand_smem[];
  __shared__ uint32_t cb16[32];
  const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const uint32_t lut = uint32_t(__cvta_generic_to_shared(operand_smem));

  // Units interleaved over the warps of the grid (stripe-major, supertiles fastest), so that
  // the units in flight at any time are one contiguous run of W_hat's rows: per-warp
  // contiguous ranges scattered the writes over the whole matrix and ran 12-13% slower on
  // glm47 q / o / shared_gu at k = 4, M = 512 (H200, 2026-12-03; slower than the old kernel).
  const int64_t units = int64_t(a.stripes) * a.supertiles;
  const int64_t warps = int64_t(gridDim.x) * kOperandWarps;
  int64_t u = int64_t(blockIdx.x) * kOperandWarps + (threadIdx.x >> 5);
  auto load = [&](Stage<KB>& sg, int64_t unit) {
    const uint2* p = a.words + unit * (int64_t(KB) * 32) + lane;
#pragma unroll
    for (int i = 0; i < KB; ++i) sg.w[i] = load_stream(p + i * 32);
    sg.scales = __ldg(a.scales + unit * 8 + g);
  };
  // k >= 3: the first unit's weights are requested before the pair table is built, so that
  // the table's stores and barriers overlap their round trip (a small W has one unit per warp):
  // H200, 2026-12-05, dequantize + cuBLAS forced on Qwen3's shapes, two rounds: k = 4, 5 2-5%
  // faster at M = 512 (2048 x 512 7.17 -> 6.79 us at k = 4), 0-4% at M = 4096. k = 2 builds no
  // table and keeps the old order (the weights after the tensor scale's request), which the
  // same A/B measured 0-2.4% faster.
  Stage<KB> next;
  float tensor_scale = 0.0f;
  uint32_t pool_lo = 0, pool_hi = 0;
  if constexpr (KB == 2) {
    k2_level_pools(a.codebook16, pool_lo, pool_hi);
    if (u >= units) return;
    tensor_scale = a.meta->tensor_scale;
    load(next, u);
  } else {
    if (u < units) load(next, u);
    tensor_scale = a.meta->tensor_scale;
    fill_operand_pair_table<KB>(lut, a.codebook16, cb16);
    __syncthreads();
    if (u >= units) return;
  }
  const uint32_t lut_lane = lut + uint32_t(lane % kOperandReplicas<KB>) * 4;
  uint16_t* out = static_cast<uint16_t*>(a.out);
  const int64_t step_stripes = warps / a.supertiles;
  const int step_st = int(warps - step_stripes * a.supertiles);
  int64_t stripe = u / a.supertiles;
  int st = int(u - stripe * a.supertiles);
  for (; u < units; u += warps) {
    const Stage<KB> cur = next;
    if (u + warps < units) load(next, u + warps);
    uint32_t w[2 * KB];
#pragma unroll
    for (int i = 0; i < KB; ++i) w[2 * i] = cur.w[i].x, w[2 * i + 1] = cur.w[i].y;
    const int64_t row = stripe * 16 + g;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t s_lo = block_amax_pair<T>(cur.scales.x, j, tensor_scale);
      const uint32_t s_hi = block_amax_pair<T>(cur.scales.y, j, tensor_scale);
      uint32_t p[2][4];
#pragma unroll
      for (int s = 0; s < 2; ++s) decode_pairs<KB, kOperandReplicas<KB>>(w, j, s, lut_lane, pool_lo, pool_hi, p[s]);
      // the same element order as decode_scaled_block (tile_linear.cuh): rows g, g + 8, columns 32j + 8c ..
      const uint4 row_g = make_uint4(mul2<T>(p[0][0], s_lo), mul2<T>(p[0][2], s_lo), mul2<T>(p[1][0], s_lo),
                                     mul2<T>(p[1][2], s_lo));
      const uint4 row_g8 = make_uint4(mul2<T>(p[0][1], s_hi), mul2<T>(p[0][3], s_hi), mul2<T>(p[1][1], s_hi),
                                      mul2<T>(p[1][3], s_hi));
      const int col = st * 128 + 32 * j + 8 * c;
      store_run8(out, a, row, col, row_g);
      store_run8(out, a, row + 8, col, row_g8);
    }
    stripe += step_stripes, st += step_st;
    if (st >= a.supertiles) st -= a.supertiles, ++stripe;
  }
}

template <int KB, typename T>
void launch_typed(const OperandDequantArgs& a, cudaStream_t stream) {
  const auto kernel = dequantize_operand_kernel<KB, T>;
  constexpr size_t smem = operand_smem_bytes<KB>();
  allow_dynamic_smem(kernel, smem, "operand dequantize");
  const int per_sm = resident_ctas_per_sm(kernel, kOperandThreads, smem, "operand dequantize occupancy");
  const int64_t units = int64_t(a.stripes) * a.supertiles;
  const int64_t needed = (units + kOperandWarps - 1) / kOperandWarps;
  const int64_t cap = int64_t(sm_count()) * std::max(per_sm, 1);
  const unsigned grid = unsigned(std::max<int64_t>(1, std::min(needed, cap)));
  kernel<<<grid, kOperandThreads, smem, stream>>>(a);
  check_launch("operand dequantize kernel");
}

}  // namespace

void launch_dequantize_operand(int bits, const OperandDequantArgs& a, DType t, cudaStream_t stream) {
  if (a.rows == 0 || a.cols == 0) return;
  KBIT_REQUIRE(t == DType::f16 || t == DType::bf16, "operand dequantize: output must be F16 or BF16, got ",
               dtype_name(t));
  dispatch_bits(bits, [&]<int KB>() {
    if (t == DType::f16) {
      launch_typed<KB, __half>(a, stream);
    } else {
      launch_typed<KB, __nv_bfloat16>(a, stream);
    }
  });
}

}  // namespace kbit::cuda::detail
