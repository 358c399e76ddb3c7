#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "bench/clock_json.h"

namespace kbit::bench {
namespace {

constexpr const char* kBaseline = "cublas_bf16";

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// Backends in first-seen order, cuBLAS first.
std::vector<std::string> backend_order(const std::vector<Row>& rows) {
  std::vector<std::string> out;
  for (const auto& r : rows)
    if (std::find(out.begin(), out.end(), r.backend) == out.end()) out.push_back(r.backend);
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    return (a.rfind("cublas", 0) == 0) > (b.rfind("cublas", 0) == 0);
  });
  return out;
}

}  // namespace

std::string format_tables(const std::vector<Row>& rows, const RunInfo& info) {
  std::ostringstream out;
  out << "device: " << info.device.name << " (sm_" << info.device.cc_major << info.device.cc_minor << ", "
      << info.device.sms << " SMs), CUDA runtime " << info.device.cuda_runtime << ", commit " << info.commit << ", "
      << info.date << "\n"
      << "measured: HBM read " << fmt("%.2f", info.read_tbps) << " TB/s, launch floor "
      << fmt("%.2f", info.launch_floor_us) << " us; times are medians in us; * = invalid result, ^ = timed while\n"
      << "power or temperature held the clocks down (the JSON rows' clock fields)\n";
  if (!info.user_tables.empty())
    out << "tuned tables: KBIT_LINEAR_CONFIGS=" << info.user_tables << ", then the compiled one\n";
  const auto backends = backend_order(rows);
  std::set<int64_t> ms;
  std::set<int> bits_set;
  for (const auto& r : rows) {
    ms.insert(r.c.m);
    if (r.c.bits) bits_set.insert(r.c.bits);
  }
  if (bits_set.empty()) bits_set.insert(0);
  std::vector<std::string> models;
  for (const auto& r : rows)
    if (std::find(models.begin(), models.end(), r.c.model) == models.end()) models.push_back(r.c.model);
  for (int64_t m : ms)
   for (const auto& model : models) {
    out << "\nM = " << m << ", " << model << "\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-30s %4s", "projection", "k");
    out << line;
    for (const auto& b : backends) out << std::string(size_t(std::max<int>(1, 16 - int(b.size()))), ' ') << b;
    out << "   best kbit  vs bf16\n";
    // (shape, bits) -> backend -> row
    std::map<std::pair<std::string, int>, std::map<std::string, const Row*>> grid;
    std::vector<std::string> shapes;
    std::map<std::string, const LinearCase*> case_of;
    for (const auto& r : rows) {
      if (r.c.m != m || r.c.model != model) continue;
      if (std::find(shapes.begin(), shapes.end(), r.c.shape()) == shapes.end()) shapes.push_back(r.c.shape());
      case_of[r.c.shape()] = &r.c;
      const std::vector<int> targets = r.is_kbit ? std::vector<int>{r.c.bits}
                                                 : std::vector<int>(bits_set.begin(), bits_set.end());
      for (int b : targets) grid[{r.c.shape(), b}][r.backend] = &r;
    }
    std::map<int, std::map<std::string, double>> totals;  // bits -> backend -> us per block
    std::map<int, double> total_best;
    std::map<int, bool> total_complete;
    for (int bits : bits_set) {
      total_complete[bits] = true;
      for (const auto& shape : shapes) {
        const auto& cells = grid[{shape, bits}];
        std::snprintf(line, sizeof line, "%-30s %4d", shape.c_str(), bits);
        out << line;
        double best = INFINITY, base = INFINITY;
        const int calls = case_of[shape]->calls_per_block();
        // A MoE projection timed as its routed grouped GEMM too: that row counts in the
        // TOTAL, this per-expert approximation (marked ~) does not.
        const bool replaced =
            std::find(shapes.begin(), shapes.end(), shape + kRoutedSuffix) != shapes.end();
        for (const auto& b : backends) {
          const auto it = cells.find(b);
          if (it == cells.end() || !it->second->error.empty()) {
            out << std::string(16 - 1, ' ') << "-";
            continue;
          }
          const Row& r = *it->second;
          out << fmt("%15.2f", r.t.median_us) << (!r.valid ? "*" : clock_limited(r.t.clocks) ? "^" : " ");
          if (r.valid && !replaced) {
            totals[bits][b] += r.t.median_us * calls;
            if (r.is_kbit) best = std::min(best, r.t.median_us);
            if (b == kBaseline) base = r.t.median_us;
          }
        }
        if (std::isfinite(best)) {
          if (!replaced) total_best[bits] += best * calls;
          out << fmt("%12.2f", best) << (std::isfinite(base) ? fmt("%8.2fx", base / best) : std::string("       -"));
        } else if (!replaced) {
          total_complete[bits] = false;
        }
        out << (replaced ? " ~" : "") << "\n";
      }
      std::snprintf(line, sizeof line, "%-30s %4d", ("TOTAL " + model + " block").c_str(), bits);
      out << line;
      for (const auto& b : backends) {
        const auto it = totals[bits].find(b);
        out << (it == totals[bits].end() ? std::string(15, ' ') + "-" : fmt("%15.2f", it->second) + " ");
      }
      if (total_complete[bits] && total_best.count(bits)) {
        const double base = totals[bits].count(kBaseline) ? totals[bits][kBaseline] : NAN;
        out << fmt("%12.2f", total_best[bits]) << (std::isfinite(base) ? fmt("%8.2fx", base / total_best[bits]) : "");
      }
      out << "\n";
    }
  }
  out << "\nTOTAL = sum over the block's projections of time x per_block. MoE projections count as\n"
         "their routed grouped GEMM (rows @routed: M tokens routed top-k by seeded routings; cublas_bf16 =\n"
         "cuBLAS grouped bf16, kbit = kbit::expert_linear) where measured; rows marked ~ are then left out.\n"
         "Without @routed rows a MoE projection counts as active experts x one expert GEMM over all M\n"
         "tokens (an upper bound for routed decode).\n";
  return out.str();
}

