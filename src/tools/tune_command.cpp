// `kbit tune`: measure kbit::linear's candidate plans on the present GPU and merge
// the fastest into the tuned table (data/linear_configs.json, compiled in at the
// next build).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "bench/linear_tune.h"
#include "bench/skinny_bench.h"
#include "commands.h"
#include "core/text_file.h"
#include "kbit/error.h"

namespace kbit::tools {
namespace {

std::vector<detail::LinearConfig> read_table(const std::string& path) {
  if (!std::filesystem::exists(path)) return {};
  return detail::load_linear_configs_file(path);
}

// "1-16" or "1,2,4".
std::vector<int64_t> parse_m_list(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string part;
  try {
    while (std::getline(ss, part, ',')) {
      const auto dash = part.find('-');
      if (dash == std::string::npos) {
        out.push_back(std::stoll(part));
      } else {
        const int64_t a = std::stoll(part.substr(0, dash)), b = std::stoll(part.substr(dash + 1));
        KBIT_REQUIRE(a <= b, "--m range '", part, "' is empty");
        for (int64_t m = a; m <= b; ++m) out.push_back(m);
      }
    }
  } catch (const std::logic_error&) {
    throw Error("--m '" + text + "': expected numbers or ranges such as 1-16");
  }
  KBIT_REQUIRE(!out.empty(), "--m is empty");
  return out;
}

void add_tune_skinny(CLI::App* tune) {
  struct Args {
    bench::SkinnyBenchOptions o;
    std::string m = "1-16", shard = "0/1", json, table_out;
  };
  auto a = std::make_shared<Args>();
  CLI::App* s = tune->add_subcommand(
      "skinny", "Benchmark the skinny GEMM C = A W^T + R against cuBLAS addmm (graph replay, cold L2) and tune it");
  s->add_option("--n", a->o.n, "N (outputs)")->capture_default_str();
  s->add_option("--k", a->o.k, "K (a multiple of 8)")->capture_default_str();
  s->add_option("--m", a->m, "M values: 1-16 or 1,2,4")->capture_default_str();
  s->add_option("--mode", a->o.mode, "baseline, sweep or selected")->capture_default_str();
  s->add_option("--config", a->o.config, "selected mode: l=async,w=4,r=1,p=2,c=128,s=1 (or the ring: w=4,r=2,p=3,c=256,s=1) instead of the table");
  s->add_option("--loader", a->o.loader, "sweep: only this loader's shapes (tma, reg, smem, async; auto: all)")
      ->capture_default_str();
  s->add_option("--shard", a->shard, "sweep: run candidates i, i+n, ... (i/n)")->capture_default_str();
  s->add_option("--cache-multiplier", a->o.cache_multiplier, "rotate buffers over this many times L2")
      ->capture_default_str();
  s->add_option("--max-buffers", a->o.max_buffers, "at most this many W/R buffer sets")->capture_default_str();
  s->add_option("--repeats", a->o.repeats, "timed samples")->capture_default_str();
  s->add_option("--replays", a->o.replays, "graph replays per sample (0: ~2 ms)")->capture_default_str();
  s->add_flag("!--no-residual", a->o.residual, "C = A W^T without R");
  s->add_flag("--pdl", a->o.pdl,
              "also time every kbit configuration launched with programmatic dependent launch, each call's "
              "weight requests overlapping the previous call's end as in a decode step (rows kbit_skinny_pdl)");
  s->add_option("--json", a->json, "one JSON object per (M, backend, config)");
  s->add_option("--table-out", a->table_out, "sweep: merge the fastest config per M into this table (with --pdl also the fastest under PDL, as pdl entries)");
  add_timing_options(s);
  s->callback([a] {
    a->o.ms = parse_m_list(a->m);
    const auto slash = a->shard.find('/');
    KBIT_REQUIRE(slash != std::string::npos, "--shard must be i/n, got ", a->shard);
    a->o.shard = std::stoi(a->shard.substr(0, slash)), a->o.shards = std::stoi(a->shard.substr(slash + 1));
    const auto rows = bench::run_skinny_bench(a->o);
    std::map<int64_t, double> cublas;
    for (const auto& r : rows)
      if (r.backend == "cublas_addmm" && r.error.empty()) cublas[r.m] = r.median_us;
    std::printf("%4s %-15s %-28s %10s %10s %8s %6s %6s %s\n", "M", "backend", "config", "median us", "cuBLAS us",
                "speedup", "regs", "spill", "valid");
    for (const auto& r : rows)
      std::printf("%4lld %-15s %-28s %10.2f %10.2f %7.2fx %6d %6d %s\n", (long long)r.m, r.backend.c_str(),
                  r.config.substr(0, 28).c_str(), r.median_us, cublas.count(r.m) ? cublas[r.m] : 0.0,
                  r.median_us > 0 && cublas.count(r.m) ? cublas[r.m] / r.median_us : 0.0, r.registers_per_thread,
                  r.spill_bytes, r.error.empty() ? (r.valid ? "yes" : "NO") : r.error.c_str());
    if (!a->json.empty()) {
      std::ofstream out(a->json);
      KBIT_REQUIRE(out.good(), "cannot write ", a->json);
      for (const auto& r : rows) out << bench::skinny_row_json(r) << "\n";
    }
    if (!a->table_out.empty()) {
      const auto merged = bench::merge_linear_configs(read_table(a->table_out), bench::best_skinny_configs(rows));
      detail::write_text_file(a->table_out, detail::linear_configs_to_json(merged));
      std::printf("%zu entries written to %s\n", merged.size(), a->table_out.c_str());
    }
  });
}

}  // namespace

void add_tune_command(CLI::App& app) {
  struct Args {
    bench::LinearTuneOptions o;
    std::string out = "data/linear_configs.json", shapes;
  };
  auto a = std::make_shared<Args>();
  CLI::App* tune = app.add_subcommand(
      "tune", "Time every kbit::linear plan for model shapes on this GPU and write the fastest to the config table");
  CLI::Option* model = tune->add_option("--model", a->o.models,
                                         "glm47, qwen3_coder_next, kimi_k3_latent or all (with --shapes: its models' keys; default all of them)")
                           ->delimiter(',')
                           ->capture_default_str();
  add_shapes_option(tune, a->shapes)
      ->description(shapes_option_help + "; then --out your own table and point $KBIT_LINEAR_CONFIGS at it (no rebuild)");
  tune->add_option("--projection", a->o.projections, "only these projections of the models (e.g. kv,moe_dn)")
      ->delimiter(',');
  tune->add_option("--m", a->o.ms, "tokens per call")->delimiter(',')->capture_default_str();
  tune->add_option("--bits", a->o.bits, "bit widths")->delimiter(',')->capture_default_str();
  tune->add_option("--repeats", a->o.repeats, "timed samples per finalist (every candidate with --finalists 0)")
      ->capture_default_str();
  tune->add_option("--finalists", a->o.finalists,
                   "candidates timed in full after a one-sample screen of all (0: all in full)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  tune->add_option("--finalist-margin", a->o.finalist_margin,
                   "screened candidates beyond the 2 fastest stay finalists while within this fraction of the fastest")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  tune->add_option("--out", a->out,
                   "table to merge into and write (data/linear_configs.json: rebuild to compile it in; any other file: "
                   "name it in $KBIT_LINEAR_CONFIGS)")
      ->capture_default_str();
  add_timing_options(tune);
  add_tune_skinny(tune);
  tune->final_callback([tune, a, model] {
    if (!tune->get_subcommands().empty()) return;
    if (!a->shapes.empty()) {
      a->o.shape_set = read_shape_set(a->shapes);
      if (model->count() == 0) a->o.models = {"all"};
    }
    // Before any timing: a tune that could not write its table at the first case would lose that case's work.
    const std::filesystem::path out_folder = std::filesystem::path(a->out).parent_path();
    KBIT_REQUIRE(out_folder.empty() || std::filesystem::is_directory(out_folder), "--out ", a->out, ": the folder ",
                 out_folder.string(), " does not exist");
    const std::vector<detail::LinearConfig> table = read_table(a->out);
    // The table is rewritten after every case (through a temporary file and a rename), so
    // that a run stopped by a time limit keeps the cases it finished.
    std::vector<detail::LinearConfig> so_far;
    auto write_table = [&](const std::vector<detail::LinearConfig>& tuned) {
      const auto merged = bench::merge_linear_configs(table, tuned);
      detail::write_text_file(a->out, detail::linear_configs_to_json(merged));
      return merged.size();
    };
    size_t entries = table.size();
    const auto rows = bench::run_linear_tune(a->o, [&](const bench::LinearTuneRow& r) {
      so_far.push_back(r.best);
      entries = write_table(so_far);
    });
    double sum_best = 0, sum_heuristic = 0;
    std::printf("%-4s %7s %7s %5s  %-40s %10s %10s\n", "k", "N", "K", "M", "best plan", "best us", "heur. us");
    for (const auto& r : rows) {
      sum_best += r.best.us, sum_heuristic += r.heuristic_us;
      std::printf("k=%-2d %7lld %7lld %5lld  %-40s %10.2f %10.2f\n", r.best.bits, (long long)r.best.n,
                  (long long)r.best.k, (long long)r.best.m,
                  (std::string(linear_path_name(r.best.path)) + " nt=" + std::to_string(r.best.n_tiles) +
                   " w=" + std::to_string(r.best.warps) + " s=" + std::to_string(r.best.splits) +
                   " " + std::string(linear_items_name(r.best.items)) +
                   (r.best.gemm_algo ? " algo=" + std::to_string(r.best.gemm_algo) : std::string()))
                      .c_str(),
                  r.best.us, r.heuristic_us);
    }
    if (rows.empty()) {
      std::printf("no cases tuned; %s unchanged\n", a->out.c_str());
      return;
    }
    std::printf("%zu cases; sum of best %.1f us vs the heuristic's %.1f us; %zu entries written to %s\n", rows.size(),
                sum_best, sum_heuristic, entries, a->out.c_str());
  });
}

}  // namespace kbit::tools
