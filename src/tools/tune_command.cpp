// `kbit tune`: measure kbit::linear's candidate plans on the present GPU and merge
// the fastest into the tuned table (data/linear_configs.json, compiled in at the
// next build).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "bench/linear_tune.h"
#include "commands.h"
#include "kbit/error.h"

namespace kbit::tools {

void add_tune_command(CLI::App& app) {
  struct Args {
    bench::LinearTuneOptions o;
    std::string out = "data/linear_configs.json";
  };
  auto a = std::make_shared<Args>();
  CLI::App* tune = app.add_subcommand(
      "tune", "Time every kbit::linear plan for model shapes on this GPU and write the fastest to the config table");
  tune->add_option("--model", a->o.models, "glm47, qwen3_coder_next, kimi_k3_latent or all")->delimiter(',')
      ->capture_default_str();
  tune->add_option("--m", a->o.ms, "tokens per call")->delimiter(',')->capture_default_str();
  tune->add_option("--bits", a->o.bits, "bit widths")->delimiter(',')->capture_default_str();
  tune->add_option("--repeats", a->o.repeats, "timed samples per candidate")->capture_default_str();
  tune->add_option("--out", a->out, "table to merge into and write (rebuild to compile it in)")->capture_default_str();
  tune->callback([a] {
    std::vector<detail::LinearConfig> table;
    if (std::filesystem::exists(a->out)) {
      std::ifstream in(a->out);
      std::stringstream text;
      text << in.rdbuf();
      table = detail::parse_linear_configs(text.str());
    }
    const auto rows = bench::run_linear_tune(a->o);
    std::vector<detail::LinearConfig> tuned;
    double sum_best = 0, sum_heuristic = 0;
    std::printf("%-4s %7s %7s %5s  %-40s %10s %10s\n", "k", "N", "K", "M", "best plan", "best us", "heur. us");
    for (const auto& r : rows) {
      tuned.push_back(r.best);
      sum_best += r.best.us, sum_heuristic += r.heuristic_us;
      std::printf("k=%-2d %7lld %7lld %5lld  %-40s %10.2f %10.2f\n", r.best.bits, (long long)r.best.n,
                  (long long)r.best.k, (long long)r.best.m,
                  (std::string(linear_path_name(r.best.path)) + " nt=" + std::to_string(r.best.n_tiles) +
                   " w=" + std::to_string(r.best.warps) + " s=" + std::to_string(r.best.splits) +
                   (r.best.items == LinearItems::warp ? " warp" : " cta"))
                      .c_str(),
                  r.best.us, r.heuristic_us);
    }
    const auto merged = bench::merge_linear_configs(table, tuned);
    std::ofstream out(a->out);
    KBIT_REQUIRE(out.good(), "cannot write ", a->out);
    out << detail::linear_configs_to_json(merged);
    std::printf("%zu cases; sum of best %.1f us vs the heuristic's %.1f us; %zu entries written to %s\n", rows.size(),
                sum_best, sum_heuristic, merged.size(), a->out.c_str());
  });
}

}  // namespace kbit::tools
