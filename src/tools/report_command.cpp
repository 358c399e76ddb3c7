// kbit report hadamard: the quality effect of rotation (output SQNR, dB).
// kbit report speedups: cases where a kbit backend beats a baseline, from kbit bench JSON.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "bench/speedup_summary.h"
#include "commands.h"
#include "kbit/error.h"
#include "kbit/rotation_study.h"

namespace kbit::tools {

void add_report_command(CLI::App& app) {
  CLI::App* report = app.add_subcommand("report", "Quality studies and summaries of benchmark results");
  report->require_subcommand(1);
  struct Args {
    int64_t n = 1024, k = 3584, m = 64;
    uint64_t seed = 1;
    std::vector<std::string> rotations{"none", "block:64", "block:256", "row"};
  };
  auto a = std::make_shared<Args>();
  CLI::App* h = report->add_subcommand("hadamard", "Output SQNR of x W^T with and without Hadamard rotation, k = 2..5");
  h->add_option("--rows", a->n, "N (outputs)")->capture_default_str();
  h->add_option("--cols", a->k, "K (reduction; 3584 = 28 x 128 exercises the order-28 matrix)")->capture_default_str();
  h->add_option("--tokens", a->m, "rows of x")->capture_default_str();
  h->add_option("--seed", a->seed, "weights, activations and sign vector")->capture_default_str();
  h->add_option("--rotations", a->rotations, "none, block:B, row")->delimiter(',')->capture_default_str();
  h->callback([a] {
    KBIT_REQUIRE(!a->rotations.empty() && a->rotations.front() == "none",
                 "--rotations must start with none (the baseline the gains are measured against)");
    const auto rows = hadamard_study(a->n, a->k, a->m, a->rotations, {2, 3, 4, 5}, a->seed);
    std::printf("Output SQNR (dB) of x W^T, W[%lld, %lld] quantized with BNF codebooks, x[%lld, %lld] Gaussian, "
                "seed %llu; gains relative to no rotation.\n\n",
                (long long)a->n, (long long)a->k, (long long)a->m, (long long)a->k, (unsigned long long)a->seed);
    std::cout << format_study_markdown(rows);
  });

  struct SpeedupArgs {
    std::vector<std::string> files;
    std::string backend = "kbit_linear", baseline = "cublas_bf16";
    int64_t max_m = 16;
    double bar = 0.9;
  };
  auto sa = std::make_shared<SpeedupArgs>();
  CLI::App* sp = report->add_subcommand(
      "speedups", "Count the (projection, M, k) cases where a kbit backend beats a baseline, from kbit bench --json files");
  sp->add_option("files", sa->files, "JSON-lines files of kbit bench (later files replace earlier rows of the same case)")
      ->required();
  sp->add_option("--backend", sa->backend, "the kbit backend")->capture_default_str();
  sp->add_option("--baseline", sa->baseline, "the backend it is compared with")->capture_default_str();
  sp->add_option("--max-m", sa->max_m, "leave out rows above this M")->capture_default_str();
  sp->add_option("--bar", sa->bar, "the per-M table counts the cases at this speedup or better")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sp->callback([sa] {
    std::vector<std::string> lines;
    for (const auto& f : sa->files) {
      std::ifstream in(f);
      KBIT_REQUIRE(in.good(), "cannot read ", f);
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    const auto s = bench::summarize_speedups(lines, sa->backend, sa->baseline, sa->max_m, sa->bar);
    std::cout << bench::format_speedup_summary(s, sa->backend, sa->baseline);
  });
}

}  // namespace kbit::tools
