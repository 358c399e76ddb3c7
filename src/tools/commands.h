// Subcommands of the `kbit` tool; each registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "kbit/shapes.h"

namespace kbit::tools {

void add_quantize_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_stream_bench_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_shapes_command(CLI::App& app);
void add_plan_command(CLI::App& app);

// The models of --shapes PATH: a shape set in data/shapes.json's schema, or a checkpoint (a
// .safetensors file or a folder), whose projections kbit::checkpoint_shapes lists (printed to stderr).
std::vector<ModelShapes> read_shape_set(const std::string& path);
// The --shapes option of bench, bench moe, tune and plan (read it with read_shape_set), with
// shapes_option_help as its description.
extern const std::string shapes_option_help;
CLI::Option* add_shapes_option(CLI::App* cmd, std::string& path);

// A timing command's --settle-ms (untimed replays before each row's samples, bench/timing.h) and
// --no-record-clocks (bench/clock_monitor.h).
void add_timing_options(CLI::App* cmd);

// True when stderr is a terminal (progress lines are drawn only there).
bool stderr_is_terminal();

}  // namespace kbit::tools
