// MoE routing on the GPU (include/kbit/moe.h): top-k selection with softmax weights,
// the expert-order permutation, the gather of activation rows into that order and
// the weighted combine back.
//
// Selection: one warp per token; lane l holds logits l, l + 32, ... (E <= 1024: at
// most 32 per lane, in registers, NaN read as -inf); top_k rounds of a warp argmax
// (ties to the lower id, as the CPU reference); softmax with expf over the selected
// (or all) logits, sums by a fixed xor-butterfly.
// Order: one CTA of 16 warps (up to 64 tokens the same CTA selects first: one launch).
// Each warp owns a contiguous segment of pairs and counts
// its experts (match_any groups, so no atomics); per expert an exclusive prefix over
// warps, then over experts (block scan) gives offsets and each warp's first row per
// expert; each warp then places its pairs in order (rank = earlier lanes of the same
// expert). Stable and deterministic. Shared memory 16 x E x 4 bytes (64 KB at E = 1024).
// Up to 256 pairs (decode) the CTA counts instead (order_pairs_small): each pair's row and
// each expert's offset by one thread over the pairs' experts in shared memory.
// Gather and combine: one CTA per row, 16-byte accesses where aligned. SwiGLU: elementwise.
// Checked against the CPU routing exactly (tests/cuda/moe_gpu_test.cpp; H200, commits
// 691ca52 and 3ce1160, and 2026-12-02; memcheck and racecheck clean). One decode token's
// routing alone in a graph (H200, 2026-12-02): GLM-4.7 (E = 160, top-8) 9.0 -> 4.6 us with
// the argmax rounds over E / 32 logits per lane and the counting order, Qwen3-Coder-Next
// (E = 512, top-10) 10.7 -> 7.6; the combine 2.0. kbit::moe_forward at T = 1, k = 4 without
// the shared expert: GLM-4.7 53.3 -> 49.5 us against its GEMMs' 41.0.
#include <algorithm>
#include <climits>

#include "../common.cuh"
#include "kbit/moe.h"

