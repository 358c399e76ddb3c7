// kbit tune's screening: which screened candidates get timed in full (host only).
#include <gtest/gtest.h>

#include "bench/linear_tune.h"

namespace kbit::bench {
namespace {

TEST(LinearTune, FinalistsAreTheFastestWithinTheMargin) {
  //                                   0     1     2     3     4     5
  const std::vector<double> screened{12.0, 10.0, 10.5, 30.0, 10.9, 11.2};
  // Within 10% of 10.0 (up to 11.0): 1, 2, 4, fastest first.
  EXPECT_EQ(tune_finalists(screened, 6, 0.10), (std::vector<size_t>{1, 2, 4}));
  // The cap.
  EXPECT_EQ(tune_finalists(screened, 2, 0.10), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(tune_finalists(screened, 1, 0.10), (std::vector<size_t>{1}));
  // A wide margin takes everything up to the cap, in order of time.
  EXPECT_EQ(tune_finalists(screened, 4, 5.0), (std::vector<size_t>{1, 2, 4, 5}));
}

TEST(LinearTune, FinalistsKeepTwoAndBreakTiesInOrder) {
  // The runner-up is timed in full even when the screen put it far behind: one sample
  // can be unlucky.
  EXPECT_EQ(tune_finalists({5.0, 9.0, 20.0}, 6, 0.10), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(tune_finalists({7.0, 7.0, 7.0}, 2, 0.0), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(tune_finalists({3.0}, 6, 0.10), (std::vector<size_t>{0}));
  EXPECT_TRUE(tune_finalists({}, 6, 0.10).empty());
  // A cap below 1 still keeps the fastest.
  EXPECT_EQ(tune_finalists({4.0, 2.0}, 0, 0.10), (std::vector<size_t>{1}));
}

}  // namespace
}  // namespace kbit::bench
