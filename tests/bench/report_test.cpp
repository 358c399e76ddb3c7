// kbit bench's report: tables, TOTAL rows, JSON, SVG (host only).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/report.h"

namespace kbit::bench {
namespace {

Row make(const std::string& proj, int64_t m, const std::string& backend, int bits, double us, bool valid = true,
         int experts = 1, int active = 1, int per_block = 1) {
  Row r;
  r.c.model = "toy";
  r.c.projection = proj;
  r.c.m = m, r.c.n = 64, r.c.k = 32, r.c.bits = bits;
  r.c.experts = experts, r.c.active = active, r.c.per_block = per_block;
  r.backend = backend;
  r.is_kbit = backend.rfind("kbit", 0) == 0;
  r.t.median_us = us;
  r.t.samples_us = {us, us};
  r.valid = valid;
  r.bytes = 1e6;
  r.roofline_us = 0.25;
  return r;
}

TEST(BenchReport, TablesTotalsAndSpeedups) {
  std::vector<Row> rows = {
      make("q", 1, "cublas_bf16", 0, 10.0), make("q", 1, "kbit_x", 4, 4.0),
      make("moe", 1, "cublas_bf16", 0, 5.0, true, 8, 2), make("moe", 1, "kbit_x", 4, 2.0, true, 8, 2),
      make("o", 1, "cublas_bf16", 0, 3.0, true, 1, 1, 2), make("o", 1, "kbit_x", 4, 1.0, false, 1, 1, 2),
  };
  RunInfo info;
  info.device.name = "toy GPU";
  const std::string t = format_tables(rows, info);
  EXPECT_NE(t.find("M = 1"), std::string::npos);
  EXPECT_NE(t.find("2.50x"), std::string::npos) << t;  // q: 10 / 4
  EXPECT_NE(t.find("1.00*"), std::string::npos) << t;  // invalid row marked
  EXPECT_EQ(t.find("10.00^"), std::string::npos) << t;  // no clock record: no mark
  rows[0].t.clocks.available = true, rows[0].t.clocks.event_reasons = 0x4;  // q's cuBLAS row under the power cap
  EXPECT_NE(format_tables(rows, info).find("10.00^"), std::string::npos);
  // TOTAL for cuBLAS: q 10 + moe 5 x 2 active + o 3 x 2 per block = 26
  EXPECT_NE(t.find("26.00"), std::string::npos) << t;
  // the kbit total is incomplete (o invalid), so no best-kbit total is claimed
  const auto total_line = t.substr(t.find("TOTAL toy block"));
  EXPECT_EQ(total_line.substr(0, total_line.find('\n')).find('x'), std::string::npos) << total_line;
}

TEST(BenchReport, RoutedMoeRowsReplaceThePerExpertApproximationInTheTotal) {
  std::vector<Row> rows = {
      make("q", 1, "cublas_bf16", 0, 10.0), make("q", 1, "kbit_x", 4, 4.0),
      make("moe", 1, "cublas_bf16", 0, 5.0, true, 8, 2), make("moe", 1, "kbit_x", 4, 2.0, true, 8, 2),
      make(std::string("moe") + kRoutedSuffix, 1, "cublas_bf16", 0, 7.0),
      make(std::string("moe") + kRoutedSuffix, 1, "kbit_x", 4, 3.0),
  };
  RunInfo info;
  const std::string t = format_tables(rows, info);
  const auto total_line = t.substr(t.find("TOTAL toy block"));
  const std::string total = total_line.substr(0, total_line.find('\n'));
  // cuBLAS: q 10 + routed moe 7 = 17 (not 10 + 5 x 2 active = 20); best kbit: 4 + 3 = 7
  EXPECT_NE(total.find("17.00"), std::string::npos) << t;
  EXPECT_NE(total.find("7.00"), std::string::npos) << t;
  EXPECT_NE(total.find("2.43x"), std::string::npos) << t;  // 17 / 7
  const auto moe_line = t.substr(t.find("toy.moe "));
  EXPECT_NE(moe_line.substr(0, moe_line.find('\n')).find(" ~"), std::string::npos) << t;  // left out, marked
}

TEST(BenchReport, JsonRowHasTheDocumentedFields) {
  Row r = make("q", 16, "kbit_x", 3, 8.0);
  RunInfo info;
  info.device.name = "toy GPU", info.device.cc_major = 9, info.commit = "abc";
  const auto j = nlohmann::json::parse(row_json(r, info));
  for (const char* key : {"shape", "m", "n", "k", "bits", "backend", "config", "num_buffers", "median_us", "p10_us",
                          "p90_us", "mean_us", "cv_pct", "samples_us", "effective_TBps", "roofline_fraction", "valid",
                          "cosine", "max_abs_error", "device", "compute_capability", "cuda_version", "commit"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_DOUBLE_EQ(j["effective_TBps"].get<double>(), 1e6 / 8.0 / 1e6);
  r.error = "boom";
  EXPECT_EQ(nlohmann::json::parse(row_json(r, info))["error"], "boom");
}

TEST(BenchReport, SvgHasALinePerBackend) {
  std::vector<Row> rows;
  for (int64_t m : {1, 4, 16, 64}) {
    rows.push_back(make("q", m, "cublas_bf16", 0, 10.0 + double(m)));
    rows.push_back(make("q", m, "kbit_x", 4, 3.0 + double(m)));
    rows.push_back(make("q", m, "kbit_x", 2, 2.0 + double(m)));
  }
  const std::string svg = render_svg(rows, "toy.q", 4);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(render_svg(rows, "toy.absent", 4).find("no valid rows"), std::string::npos);
}

}  // namespace
}  // namespace kbit::bench