namespace kbit::cuda {
namespace {

constexpr int kSelectWarpsPerCta = 4;
constexpr int kOrderWarps = 16;
constexpr int kRouteSmallMaxTokens = 64;  // up to here one CTA selects and orders (one launch)

// The top_k experts and weights of token t, by one warp.
__device__ __forceinline__ void select_token(const float* __restrict__ logits, int t, int experts, int top_k,
                                             int softmax_all, int32_t* expert, float* weight) {
  const int lane = int(threadIdx.x & 31);
  const float* l = logits + int64_t(t) * experts;
  // The argmax rounds below run over j < jn = ceil(E / 32) only: they are serial chains
  // over j, and all 32 took one GLM-4.7 token's routing to ~9 us (H200, 2026-12-02; 4.6
  // now). Not the loads: they stay one unrolled run without exits, so that all are in flight
  // at once (with an exit per j the loads went one after another: Qwen3's 512 logits took
  // 10.7 -> 19.2 us).
  const int jn = (experts + 31) >> 5;
  float v[32];
  uint32_t taken = 0;  // bit j: logit lane + 32 j is selected or past E
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int e = lane + 32 * j;
    const float x = e < experts ? __ldg(l + e) : -INFINITY;
    v[j] = isnan(x) ? -INFINITY : x;
    if (e >= experts) taken |= 1u << j;
  }
  int my_id = 0;
  float my_val = -INFINITY, top = -INFINITY;
  for (int s = 0; s < top_k; ++s) {
    float bv = -INFINITY;
    int bi = INT_MAX;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (j >= jn) break;
      const int e = lane + 32 * j;
      if (!((taken >> j) & 1u) && (v[j] > bv || (v[j] == bv && e < bi))) bv = v[j], bi = e;
    }
#pragma unroll
    for (int off = 16; off; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if (s == 0) top = bv;
    if (lane == s) my_id = bi, my_val = bv;
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
  }
  float part = 0.0f;
  if (softmax_all) {
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      if (j >= jn) break;
      if (lane + 32 * j < experts) part += expf(v[j] - top);
    }
  } else if (lane < top_k) {
    part = expf(my_val - top);
  }
#pragma unroll
  for (int off = 16; off; off >>= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
  if (lane < top_k) {
    const int64_t p = int64_t(t) * top_k + lane;
    expert[p] = my_id;
    weight[p] = isinf(top) ? 0.0f : expf(my_val - top) / part;
  }
}

__global__ void __launch_bounds__(kSelectWarpsPerCta * 32)
    route_select_kernel(const float* __restrict__ logits, int tokens, int experts, int top_k, int softmax_all,
                        int32_t* __restrict__ expert, float* __restrict__ weight) {
  const int t = int(blockIdx.x) * kSelectWarpsPerCta + int(threadIdx.x >> 5);
  if (t >= tokens) return;  // the whole warp
  select_token(logits, t, experts, top_k, softmax_all, expert, weight);
}

// Offsets, sorted_pair and pair_row from the pairs' experts, by one CTA of kOrderWarps
// warps (`expert` may have been written by this CTA before a __syncthreads).
__device__ __forceinline__ void order_pairs(const int32_t* expert, int pairs, int experts, int32_t* __restrict__ offsets,
                                            int32_t* __restrict__ sorted_pair, int32_t* __restrict__ pair_row,
                                            int32_t* smem) {
  int32_t* hist = smem;                              // [kOrderWarps][E]: counts, then first rows
  int32_t* warp_totals = smem + kOrderWarps * experts;  // [kOrderWarps]
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  for (int i = tid; i < kOrderWarps * experts; i += kOrderWarps * 32) hist[i] = 0;
  __syncthreads();
  const int seg = (pairs + kOrderWarps - 1) / kOrderWarps;
  const int p0 = min(pairs, warp * seg), p1 = min(pairs, p0 + seg);
  for (int base = p0; base < p1; base += 32) {
    const int p = base + lane;
    const bool ok = p < p1;
    const int e = ok ? expert[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (ok && lane == __ffs(peers) - 1) hist[warp * experts + e] += __popc(peers);
    __syncwarp();
  }
  __syncthreads();
  // Per expert (two per thread): exclusive prefix over warps, and the expert's total.
  const int e0 = 2 * tid, e1 = 2 * tid + 1;
  int total[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = e0 + i;
    if (e < experts)
      for (int w = 0; w < kOrderWarps; ++w) {
        const int c = hist[w * experts + e];
        hist[w * experts + e] = total[i];
        total[i] += c;
      }
  }
  // Exclusive scan of the totals over experts: within the warp, then over warps.
  const int local = total[0] + total[1];
  const int incl = detail::warp_inclusive_sum(local, lane);
  if (lane == 31) warp_totals[warp] = incl;
  __syncthreads();
  int before = 0;
  for (int w = 0; w < warp; ++w) before += warp_totals[w];
  const int start = before + incl - local;  // rows before expert e0
  if (e0 < experts) offsets[e0] = start;
  if (e1 < experts) offsets[e1] = start + total[0];
  if (tid == 0) offsets[experts] = pairs;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int e = e0 + i;
    const int first = start + (i ? total[0] : 0);
    if (e < experts)
      for (int w = 0; w < kOrderWarps; ++w) hist[w * experts + e] += first;
  }
  __syncthreads();
  for (int base = p0; base < p1; base += 32) {
    const int p = base + lane;
    const bool ok = p < p1;
    const int e = ok ? expert[p] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    if (ok) {
      const int row = hist[warp * experts + e] + __popc(peers & ((1u << lane) - 1u));
      sorted_pair[row] = p;
      pair_row[p] = row;
    }
    __syncwarp();
    if (ok && lane == __ffs(peers) - 1) hist[warp * experts + e] += __popc(peers);
    __syncwarp();
  }
}

// order_pairs for up to kOrderSmallMaxPairs pairs (decode): pair p's row is the number of
// pairs with a lower expert plus those before p with the same one, and offsets[e] the number
// of pairs with an expert below e, each counted by one thread over the pairs' experts in
// shared memory (broadcast reads, four per load). Same results as order_pairs, without its
// per-warp histograms of E entries and their serial prefixes over the 16 warps.
constexpr int kOrderSmallMaxPairs = 256;
__device__ __forceinline__ void order_pairs_small(const int32_t* expert, int pairs, int experts,
                                                  int32_t* __restrict__ offsets, int32_t* __restrict__ sorted_pair,
                                                  int32_t* __restrict__ pair_row, int32_t* smem) {
  const int tid = int(threadIdx.x), padded = (pairs + 3) & ~3;
  for (int i = tid; i < padded; i += int(blockDim.x)) smem[i] = i < pairs ? expert[i] : INT_MAX;  // pads: above any expert
  __syncthreads();
  const int4* experts4 = reinterpret_cast<const int4*>(smem);
  for (int p = tid; p < pairs; p += int(blockDim.x)) {
    const int e = smem[p];
    int row = 0;
    for (int i = 0; i < padded / 4; ++i) {
      const int4 q = experts4[i];
      const int q0 = 4 * i;
      row += (q.x < e || (q.x == e && q0 < p)) + (q.y < e || (q.y == e && q0 + 1 < p)) +
             (q.z < e || (q.z == e && q0 + 2 < p)) + (q.w < e || (q.w == e && q0 + 3 < p));
    }
    pair_row[p] = row;
    sorted_pair[row] = p;
  }
  for (int e = tid; e <= experts; e += int(blockDim.x)) {  // offsets[E] = pairs: every expert is below E
    int below = 0;
    for (int i = 0; i < padded / 4; ++i) {
      const int4 q = experts4[i];
      below += (q.x < e) + (q.y < e) + (q.z < e) + (q.w < e);
    }
    offsets[e] = below;
  }
}

__global__ void __launch_bounds__(kOrderWarps * 32)
    route_order_kernel(const int32_t* __restrict__ expert, int pairs, int experts, int32_t* __restrict__ offsets,
                       int32_t* __restrict__ sorted_pair, int32_t* __restrict__ pair_row) {
  extern __shared__ int32_t smem[];
  order_pairs(expert, pairs, experts, offsets, sorted_pair, pair_row, smem);
}

// Decode sizes: selection and order in one CTA, one launch fewer (each warp selects
// its tokens, then the CTA orders the pairs it wrote).
__global__ void __launch_bounds__(kOrderWarps * 32)
    route_small_kernel(const float* __restrict__ logits, int tokens, int experts, int top_k, int softmax_all,
                       int32_t* expert, float* __restrict__ weight, int32_t* __restrict__ offsets,
                       int32_t* __restrict__ sorted_pair, int32_t* __restrict__ pair_row) {
  extern __shared__ int32_t smem[];
  for (int t = int(threadIdx.x >> 5); t < tokens; t += kOrderWarps)
    select_token(logits, t, experts, top_k, softmax_all, expert, weight);
  __syncthreads();  // the experts written above are visible to the whole CTA
  if (tokens * top_k <= kOrderSmallMaxPairs) {
    order_pairs_small(expert, tokens * top_k, experts, offsets, sorted_pair, pair_row, smem);
  } else {
    order_pairs(expert, tokens * top_k, experts, offsets, sorted_pair, pair_row, smem);
  }
}

template <typename T>
__global__ void gather_rows_kernel(const T* __restrict__ x, int64_t ldx, const int32_t* __restrict__ sorted_pair,
                                   int top_k, T* __restrict__ out, int64_t ldo, int64_t cols, int vec) {
  const int64_t row = blockIdx.x;
  const T* src = x + int64_t(sorted_pair[row] / top_k) * ldx;
  T* dst = out + row * ldo;
  constexpr int kPer = 16 / int(sizeof(T));
  if (vec) {
    for (int64_t c = int64_t(threadIdx.x) * kPer; c + kPer <= cols; c += int64_t(blockDim.x) * kPer)
      *reinterpret_cast<uint4*>(dst + c) = __ldg(reinterpret_cast<const uint4*>(src + c));
    for (int64_t c = cols / kPer * kPer + threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
  } else {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dst[c] = src[c];
  }
}

template <typename T>
__global__ void combine_kernel(const T* __restrict__ expert_out, int64_t ldo, const float* __restrict__ weight,
                               const int32_t* __restrict__ pair_row, int top_k, T* y, int64_t ldy, int64_t cols,
                               int accumulate) {
  const int64_t t = blockIdx.y;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  float acc = accumulate ? detail::Element<T>::to_float(y[t * ldy + c]) : 0.0f;
  for (int s = 0; s < top_k; ++s) {
    const int64_t p = t * top_k + s;
    acc += weight[p] * detail::Element<T>::to_float(expert_out[int64_t(pair_row[p]) * ldo + c]);
  }
  y[t * ldy + c] = detail::Element<T>::from_float(acc);
}

template <typename T>
__global__ void swiglu_kernel(const T* __restrict__ gu, int64_t ldg, T* __restrict__ h, int64_t ldh, int64_t inter) {
  const int64_t r = blockIdx.y;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= inter) return;
  const float g = detail::Element<T>::to_float(gu[r * ldg + i]), u = detail::Element<T>::to_float(gu[r * ldg + inter + i]);
  h[r * ldh + i] = detail::Element<T>::from_float(g / (1.0f + expf(-g)) * u);
}

// The order's histograms (16 x E ints) pass the default 48 KB from E = 768.
template <typename Kernel>
void allow_order_smem(Kernel kernel, size_t smem) {
  if (smem > 48 * 1024)
    detail::check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)),
                       "routing: shared memory size");
}

