// kbit quantize IN OUT --bits K [...]
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "kbit/convert.h"
#include "kbit/error.h"

namespace kbit::tools {

void add_quantize_command(CLI::App& app) {
  struct Args {
    std::string in, out, device = "auto";
    std::vector<std::string> bits_for;
    ConvertOptions options;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("quantize", "Convert a safetensors checkpoint (file or folder of shards) to kbit");
  cmd->add_option("input", args->in, "safetensors file, or folder with model.safetensors.index.json")->required();
  cmd->add_option("output", args->out, "output file (for a file) or folder (for a folder)")->required();
  cmd->add_option("--bits,-k", args->options.bits, "bits per weight: 2, 3, 4 or 5")->capture_default_str();
  cmd->add_option("--bits-for", args->bits_for, "per-tensor bit width, REGEX=K (repeatable; last match wins), "
                                                "e.g. --bits-for 'experts=2'");
  cmd->add_option("--codebook", args->options.codebook, "bnf or nf")->capture_default_str();
  cmd->add_option("--include", args->options.include, "also quantize 2-D float tensors matching REGEX (repeatable)");
  cmd->add_option("--exclude", args->options.exclude, "never quantize tensors matching REGEX (repeatable)");
  cmd->add_option("--device", args->device, "auto, cpu or gpu")->capture_default_str();
  cmd->add_option("--hadamard", args->options.hadamard,
                  "rotate rows before quantizing: block:32|64|128|256 or row (recorded in the file)");
  cmd->add_option("--seed", args->options.hadamard_seed, "seed of the rotation's sign vector")->capture_default_str();
  cmd->add_flag("--force", args->options.overwrite, "replace an existing output");
  cmd->add_flag("!--no-error", args->options.measure_error, "skip the per-tensor error measurement");
  cmd->callback([args] {
    for (const auto& s : args->bits_for) {
      const auto eq = s.rfind('=');
      KBIT_REQUIRE(eq != std::string::npos && eq > 0, "--bits-for '", s, "': expected REGEX=K");
      int k = 0;
      try {
        k = std::stoi(s.substr(eq + 1));
      } catch (...) {
        throw Error(detail::concat("--bits-for '", s, "': '", s.substr(eq + 1), "' is not a bit width"));
      }
      args->options.bits_for.emplace_back(s.substr(0, eq), k);
    }
    if (args->device == "cpu") args->options.device = DevicePolicy::cpu;
    else if (args->device == "gpu") args->options.device = DevicePolicy::gpu;
    else KBIT_REQUIRE(args->device == "auto", "--device must be auto, cpu or gpu, got '", args->device, "'");

    const bool tty = stderr_is_terminal();
    Progress progress = [tty](size_t done, size_t total, const std::string& name) {
      if (!tty) return;
      std::fprintf(stderr, "\r\033[K[%zu/%zu] %s", done + 1, total, name.c_str());
      std::fflush(stderr);
    };
    const ConvertReport r = convert_checkpoint(args->in, args->out, args->options, progress);
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::cout << "wrote " << args->out << "\n" << format_summary(r);
  });
}

}  // namespace kbit::tools