std::string row_json(const Row& r, const RunInfo& info) {
  nlohmann::ordered_json j;
  j["shape"] = r.c.shape();
  j["m"] = r.c.m, j["n"] = r.c.n, j["k"] = r.c.k, j["bits"] = r.c.bits;
  j["residual"] = r.c.residual;
  j["backend"] = r.backend, j["config"] = r.config, j["num_buffers"] = r.num_buffers;
  j["settle_ms"] = default_settle_ms();
  if (!r.error.empty()) {
    j["error"] = r.error;
  } else {
    j["median_us"] = r.t.median_us, j["p10_us"] = r.t.p10_us, j["p90_us"] = r.t.p90_us;
    j["mean_us"] = r.t.mean_us, j["cv_pct"] = r.t.cv_pct, j["samples_us"] = r.t.samples_us;
    j["bytes"] = r.bytes;
    j["effective_TBps"] = r.bytes / r.t.median_us / 1e6;
    j["roofline_us"] = r.roofline_us;
    j["roofline_fraction"] = r.roofline_us / r.t.median_us;
    j["valid"] = r.valid, j["cosine"] = r.cosine, j["max_abs_error"] = r.max_abs_error;
    j["max_scaled_error"] = r.max_scaled_error;
    add_clock_fields(j, r.t.clocks);
  }
  j["device"] = info.device.name;
  j["compute_capability"] = info.device.cc_major * 10 + info.device.cc_minor;
  j["cuda_version"] = info.device.cuda_runtime;
  j["read_TBps"] = info.read_tbps, j["launch_floor_us"] = info.launch_floor_us;
  j["commit"] = info.commit, j["date"] = info.date;
  if (!info.user_tables.empty()) j["user_tables"] = info.user_tables;
  return j.dump();
}

std::string render_svg(const std::vector<Row>& rows, const std::string& shape, int bits) {
  std::map<std::string, std::vector<std::pair<double, double>>> lines;  // backend -> (m, us)
  for (const auto& r : rows)
    if (r.c.shape() == shape && r.error.empty() && r.valid && (!r.is_kbit || r.c.bits == bits))
      lines[r.backend].emplace_back(double(r.c.m), r.t.median_us);
  double m0 = INFINITY, m1 = 0, t0 = INFINITY, t1 = 0;
  for (auto& [b, pts] : lines) {
    std::sort(pts.begin(), pts.end());
    for (auto [m, t] : pts) m0 = std::min(m0, m), m1 = std::max(m1, m), t0 = std::min(t0, t), t1 = std::max(t1, t);
  }
  const int W = 720, H = 440, L = 70, R = 180, T = 40, B = 50;
  std::ostringstream s;
  s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "' font-family='sans-serif' "
    << "font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n";
  s << "<text x='" << L << "' y='22' font-size='15'>" << shape << ": time per call vs M"
    << (bits ? " (kbit at k=" + std::to_string(bits) + ")" : std::string()) << "</text>\n";
  if (lines.empty() || !(m1 > 0)) {
    s << "<text x='" << L << "' y='80'>no valid rows for this shape</text>\n</svg>\n";
    return s.str();
  }
  const double lm0 = std::log2(m0), lm1 = std::max(std::log2(m1), lm0 + 1);
  const double lt0 = std::floor(std::log10(t0)), lt1 = std::max(std::ceil(std::log10(t1)), lt0 + 1);
  auto X = [&](double m) { return L + (W - L - R) * (std::log2(m) - lm0) / (lm1 - lm0); };
  auto Y = [&](double t) { return H - B - (H - T - B) * (std::log10(t) - lt0) / (lt1 - lt0); };
  s << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='black'/>\n";
  s << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='black'/>\n";
  for (double e = lt0; e <= lt1; ++e) {
    const double t = std::pow(10.0, e);
    s << "<line x1='" << L << "' y1='" << Y(t) << "' x2='" << W - R << "' y2='" << Y(t)
      << "' stroke='#ddd'/><text x='" << L - 8 << "' y='" << Y(t) + 4 << "' text-anchor='end'>" << t << " us</text>\n";
  }
  for (double e = std::ceil(lm0); e <= std::floor(lm1); ++e) {
    const double m = std::pow(2.0, e);
    s << "<text x='" << X(m) << "' y='" << H - B + 16 << "' text-anchor='middle'>" << m << "</text>\n";
  }
  s << "<text x='" << (L + W - R) / 2 << "' y='" << H - 12 << "' text-anchor='middle'>M (tokens)</text>\n";
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"};
  int i = 0;
  for (const auto& [b, pts] : lines) {
    const char* c = colors[i % 7];
    s << "<polyline fill='none' stroke='" << c << "' stroke-width='2' points='";
    for (auto [m, t] : pts) s << X(m) << "," << Y(t) << " ";
    s << "'/>\n";
    for (auto [m, t] : pts) s << "<circle cx='" << X(m) << "' cy='" << Y(t) << "' r='3' fill='" << c << "'/>\n";
    s << "<text x='" << W - R + 10 << "' y='" << T + 18 * i << "' fill='" << c << "'>" << b << "</text>\n";
    ++i;
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace kbit::bench