void require_device_routing(const DeviceRouting& r, bool need_order) {
  KBIT_REQUIRE(r.expert && r.weight, "routing: expert and weight buffers are required");
  if (need_order) KBIT_REQUIRE(r.offsets && r.sorted_pair && r.pair_row, "routing: offsets, sorted_pair and pair_row are required");
  for (const void* p : {static_cast<const void*>(r.expert), static_cast<const void*>(r.weight),
                        static_cast<const void*>(r.offsets), static_cast<const void*>(r.sorted_pair),
                        static_cast<const void*>(r.pair_row)})
    if (p) {
      detail::check_device_pointer(p, "routing buffer");
      KBIT_REQUIRE(reinterpret_cast<uintptr_t>(p) % 4 == 0, "routing: buffer ", p, " is not 4-byte aligned");
    }
}

}  // namespace

void route(const float* logits, int64_t tokens, int64_t experts, int top_k, RoutingMode mode,
           const DeviceRouting& out, cudaStream_t stream) {
  check_routing_shape(tokens, experts, top_k);
  require_device_routing(out, true);
  const size_t smem = (size_t(kOrderWarps) * size_t(experts) + kOrderWarps) * sizeof(int32_t);
  const int softmax_all = mode == RoutingMode::softmax_topk ? 1 : 0;
  if (tokens > 0) {
    detail::check_device_pointer(logits, "routing logits");
    KBIT_REQUIRE(reinterpret_cast<uintptr_t>(logits) % 4 == 0, "routing: logits are not 4-byte aligned");
  }
  if (tokens > 0 && tokens <= kRouteSmallMaxTokens) {
    const size_t small_smem = std::max(smem, size_t(kOrderSmallMaxPairs) * sizeof(int32_t));  // order_pairs_small's copy
    allow_order_smem(route_small_kernel, small_smem);
    route_small_kernel<<<1, kOrderWarps * 32, small_smem, stream>>>(logits, int(tokens), int(experts), top_k, softmax_all,
                                                              out.expert, out.weight, out.offsets, out.sorted_pair,
                                                              out.pair_row);
    detail::check_launch("routing kernel");
    return;
  }
  if (tokens > 0) {
    KBIT_REQUIRE(tokens <= int64_t(0x7fffffff) / kSelectWarpsPerCta, "routing: too many tokens (", tokens, ")");
    const unsigned ctas = unsigned((tokens + kSelectWarpsPerCta - 1) / kSelectWarpsPerCta);
    route_select_kernel<<<ctas, kSelectWarpsPerCta * 32, 0, stream>>>(
        logits, int(tokens), int(experts), top_k, softmax_all, out.expert, out.weight);
    detail::check_launch("routing select kernel");
  }
  allow_order_smem(route_order_kernel, smem);
  route_order_kernel<<<1, kOrderWarps * 32, smem, stream>>>(out.expert, int(tokens * top_k), int(experts), out.offsets,
                                                            out.sorted_pair, out.pair_row);
  detail::check_launch("routing order kernel");
}

