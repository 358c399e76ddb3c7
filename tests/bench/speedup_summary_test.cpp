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
  // Per M over all models: at M = 1 the speedups are 2.0 (q k=2) and 10/9 (q k=4); o is invalid.
  const SpeedupRow& r1 = s.by_m.at(1);
  EXPECT_EQ(r1.cell.cases, 3);
  EXPECT_EQ(r1.cell.faster, 2);
  EXPECT_EQ(r1.at_bar, 2);
  EXPECT_EQ(r1.slowest, "toy.q k=4");
  EXPECT_NE(t.find("| 1 | 2 of 3 | 2 | 1.49x | 1.111x (toy.q k=4) |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 16 | 0 of 1 | 0 | - | - |"), std::string::npos) << t;
}

// The per-M bar: a case at 0.95x is under 1x but at the 0.9x bar; one at 0.85x is neither.
TEST(SpeedupSummary, PerMRowCountsCasesAtTheBar) {
  const std::vector<std::string> lines = {
      row("a.q", 4096, "cublas_bf16", 0, 95.0), row("a.q", 4096, "kbit_linear", 2, 100.0),
      row("b.k", 4096, "cublas_bf16", 0, 17.0), row("b.k", 4096, "kbit_linear", 3, 20.0),
  };
  const SpeedupSummary s = summarize_speedups(lines, "kbit_linear", "cublas_bf16", 4096, 0.9);
  const SpeedupRow& r = s.by_m.at(4096);
  EXPECT_EQ(r.cell.cases, 2);
  EXPECT_EQ(r.cell.faster, 0);
  EXPECT_EQ(r.at_bar, 1);
  EXPECT_EQ(r.slowest, "b.k k=3");
  EXPECT_EQ(summarize_speedups(lines, "kbit_linear", "cublas_bf16", 4096, 0.8).by_m.at(4096).at_bar, 2);
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
