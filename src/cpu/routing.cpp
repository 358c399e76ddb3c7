// CPU reference of MoE routing (include/kbit/moe.h): top-k by partial sort with the
// documented tie order, fp64 softmax, stable counting sort into expert order.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/checks.h"
#include "kbit/error.h"
#include "kbit/moe.h"

namespace kbit {

std::string_view routing_mode_name(RoutingMode m) {
  return m == RoutingMode::topk_softmax ? "topk_softmax" : "softmax_topk";
}

void check_routing_shape(int64_t tokens, int64_t experts, int top_k) {
  KBIT_REQUIRE(tokens >= 0, "routing: tokens must be >= 0, got ", tokens);
  KBIT_REQUIRE(experts >= 1 && experts <= kMaxExperts, "routing: experts must be 1..", kMaxExperts, ", got ", experts);
  KBIT_REQUIRE(top_k >= 1 && top_k <= kMaxTopK && top_k <= experts, "routing: top_k must be 1..min(experts, ",
               kMaxTopK, "), got ", top_k, " with ", experts, " experts");
  KBIT_REQUIRE(tokens * top_k < (int64_t(1) << 31), "routing: ", tokens, " x ", top_k, " pairs exceed 2^31");
}

namespace cpu {

void order_by_expert(Routing& r) {
  const int64_t pairs = r.tokens * r.top_k;
  KBIT_REQUIRE(int64_t(r.expert.size()) == pairs, "routing: ", r.expert.size(), " selections for ", pairs, " pairs");
  r.offsets.assign(size_t(r.experts + 1), 0);
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t e = r.expert[size_t(p)];
    KBIT_REQUIRE(e >= 0 && e < r.experts, "routing: pair ", p, " selects expert ", e, " of ", r.experts);
    ++r.offsets[size_t(e) + 1];
  }
  std::partial_sum(r.offsets.begin(), r.offsets.end(), r.offsets.begin());
  std::vector<int32_t> next(r.offsets.begin(), r.offsets.end() - 1);
  r.sorted_pair.assign(size_t(pairs), 0);
  r.pair_row.assign(size_t(pairs), 0);
  for (int64_t p = 0; p < pairs; ++p) {
    const int32_t row = next[size_t(r.expert[size_t(p)])]++;
    r.sorted_pair[size_t(row)] = int32_t(p);
    r.pair_row[size_t(p)] = row;
  }
}

Routing route(const float* logits, int64_t tokens, int64_t experts, int top_k, RoutingMode mode) {
  check_routing_shape(tokens, experts, top_k);
  KBIT_REQUIRE(logits || tokens == 0, "routing: logits are null");
  Routing r;
  r.tokens = tokens, r.experts = experts, r.top_k = top_k;
  r.expert.resize(size_t(tokens * top_k));
  r.weight.resize(size_t(tokens * top_k));
  std::vector<int32_t> ids(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* l = logits + t * experts;
    for (int64_t e = 0; e < experts; ++e)
      KBIT_REQUIRE(!std::isnan(l[e]) && l[e] != INFINITY, "routing: logit [", t, ", ", e, "] is ", l[e],
                   " (NaN and +inf are not allowed; -inf masks an expert)");
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + top_k, ids.end(), [&](int32_t a, int32_t b) {
      return l[a] > l[b] || (l[a] == l[b] && a < b);
    });
    const double top = double(l[ids[0]]);
    KBIT_REQUIRE(std::isfinite(top), "routing: token ", t, " has every logit at -inf");
    double denom = 0;
    if (mode == RoutingMode::topk_softmax) {
      for (int s = 0; s < top_k; ++s) denom += std::exp(double(l[ids[size_t(s)]]) - top);
    } else {
      for (int64_t e = 0; e < experts; ++e) denom += std::exp(double(l[e]) - top);
    }
    for (int s = 0; s < top_k; ++s) {
      const size_t p = size_t(t * top_k + s);
      r.expert[p] = ids[size_t(s)];
      r.weight[p] = float(std::exp(double(l[ids[size_t(s)]]) - top) / denom);
    }
  }
  order_by_expert(r);
  return r;
}

}  // namespace cpu
}  // namespace kbit