void gather_rows(const TensorView& x, const int32_t* sorted_pair, int top_k, const MutableTensorView& x_sorted,
                 cudaStream_t stream) {
  detail::check_device_view(x, "gather_rows x");
  detail::check_device_view(x_sorted, "gather_rows output");
  detail::check_device_pointer(sorted_pair, "gather_rows sorted_pair");
  KBIT_REQUIRE(x.dtype == x_sorted.dtype, "gather_rows: x is ", dtype_name(x.dtype), " but the output is ",
               dtype_name(x_sorted.dtype));
  KBIT_REQUIRE(x.cols == x_sorted.cols, "gather_rows: x has ", x.cols, " columns, the output ", x_sorted.cols);
  KBIT_REQUIRE(top_k >= 1 && x_sorted.rows == x.rows * top_k, "gather_rows: the output needs tokens x top_k = ",
               x.rows * int64_t(top_k), " rows, got ", x_sorted.rows);
  const size_t es = dtype_size(x.dtype);
  const int vec = reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(x_sorted.data) % 16 == 0 &&
                  (size_t(x.stride()) * es) % 16 == 0 && (size_t(x_sorted.stride()) * es) % 16 == 0;
  detail::dispatch_float(x.dtype, [&]<typename T>() {
    gather_rows_kernel<T><<<unsigned(x_sorted.rows), 128, 0, stream>>>(
        static_cast<const T*>(x.data), x.stride(), sorted_pair, top_k, static_cast<T*>(x_sorted.data),
        x_sorted.stride(), x.cols, vec);
  });
  detail::check_launch("gather_rows kernel");
}

