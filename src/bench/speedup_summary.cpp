#include "bench/speedup_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "kbit/error.h"

namespace kbit::bench {

SpeedupSummary summarize_speedups(const std::vector<std::string>& json_lines, const std::string& backend,
                                  const std::string& baseline, int64_t max_m, double bar) {
  struct Entry {
    double us = 0;
    bool usable = false;
    std::string why;
  };
  // (shape, M, bits, backend) -> the last row seen
  std::map<std::tuple<std::string, int64_t, int, std::string>, Entry> rows;
  size_t line_no = 0;
  for (const std::string& line : json_lines) {
    ++line_no;
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error("speedups: line " + std::to_string(line_no) + " is not JSON: " + e.what());
    }
    KBIT_REQUIRE(j.is_object() && j.contains("shape") && j.contains("m") && j.contains("backend"),
                 "speedups: line ", line_no, " is not a kbit bench row (shape, m and backend expected)");
    const std::string shape = j["shape"].get<std::string>(), be = j["backend"].get<std::string>();
    const int64_t m = j["m"].get<int64_t>();
    if (shape.find('@') != std::string::npos || m > max_m || (be != backend && be != baseline)) continue;
    Entry e;
    const bool has_error = j.contains("error") && j["error"].is_string() && !j["error"].get<std::string>().empty();
    e.us = j.value("median_us", 0.0);
    e.usable = !has_error && j.value("valid", false) && e.us > 0;
    e.why = has_error ? j["error"].get<std::string>() : e.usable ? "" : "invalid result";
    rows[{shape, m, j.value("bits", 0), be}] = e;
  }
  SpeedupSummary s;
  s.bar = bar;
  for (const auto& [key, e] : rows) {
    const auto& [shape, m, bits, be] = key;
    if (be != backend) continue;
    const std::string what = shape + " M=" + std::to_string(m) + " k=" + std::to_string(bits);
    // A quantized baseline (another kbit backend) pairs with the same k; a bf16 one (bits 0: cuBLAS) with every k.
    auto base = rows.find({shape, m, bits, baseline});
    if (base == rows.end()) base = rows.find({shape, m, 0, baseline});
    if (base == rows.end() || !base->second.usable) {
      s.notes.push_back(what + ": left out (no usable " + baseline + " row)");
      continue;
    }
    const std::string model = shape.substr(0, shape.find('.'));
    SpeedupCell& cell = s.by_model_m[{model, m}];
    SpeedupRow& row = s.by_m[m];
    ++cell.cases, ++row.cell.cases, ++s.cases;
    if (!e.usable) {
      s.notes.push_back(what + ": counted as slower (" + e.why + ")");
      continue;
    }
    const double speedup = base->second.us / e.us;
    if (row.cell.speedups.empty() || speedup < *std::min_element(row.cell.speedups.begin(), row.cell.speedups.end()))
      row.slowest = shape + " k=" + std::to_string(bits);
    cell.speedups.push_back(speedup);
    row.cell.speedups.push_back(speedup);
    if (speedup >= bar) ++row.at_bar;
    if (e.us < base->second.us) ++cell.faster, ++row.cell.faster, ++s.faster;
  }
  return s;
}

std::string format_speedup_summary(const SpeedupSummary& s, const std::string& backend, const std::string& baseline) {
  std::string out = "| model | M | " + backend + " faster than " + baseline +
                    " | speedup min / median / max |\n|---|---|---|---|\n";
  char buf[256];
  for (const auto& [key, cell] : s.by_model_m) {
    std::vector<double> v = cell.speedups;
    std::sort(v.begin(), v.end());
    if (v.empty()) {
      std::snprintf(buf, sizeof buf, "| %s | %lld | %d / %d | - |\n", key.first.c_str(), (long long)key.second,
                    cell.faster, cell.cases);
    } else {
      const double median = v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
      std::snprintf(buf, sizeof buf, "| %s | %lld | %d / %d | %.2fx / %.2fx / %.2fx |\n", key.first.c_str(),
                    (long long)key.second, cell.faster, cell.cases, v.front(), median, v.back());
    }
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "\n| M | faster | at %.2fx or better | geomean | slowest |\n|---|---|---|---|---|\n",
                s.bar);
  out += buf;
  for (const auto& [m, row] : s.by_m) {
    const std::vector<double>& v = row.cell.speedups;
    if (v.empty()) {
      std::snprintf(buf, sizeof buf, "| %lld | %d of %d | 0 | - | - |\n", (long long)m, row.cell.faster,
                    row.cell.cases);
    } else {
      double log_sum = 0;
      for (double x : v) log_sum += std::log(x);
      std::snprintf(buf, sizeof buf, "| %lld | %d of %d | %d | %.2fx | %.3fx (%s) |\n", (long long)m, row.cell.faster,
                    row.cell.cases, row.at_bar, std::exp(log_sum / double(v.size())),
                    *std::min_element(v.begin(), v.end()), row.slowest.c_str());
    }
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "\nTotal: %d of %d cases faster.\n", s.faster, s.cases);
  out += buf;
  for (const auto& n : s.notes) out += "- " + n + "\n";
  return out;
}

}  // namespace kbit::bench
