// kbit bench [--model ...] | kbit bench format | kbit bench calibrate
#include <cuda_runtime_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/format_bench.h"
#include "bench/first_load_probe.h"
#include "bench/gemv_probe.h"
#include "bench/skinny_probe.h"
#include "bench/hadamard_bench.h"
#include "bench/moe_bench.h"
#include "bench/stream_bench.h"
#include "bench/linear_bench.h"
#include "bench/timing.h"
#include "commands.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/linear.h"

namespace kbit {
namespace generated {
extern const char* const kCublasBaselinesJsonl;  // data/baselines/h200-cublas-bf16.jsonl
}

namespace tools {
namespace {

void write_outputs(const std::vector<bench::Row>& rows, const bench::RunInfo& info, const bench::LinearBenchOptions& o) {
  std::cout << bench::format_tables(rows, info);
  if (!o.json_path.empty()) {
    std::ofstream j(o.json_path);
    for (const auto& r : rows) j << bench::row_json(r, info) << "\n";
    KBIT_REQUIRE(j.good(), o.json_path, ": write failed");
  }
  if (!o.svg_path.empty()) {
    std::ofstream s(o.svg_path);
    s << bench::render_svg(rows, o.svg_shape, o.svg_bits);
    KBIT_REQUIRE(s.good(), o.svg_path, ": write failed");
  }
  int invalid = 0, failed = 0;
  for (const auto& r : rows) invalid += r.error.empty() && !r.valid, failed += !r.error.empty();
  if (invalid || failed) std::cout << invalid << " invalid row(s), " << failed << " failed row(s)\n";
}

// The timing core against independent measurements: a device copy timed
// outside any graph, and cuBLAS bf16 against the project's H200 baselines.
int calibrate(int repeats) {
  KBIT_REQUIRE(cuda::device_available(), "kbit bench needs a CUDA GPU: ", cuda::device_description());
  bool ok = true;
  {
    const size_t bytes = size_t(2) << 30;
    Buffer a = Buffer::allocate(Memory::device, bytes), b = Buffer::allocate(Memory::device, bytes);
    if (cudaMemset(a.data(), 3, bytes) != cudaSuccess) throw Error("calibrate: memset failed");
    bench::TimingOptions t;
    t.calls_per_graph = 4, t.replays = 3, t.repeats = repeats;
    const double graph_us = bench::time_graph([&](cudaStream_t s, int) {
      bench::launch_copy_kernel(b.data(), a.data(), bytes, s);
    }, t).median_us;
    // independent: plain stream launches, host clock around a synchronised loop
    cudaStream_t s;
    cudaStreamCreate(&s);
    for (int i = 0; i < 3; ++i) bench::launch_copy_kernel(b.data(), a.data(), bytes, s);
    cudaStreamSynchronize(s);
    const int n = 20;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) bench::launch_copy_kernel(b.data(), a.data(), bytes, s);
    cudaStreamSynchronize(s);
    const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
    cudaStreamDestroy(s);
    const double graph_tbps = 2.0 * double(bytes) / graph_us / 1e6, host_tbps = 2.0 * double(bytes) / host_us / 1e6;
    const double dev = std::fabs(graph_tbps / host_tbps - 1);
    std::printf("copy kernel 2 GiB: timing core %.1f us (%.3f TB/s r+w), host clock %.1f us (%.3f TB/s): %.1f%% apart %s\n",
                graph_us, graph_tbps, host_us, host_tbps, 100 * dev, dev <= 0.05 ? "ok" : "FAIL (> 5%)");
    ok = ok && dev <= 0.05;
  }
  // cuBLAS bf16 against the baselines (dense shapes; kimi with its residual as addmm)
  struct Base { std::string shape; int64_t k, n; bool residual; };
  const std::vector<Base> map = {{"glm47.q", 5120, 12288, false},        {"glm47.kv", 5120, 2048, false},
                                 {"glm47.o", 12288, 5120, false},        {"glm47.shared_gu", 5120, 24576, false},
                                 {"glm47.shared_dn", 12288, 5120, false}, {"qwen3_coder_next.q", 2048, 4096, false},
                                 {"qwen3_coder_next.o", 4096, 2048, false}};
  std::map<std::pair<std::string, int64_t>, double> baseline;
  std::istringstream in(generated::kCublasBaselinesJsonl);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    if (!j.contains("shape") || !j.contains("M")) continue;
    std::string shape = j["shape"].get<std::string>();
    if (shape == "kimi_k3_addmm") shape = "kimi_k3_latent.latent_up_residual";
    else if (shape.rfind("qwen3cn_", 0) == 0) shape = "qwen3_coder_next." + shape.substr(8);
    else if (shape.rfind("glm47_", 0) == 0) shape = "glm47." + shape.substr(6);
    else continue;
    if (j.value("E", 1) != 1) continue;
    baseline[{shape, j["M"].get<int64_t>()}] = j["us"].get<double>();
  }
  bench::LinearBenchOptions o;
  o.backends = {"cublas_bf16"};
  o.ms = {1, 2, 4, 8, 16, 32, 64};
  o.repeats = repeats;
  bench::RunInfo info;
  const auto rows = bench::run_linear_bench(o, info);
  int within = 0, compared = 0;
  std::printf("\n%-36s %5s %10s %10s %8s\n", "cuBLAS bf16 shape", "M", "measured", "baseline", "ratio");
  for (const auto& r : rows) {
    const auto it = baseline.find({r.c.shape(), r.c.m});
    if (it == baseline.end() || !r.error.empty()) continue;
    const double ratio = r.t.median_us / it->second;
    ++compared;
    within += std::fabs(ratio - 1) <= 0.10;
    std::printf("%-36s %5lld %10.2f %10.2f %7.3f %s\n", r.c.shape().c_str(), (long long)r.c.m, r.t.median_us,
                it->second, ratio, std::fabs(ratio - 1) <= 0.10 ? "" : "outside 10%");
  }
  std::printf("cuBLAS bf16: %d of %d rows within 10%% of the baselines\n", within, compared);
  ok = ok && compared > 0 && within == compared;
  std::printf("calibration: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 3;
}

}  // namespace

void add_stream_bench_command(CLI::App& app) {
  auto o = std::make_shared<bench::StreamBenchOptions>();
  CLI::App* c = app.add_subcommand("stream-bench", "Forward passes with weights streamed from pinned host memory vs "
                                                   "resident (WeightStreamer + kbit::linear, k = 4)");
  c->add_option("--model", o->model, "glm47 or qwen3_coder_next (dense projections)")->capture_default_str();
  c->add_option("--layers", o->layers, "layers in the synthetic model")->capture_default_str();
  c->add_option("--tokens", o->tokens, "tokens per step")->delimiter(',')->capture_default_str();
  c->add_option("--passes", o->passes, "timed passes (the first is warm-up)")->capture_default_str();
  c->add_option("--slots", o->slots, "ring slots")->capture_default_str();
  c->callback([o] { bench::run_stream_bench(*o); });
}

void add_timing_options(CLI::App* cmd) {
  cmd->add_option_function<double>("--settle-ms", [](double ms) { bench::set_default_settle_ms(ms); },
                                   "untimed replays of each row's work before its samples, in ms (the SM clock follows "
                                   "the power of the work before with a lag; default " +
                                       std::to_string(int(bench::kDefaultSettleMs)) + ")");
  cmd->add_flag_function("--no-record-clocks", [](std::int64_t) { bench::set_clock_recording(false); },
                         "do not sample the SM clock, power and clock event reasons (NVML) while timing; by default "
                         "every row carries them where the driver's NVML is present");
}

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<bench::LinearBenchOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench", "Time y = x W^T on real model shapes for every backend (CUDA graph replay, cold L2, median)");
  bench->add_option("--model", o->models, "glm47, qwen3_coder_next, kimi_k3_latent or all (with --shapes: its models' keys)")
      ->delimiter(',')->capture_default_str();
  auto shapes_path = std::make_shared<std::string>();
  add_shapes_option(bench, *shapes_path);
  bench->add_option("--m", o->ms, "tokens per call")->delimiter(',')->capture_default_str();
  bench->add_option("--bits", o->bits, "kbit bit widths")->delimiter(',')->capture_default_str();
  bench->add_option("--backend", o->backends, "backends (default: cublas_bf16, cublas_fp16, kbit_linear): also kbit_linear_pdl (every call "
                                              "with programmatic dependent launch), kbit_linear_untuned (the heuristic's plan, no tuned table), kbit_gemv, kbit_fused_mma, kbit_wgmma (the fused kernel's wgmma items), kbit_wgmma_tile (the tile kernel), kbit_wgmma_stream (the tile kernel, stream-K), kbit_skinny, kbit_skinny_pdl, "
                                              "kbit_dequant_cublas, cublas_bf16_best (the fastest of cuBLASLt's heuristic candidates for each case, as kbit tune picks the "
                                              "dequant_cublas path's GEMM), fixture_wrong")->delimiter(',');
  bench->add_option("--repeats", o->repeats, "timed samples per row")->capture_default_str();
  bench->add_flag("!--no-routed-moe", o->routed_moe,
                  "skip the routed grouped GEMM rows of MoE projections (the TOTAL then approximates them)");
  bench->add_option("--json", o->json_path, "one JSON object per row");
  bench->add_option("--svg", o->svg_path, "plot of time against M for --plot-shape");
  bench->add_option("--plot-shape", o->svg_shape, "model.projection to plot")->capture_default_str();
  bench->add_option("--plot-bits", o->svg_bits, "bit width of the kbit lines in the plot")->capture_default_str();
  add_timing_options(bench);
  bench->require_subcommand(0, 1);