void combine(const TensorView& expert_out, const DeviceRouting& r, int top_k, const MutableTensorView& y,
             bool accumulate, cudaStream_t stream) {
  detail::check_device_view(expert_out, "combine expert_out");
  detail::check_device_view(y, "combine y");
  require_device_routing(r, true);
  KBIT_REQUIRE(expert_out.dtype == y.dtype, "combine: expert_out is ", dtype_name(expert_out.dtype), " but y is ",
               dtype_name(y.dtype));
  KBIT_REQUIRE(expert_out.cols == y.cols, "combine: expert_out has ", expert_out.cols, " columns, y ", y.cols);
  KBIT_REQUIRE(top_k >= 1 && expert_out.rows == y.rows * top_k, "combine: expert_out needs tokens x top_k = ",
               y.rows * int64_t(top_k), " rows, got ", expert_out.rows);
  KBIT_REQUIRE(y.rows <= 65535, "combine: at most 65535 tokens per call, got ", y.rows);
  const dim3 grid(unsigned((y.cols + 255) / 256), unsigned(y.rows));
  detail::dispatch_float(y.dtype, [&]<typename T>() {
    combine_kernel<T><<<grid, 256, 0, stream>>>(static_cast<const T*>(expert_out.data), expert_out.stride(), r.weight,
                                                r.pair_row, top_k, static_cast<T*>(y.data), y.stride(), y.cols,
                                                accumulate ? 1 : 0);
  });
  detail::check_launch("combine kernel");
}

void swiglu(const TensorView& gate_up, const MutableTensorView& h, cudaStream_t stream) {
  detail::check_device_view(gate_up, "swiglu gate_up");
  detail::check_device_view(h, "swiglu output");
  KBIT_REQUIRE(gate_up.dtype == h.dtype, "swiglu: gate_up is ", dtype_name(gate_up.dtype), " but h is ",
               dtype_name(h.dtype));
  KBIT_REQUIRE(gate_up.rows == h.rows && gate_up.cols == 2 * h.cols, "swiglu: gate_up [", gate_up.rows, ", ",
               gate_up.cols, "] must be [R, 2 I] for h [", h.rows, ", ", h.cols, "]");
  KBIT_REQUIRE(h.rows <= 65535, "swiglu: at most 65535 rows per call, got ", h.rows);
  const dim3 grid(unsigned((h.cols + 255) / 256), unsigned(h.rows));
  detail::dispatch_float(h.dtype, [&]<typename T>() {
    swiglu_kernel<T><<<grid, 256, 0, stream>>>(static_cast<const T*>(gate_up.data), gate_up.stride(),
                                               static_cast<T*>(h.data), h.stride(), h.cols);
  });
  detail::check_launch("swiglu kernel");
}

}  // namespace kbit::cuda
