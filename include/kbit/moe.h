// Mixture-of-experts routing (issue 5): from router logits [T, E] pick top_k experts
// per token, weight them, and lay the (token, slot) pairs out in expert order so that
// a grouped GEMM can run every expert's rows at once.
//
// Conventions, shared by the CPU reference and the GPU kernels so that selections,
// offsets and permutations agree exactly:
// - pair p = t * top_k + slot; slots in order of decreasing logit, ties to the lower
//   expert id; NaN and +inf logits are errors, -inf masks an expert (each token needs
//   one finite logit).
// - weights: RoutingMode::topk_softmax (Qwen3-MoE "norm_topk_prob"): softmax over the
//   top_k selected logits, summing to 1; RoutingMode::softmax_topk: softmax over all E
//   logits, the selected probabilities not renormalised.
// - expert order: expert e's rows are [offsets[e], offsets[e + 1]); inside an expert,
//   pairs in increasing p (a stable counting sort). sorted_pair[row] = p, pair_row[p] = row.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace kbit {

enum class RoutingMode : uint8_t { topk_softmax, softmax_topk };
std::string_view routing_mode_name(RoutingMode m);

inline constexpr int kMaxTopK = 32;
inline constexpr int64_t kMaxExperts = 4096;

struct Routing {
  int64_t tokens = 0, experts = 0;
  int top_k = 0;
  std::vector<int32_t> expert;       // [T * top_k] selected expert of pair p
  std::vector<float> weight;         // [T * top_k] its weight
  std::vector<int32_t> offsets;      // [E + 1]
  std::vector<int32_t> sorted_pair;  // [T * top_k] pair of each expert-ordered row
  std::vector<int32_t> pair_row;     // [T * top_k] row of each pair
};

// Throws kbit::Error naming the problem (T < 0, E outside 1..kMaxExperts, top_k outside
// 1..min(E, kMaxTopK)).
void check_routing_shape(int64_t tokens, int64_t experts, int top_k);

namespace cpu {

// The reference routing of fp32 logits [T, E] (row-major); fp64 softmax.
Routing route(const float* logits, int64_t tokens, int64_t experts, int top_k, RoutingMode mode);

// Offsets and the stable expert-order permutation of given selections (expert[p] for
// p < pairs), the second half of route(); exposed for tests and fixed routings.
void order_by_expert(Routing& r);

}  // namespace cpu
}  // namespace kbit
