// `kbit plan`: which kernel kbit::linear runs for each projection, M and bit width (the tuned
// table's entry for this GPU where there is one, the heuristic otherwise; no GPU: the heuristic
// with the H200's 132 SMs).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "kbit/error.h"
#include "kbit/linear.h"

namespace kbit::tools {

void add_plan_command(CLI::App& app) {
  struct Args {
    std::vector<std::string> models{"all"};
    std::string shapes;
    std::vector<int64_t> ms{1, 2, 4, 8, 16, 32, 64};
    std::vector<int> bits{4};
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("plan", "Show the plan kbit::linear picks for each projection, M and bit width");
  cmd->add_option("--model", a->models, "glm47, qwen3_coder_next, kimi_k3_latent or all (with --shapes: its models' keys)")
      ->delimiter(',')
      ->capture_default_str();
  add_shapes_option(cmd, a->shapes);
  cmd->add_option("--m", a->ms, "tokens per call")->delimiter(',')->capture_default_str();
  cmd->add_option("--bits", a->bits, "bit widths")->delimiter(',')->capture_default_str();
  cmd->callback([a] {
    const auto set = a->shapes.empty() ? model_shapes() : read_shape_set(a->shapes);
    const auto models = select_model_shapes(set, a->models);
    for (int b : a->bits) require_supported_bits(b);
    for (int64_t m : a->ms) KBIT_REQUIRE(m >= 1 && m <= 65536, "--m values must be 1..65536, got ", m);
    std::printf("%-20s %-36s %7s %7s %6s %2s  %s\n", "model", "projection", "N", "K", "M", "k", "plan");
    for (const auto& model : models)
      for (const auto& p : model.projections)
        for (int b : a->bits)
          for (int64_t m : a->ms)
            std::printf("%-20s %-36s %7lld %7lld %6lld %2d  %s\n", model.key.c_str(), p.name.c_str(), (long long)p.N,
                        (long long)p.K, (long long)m, b, plan_linear(m, p.N, p.K, b).describe().c_str());
  });
}

}  // namespace kbit::tools
