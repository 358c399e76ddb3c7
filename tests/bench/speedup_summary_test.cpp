// kbit report speedups: counting the cases a kbit backend wins from kbit bench JSON lines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/speedup_summary.h"
#include "kbit/error.h"

namespace kbit::bench {
namespace {

std::string row(const std::string& shape, int m, const std::string& backend, int bits, double us, bool valid = true,
                const std::string& error = "") {
  return "{\"shape\":\"" + shape + "\",\"m\":" + std::to_string(m) + ",\"backend\":\"" + backend +
         "\",\"bits\":" + std::to_string(bits) + ",\"median_us\":" + std::to_string(us) +
         ",\"valid\":" + (valid ? "true" : "false") + (error.empty() ? "" : ",\"error\":\"" + error + "\"") + "}";
}

TEST(SpeedupSummary, CountsWinsPerModelAndMAndMergesReRuns) {
  const std::vector<std::string> lines = {
      row("toy.q", 1, "cublas_bf16", 0, 10.0),      row("toy.q", 1, "kbit_linear", 2, 5.0),
      row("toy.q", 1, "kbit_linear", 4, 12.0),      row("toy.o", 1, "cublas_bf16", 0, 4.0),
      row("toy.o", 1, "kbit_linear", 4, 2.0, false),  // invalid: counts as slower
      row("toy.q", 16, "cublas_bf16", 0, 8.0),      row("toy.q", 16, "kbit_linear", 4, 0, false, "launch failed"),
      row("toy.moe@routed", 1, "kbit_linear", 4, 1.0),  // routed rows are left out
      row("toy.q", 32, "kbit_linear", 4, 1.0),         // above max M
      row("toy.v", 1, "kbit_linear", 4, 1.0),          // no baseline row: left out, noted
      "",
      row("toy.q", 1, "kbit_linear", 4, 9.0),  // a re-run replaces the 12 us row
  };
  const SpeedupSummary s = summarize_speedups(lines, "kbit_linear", "cublas_bf16", 16);
  EXPECT_EQ(s.cases, 4);
  EXPECT_EQ(s.faster, 2);
  const SpeedupCell& m1 = s.by_model_m.at({"toy", 1});
  EXPECT_EQ(m1.cases, 3);
  EXPECT_EQ(m1.faster, 2);
  ASSERT_EQ(m1.speedups.size(), 2u);  // the invalid o row has no speedup
  EXPECT_EQ(s.by_model_m.at({"toy", 16}).faster, 0);
  EXPECT_EQ(s.notes.size(), 3u);  // o invalid, q M=16 error, v without baseline
  const std::string t = format_speedup_summary(s, "kbit_linear", "cublas_bf16");
  EXPECT_NE(t.find("| toy | 1 | 2 / 3 | 1.11x / 1.56x / 2.00x |"), std::string::npos) << t;
  EXPECT_NE(t.find("Total: 2 of 4 cases faster."), std::string::npos) << t;
  EXPECT_NE(t.find("launch failed"), std::string::npos) << t;
}

// A kbit backend as the baseline (tuned against untuned plans): each k pairs with the baseline's row
// of the same k, not with whichever of its k came last.
TEST(SpeedupSummary, AQuantizedBaselinePairsByBits) {
  const std::vector<std::string> lines = {
      row("toy.q", 24, "kbit_linear", 2, 10.0), row("toy.q", 24, "kbit_linear_untuned", 2, 12.5),
      row("toy.q", 24, "kbit_linear", 5, 20.0), row("toy.q", 24, "kbit_linear_untuned", 5, 16.0),
      row("toy.o", 24, "kbit_linear", 4, 8.0),  // no untuned row: not a case
      row("toy.k", 24, "kbit_linear_untuned", 3, 4.0),  // no tuned row of k = 3: left out, noted
  };
  const SpeedupSummary s = summarize_speedups(lines, "kbit_linear_untuned", "kbit_linear", 4096);
  EXPECT_EQ(s.cases, 2);
  EXPECT_EQ(s.faster, 1);
  const SpeedupCell& c = s.by_model_m.at({"toy", 24});
  ASSERT_EQ(c.speedups.size(), 2u);
  EXPECT_DOUBLE_EQ(c.speedups[0], 10.0 / 12.5);  // k = 2 against k = 2
  EXPECT_DOUBLE_EQ(c.speedups[1], 20.0 / 16.0);  // k = 5 against k = 5
  EXPECT_EQ(s.notes.size(), 1u);
}

TEST(SpeedupSummary, BadLinesAreClearErrors) {
  EXPECT_THROW(summarize_speedups({"not json"}, "kbit_linear", "cublas_bf16", 16), Error);
  EXPECT_THROW(summarize_speedups({"{\"m\":1}"}, "kbit_linear", "cublas_bf16", 16), Error);
}

}  // namespace
}  // namespace kbit::bench
