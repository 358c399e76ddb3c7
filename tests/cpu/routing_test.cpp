// The CPU reference of MoE routing: selection order and ties, both weight
// conventions, offsets and the stable expert-order permutation, bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kbit/error.h"
#include "kbit/moe.h"
#include "support/test_support.h"

namespace kbit {
namespace {

// Every invariant of a routing that does not depend on the logits.
void expect_consistent(const Routing& r) {
  const int64_t pairs = r.tokens * r.top_k;
  ASSERT_EQ(int64_t(r.offsets.size()), r.experts + 1);
  EXPECT_EQ(r.offsets.front(), 0);
  EXPECT_EQ(r.offsets.back(), pairs);
  for (int64_t e = 0; e < r.experts; ++e) {
    EXPECT_LE(r.offsets[size_t(e)], r.offsets[size_t(e) + 1]);
    int32_t prev = -1;
    for (int32_t row = r.offsets[size_t(e)]; row < r.offsets[size_t(e) + 1]; ++row) {
      const int32_t p = r.sorted_pair[size_t(row)];
      EXPECT_EQ(r.expert[size_t(p)], e);
      EXPECT_GT(p, prev) << "pairs of one expert in increasing order";
      EXPECT_EQ(r.pair_row[size_t(p)], row);
      prev = p;
    }
  }
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int a = 0; a < r.top_k; ++a)
      for (int b = a + 1; b < r.top_k; ++b)
        EXPECT_NE(r.expert[size_t(t * r.top_k + a)], r.expert[size_t(t * r.top_k + b)]) << "token " << t;
}

TEST(Routing, TopKOrderTiesAndNormalisedWeights) {
  // token 0: experts 2 and 3 tie at 5: the lower id first; token 1: one clear winner.
  const float logits[] = {1, 0, 5, 5, -1, /**/ 0, 9, 0, 0, 2};
  const Routing r = cpu::route(logits, 2, 5, 2, RoutingMode::topk_softmax);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 3, 1, 4}));
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[1], 0.5f);
  EXPECT_NEAR(r.weight[2], 1.0 / (1.0 + std::exp(-7.0)), 1e-7);
  EXPECT_NEAR(r.weight[2] + r.weight[3], 1.0, 1e-6);
  // expert order: expert 1 <- pair 2, expert 2 <- pair 0, expert 3 <- pair 1, expert 4 <- pair 3
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(r.sorted_pair, (std::vector<int32_t>{2, 0, 1, 3}));
  expect_consistent(r);
}

TEST(Routing, SoftmaxThenTopKIsNotRenormalised) {
  const float logits[] = {0, 1, 2, 3};
  const Routing r = cpu::route(logits, 1, 4, 2, RoutingMode::softmax_topk);
  const double z = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(r.weight[0], std::exp(3.0) / z, 1e-7);
  EXPECT_NEAR(r.weight[1], std::exp(2.0) / z, 1e-7);
  EXPECT_LT(r.weight[0] + r.weight[1], 1.0f);
}

TEST(Routing, RandomAndSkewedRoutingsAreConsistent) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 2.f);
  for (int64_t experts : {1, 8, 160, 512})
    for (int top_k : {1, 2, 8, 10})
      for (int64_t tokens : {0, 1, 16, 300}) {
        if (top_k > experts) continue;
        for (bool skewed : {false, true}) {
          std::vector<float> l(size_t(tokens * experts));
          for (auto& v : l) v = nd(rng);
          if (skewed)  // every token prefers the last experts: the first ones stay empty
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t e = experts - top_k; e < experts; ++e) l[size_t(t * experts + e)] += 100.f;
          const Routing r = cpu::route(l.data(), tokens, experts, top_k, RoutingMode::topk_softmax);
          expect_consistent(r);
          for (int64_t t = 0; t < tokens; ++t) {
            double sum = 0;
            for (int s = 0; s < top_k; ++s) sum += r.weight[size_t(t * top_k + s)];
            EXPECT_NEAR(sum, 1.0, 1e-5);
          }
          if (skewed && tokens > 0) EXPECT_EQ(r.offsets[size_t(experts - top_k)], 0);
        }
      }
}

TEST(Routing, AllTokensOnOneExpertAndMaskedExperts) {
  const float ninf = -INFINITY;
  const float logits[] = {3, ninf, ninf, /**/ 3, ninf, ninf, /**/ 3, ninf, ninf};
  const Routing r = cpu::route(logits, 3, 3, 1, RoutingMode::topk_softmax);
  EXPECT_EQ(r.offsets, (std::vector<int32_t>{0, 3, 3, 3}));
  EXPECT_EQ(r.weight, (std::vector<float>{1, 1, 1}));
  const Routing r2 = cpu::route(logits, 3, 3, 2, RoutingMode::softmax_topk);  // the masked one gets weight 0
  EXPECT_EQ(r2.weight[1], 0.0f);
  expect_consistent(r2);
}

TEST(Routing, BadInputIsAClearError) {
  const float ok[] = {0, 1};
  using test::expect_error;
  expect_error([&] { cpu::route(ok, 1, 2, 3, RoutingMode::topk_softmax); }, "top_k must be");
  expect_error([&] { cpu::route(ok, 1, 0, 1, RoutingMode::topk_softmax); }, "experts must be");
  expect_error([&] { cpu::route(ok, -1, 2, 1, RoutingMode::topk_softmax); }, "tokens must be");
  const float nan[] = {0, NAN};
  expect_error([&] { cpu::route(nan, 1, 2, 1, RoutingMode::topk_softmax); }, "NaN");
  const float dead[] = {-INFINITY, -INFINITY};
  expect_error([&] { cpu::route(dead, 1, 2, 1, RoutingMode::topk_softmax); }, "every logit at -inf");
  Routing bad;
  bad.tokens = 1, bad.experts = 2, bad.top_k = 1, bad.expert = {5};
  expect_error([&] { cpu::order_by_expert(bad); }, "selects expert 5");
}

}  // namespace
}  // namespace kbit
