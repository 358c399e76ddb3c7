// `kbit shapes`: the projection shapes of a checkpoint as a shape set, and the --shapes option of
// kbit bench / kbit tune, which takes such a set (or a checkpoint) in place of data/shapes.json.
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"
#include "core/text_file.h"
#include "kbit/convert.h"
#include "kbit/error.h"

namespace kbit::tools {
namespace {

bool names_a_checkpoint(const std::string& path) {
  return std::filesystem::is_directory(path) || path.ends_with(".safetensors");
}

void print_checkpoint_shapes(const CheckpointShapes& s, std::FILE* to) {
  std::fprintf(to, "%s: %zu projections", s.model.source.c_str(), s.model.projections.size());
  if (s.skipped) std::fprintf(to, " (%lld layer tensors skipped: not 2-D floats)", (long long)s.skipped);
  std::fprintf(to, "\n");
  for (const auto& p : s.model.projections) {
    std::fprintf(to, "  %-40s N %7lld  K %7lld", p.name.c_str(), (long long)p.N, (long long)p.K);
    if (p.experts > 1) std::fprintf(to, "  experts %d, active %d", p.experts, p.active);
    std::fprintf(to, "\n");
  }
  if (!s.active_source.empty()) std::fprintf(to, "experts per token: %s\n", s.active_source.c_str());
}

}  // namespace

const std::string shapes_option_help =
    "these shapes instead of data/shapes.json's: a shape set in its schema (JSON, see `kbit shapes`) or a "
    "checkpoint, file or folder, whose layer projections are read";

CLI::Option* add_shapes_option(CLI::App* cmd, std::string& path) {
  return cmd->add_option("--shapes", path, shapes_option_help);
}

std::vector<ModelShapes> read_shape_set(const std::string& path) {
  if (!names_a_checkpoint(path)) return load_model_shapes(path);
  const CheckpointShapes s = checkpoint_shapes(path);
  print_checkpoint_shapes(s, stderr);
  return {s.model};
}

void add_shapes_command(CLI::App& app) {
  struct Args {
    std::string in, out;
    CheckpointShapesOptions o;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "shapes", "List a checkpoint's projection shapes as a shape set for `kbit bench --shapes` and `kbit tune --shapes`");
  cmd->add_option("checkpoint", a->in, "a .safetensors file or a folder of shards (plain or quantized)")->required();
  cmd->add_option("--key", a->o.key, "the model's name in the set (default: the file or folder name)");
  cmd->add_option("--active", a->o.active, "experts per token (default: the top-k of a config.json beside the checkpoint)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--out", a->out, "write the shape set (JSON) here instead of to stdout");
  cmd->callback([a] {
    const CheckpointShapes s = checkpoint_shapes(a->in, a->o);
    const std::string json = model_shapes_json({s.model});
    if (a->out.empty()) {
      print_checkpoint_shapes(s, stderr);
      std::fputs(json.c_str(), stdout);
      return;
    }
    print_checkpoint_shapes(s, stdout);
    detail::write_text_file(a->out, json);
    std::printf("shape set written to %s\n", a->out.c_str());
  });
}

}  // namespace kbit::tools
