// Subcommands of the `kbit` tool; each registers itself on the CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kbit::tools {

void add_quantize_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_stream_bench_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_tune_command(CLI::App& app);

// A timing command's --settle-ms (untimed replays before each row's samples, bench/timing.h) and
// --no-record-clocks (bench/clock_monitor.h).
void add_timing_options(CLI::App* cmd);

// True when stderr is a terminal (progress lines are drawn only there).
bool stderr_is_terminal();

}  // namespace kbit::tools
