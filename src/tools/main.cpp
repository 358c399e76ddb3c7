// kbit: quantize, inspect and benchmark LLM weights in the kbit format.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "commands.h"
#include "core/build_info.h"
#include "kbit/error.h"

namespace kbit::tools {
bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }
}  // namespace kbit::tools

int main(int argc, char** argv) {
  CLI::App app{"kbit: 2-5 bit codebook quantization of LLM weights, with fast GPU kernels.\n"
               "With no command, runs `kbit demo`."};
  app.set_version_flag("--version", std::string("kbit 0.1.0 (") + kbit::detail::kGitCommit + ")");
  kbit::tools::add_demo_command(app);
  kbit::tools::add_quantize_command(app);
  kbit::tools::add_inspect_command(app);
  kbit::tools::add_bench_command(app);
  kbit::tools::add_stream_bench_command(app);
  kbit::tools::add_report_command(app);
  kbit::tools::add_tune_command(app);
  kbit::tools::add_shapes_command(app);
  kbit::tools::add_plan_command(app);
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) {
      // No command: the main job, on its built-in default input.
      const char* demo_argv[] = {argv[0], "demo"};
      app.parse(2, const_cast<char**>(demo_argv));
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kbit::Error& e) {
    std::fprintf(stderr, "kbit: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kbit: unexpected error: %s\n", e.what());
    return 2;
  }
  return 0;
}