  struct FormatArgs {
    int64_t rows = 16384, cols = 16384;
    std::string json;
    int repeats = 15;
  };
  auto f = std::make_shared<FormatArgs>();
  CLI::App* fmt = bench->add_subcommand("format", "quantize / dequantize / repack throughput vs HBM bandwidth");
  fmt->add_option("--rows", f->rows, "matrix rows N")->capture_default_str();
  fmt->add_option("--cols", f->cols, "matrix columns K")->capture_default_str();
  fmt->add_option("--json", f->json, "write one JSON object per row to this file");
  fmt->add_option("--repeats", f->repeats, "timed samples per row")->capture_default_str();
  add_timing_options(fmt);
  fmt->callback([f] {
    KBIT_REQUIRE(f->rows > 0 && f->cols > 0 && f->repeats > 0, "bench format: sizes must be positive");
    bench::run_format_bench(f->rows, f->cols, f->json, f->repeats);
  });
  auto had = std::make_shared<FormatArgs>();
  CLI::App* hcmd = bench->add_subcommand("hadamard", "GPU Hadamard rotation: small-M latency, large-tensor bandwidth "
                                                     "vs the copy kernel, cost inside kbit::linear at M = 1");
  hcmd->add_option("--json", had->json, "write one JSON object per row to this file");
  hcmd->add_option("--repeats", had->repeats, "timed samples per row")->capture_default_str();
  add_timing_options(hcmd);
  hcmd->callback([had] {
    KBIT_REQUIRE(had->repeats > 0, "--repeats must be positive");
    bench::run_hadamard_bench(had->json, had->repeats);
  });
  auto moe = std::make_shared<bench::MoeBenchOptions>();
  CLI::App* mcmd = bench->add_subcommand("moe", "grouped expert GEMMs of a model's MoE projections: cuBLAS grouped "
                                                "bf16 against kbit::expert_linear on the same random routing");
  CLI::Option* moe_model = mcmd->add_option("--model", moe->model, "glm47 or qwen3_coder_next (with --shapes: one of its models' keys; default its first)")
                               ->capture_default_str();
  auto moe_shapes = std::make_shared<std::string>();
  add_shapes_option(mcmd, *moe_shapes)
      ->description(shapes_option_help + "; the moe_forward rows need gate+up stacked (moe_gu or "
                                         "experts.gate_up_proj, as kbit shapes lists a checkpoint's) and down (moe_dn or "
                                         "experts.down_proj)");
  mcmd->add_option("--tokens", moe->tokens, "tokens per call")->delimiter(',')->capture_default_str();
  mcmd->add_option("--bits", moe->bits, "kbit bit widths")->delimiter(',')->capture_default_str();
  mcmd->add_option("--repeats", moe->repeats, "timed samples per row")->capture_default_str();
  mcmd->add_option("--seed", moe->seed, "routing seed")->capture_default_str();
  mcmd->add_option("--json", moe->json_path, "one JSON object per row");
  auto moe_items = std::make_shared<std::string>("auto");
  mcmd->add_option("--items", *moe_items,
                   "kbit::expert_linear's item mode: auto, cta, warp, stripes, wgmma or wgmma_tile (anything but auto "
                   "forces the fused or tile kernels)")
      ->capture_default_str();
  mcmd->add_option("--n-tiles", moe->kbit.n_tiles,
                   "token tiles of 8 rows per item (0: from the rows per expert; wgmma_tile 8, 16 or 32)");
  mcmd->add_option("--warps", moe->kbit.warps, "warps per CTA, 4 or 8 (0: the plan's)");
  mcmd->add_option("--tile-rows", moe->kbit.tile_rows,
                   "the grouped GEMV's rows per tile, 1, 2 or 4, or -1 (by each expert's rows: 1, 2 or 4; 0: from the rows per expert)");
  add_timing_options(mcmd);
  mcmd->callback([moe, moe_items, moe_model, moe_shapes] {
    moe->kbit.items = parse_linear_items(*moe_items);
    if (!moe_shapes->empty()) {
      moe->shape_set = read_shape_set(*moe_shapes);
      if (moe_model->count() == 0) moe->model = moe->shape_set.front().key;
    }
    KBIT_REQUIRE(moe->repeats > 0, "--repeats must be positive");
    for (int64_t t : moe->tokens) KBIT_REQUIRE(t >= 1 && t <= 65536, "--tokens values must be 1..65536, got ", t);
    for (int b : moe->bits) require_supported_bits(b);
    bench::run_moe_bench(*moe);
  });
  auto probe = std::make_shared<bench::GemvProbeOptions>();
  CLI::App* pcmd = bench->add_subcommand("gemv-probe", "phase timeline of one GEMV call (cold L2; dense or grouped "
                                                       "experts): per-warp %globaltimer stamps from the kernel");
  pcmd->add_option("--shape", probe->shape, "model.projection of data/shapes.json")->capture_default_str();
  pcmd->add_option("--bits", probe->bits, "bit width 2..5")->capture_default_str();
  pcmd->add_option("--m", probe->m, "tokens: 1..4 (dense), routed tokens (expert projections)")->capture_default_str();
  pcmd->add_option("--iterations", probe->iterations, "probed calls")->capture_default_str();
  pcmd->add_flag("--hot-x", probe->hot_x, "x in L2 at each call (a decode step's activations); weights stay cold");
  pcmd->add_flag("--warm-code", probe->warm_code,
                 "one unprobed call on other weights after the flush: code and x warm, weights cold");
  pcmd->add_option("--tile-rows", probe->tile_rows,
                   "experts: grouped GEMV rows per tile, 1, 2, 4 or -1 (tiles by expert); 0: automatic")
      ->capture_default_str();
  pcmd->add_flag("--per-cta", probe->per_cta, "also print each CTA's exit, x staging and units");
  pcmd->callback([probe] { bench::run_gemv_probe(*probe); });
  auto first_load = std::make_shared<bench::FirstLoadOptions>();
  CLI::App* fcmd = bench->add_subcommand(
      "first-load", "when a kernel's first global loads arrive (cold L2), by width, buffer and what is in flight");
  fcmd->add_option("--iterations", first_load->iterations, "launches per configuration")->capture_default_str();
  fcmd->callback([first_load] { bench::run_first_load_probe(*first_load); });
  auto sprobe = std::make_shared<bench::SkinnyProbeOptions>();
  CLI::App* scmd = bench->add_subcommand("skinny-probe", "phase timeline of skinny GEMM calls (cold L2, back to back): "
                                                         "per-warp %globaltimer stamps from the stream kernel");
  scmd->add_option("--n", sprobe->n, "rows of W")->capture_default_str();
  scmd->add_option("--k", sprobe->k, "columns of W (a multiple of 8)")->capture_default_str();
  scmd->add_option("--m", sprobe->m, "tokens")->capture_default_str();
  scmd->add_option("--config", sprobe->config, "kernel shape (as kbit tune skinny names it); default: the table")
      ->capture_default_str();
  scmd->add_option("--iterations", sprobe->iterations, "probed groups of calls")->capture_default_str();
  scmd->add_option("--chain", sprobe->chain, "calls back to back per group (rotated weights)")->capture_default_str();
  scmd->add_flag("--pdl", sprobe->pdl, "chain the calls with programmatic dependent launch");
  scmd->add_flag("!--no-residual", sprobe->residual, "without the residual");
  scmd->callback([sprobe] { bench::run_skinny_probe(*sprobe); });
  auto repeats = std::make_shared<int>(15);
  CLI::App* cal = bench->add_subcommand("calibrate", "check the timing core: a device copy and cuBLAS bf16 baselines");
  cal->add_option("--repeats", *repeats, "timed samples per row")->capture_default_str();
  add_timing_options(cal);
  cal->callback([repeats] {
    const int rc = calibrate(*repeats);
    if (rc) throw CLI::RuntimeError(rc);
  });

  bench->final_callback([bench, o, shapes_path] {
    if (!bench->get_subcommands().empty()) return;
    KBIT_REQUIRE(o->repeats > 0, "--repeats must be positive");
    if (!shapes_path->empty()) o->shape_set = read_shape_set(*shapes_path);
    bench::RunInfo info;
    const auto rows = bench::run_linear_bench(*o, info);
    write_outputs(rows, info, *o);
  });
}

}  // namespace tools
}  // namespace kbit
