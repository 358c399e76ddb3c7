// kbit demo: the main job on a built-in input. Writes a synthetic checkpoint
// with one transformer block's real projection shapes (data/shapes.json),
// quantizes it at each bit width and reports sizes and quality.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include "commands.h"
#include "cpu/parallel.h"
#include "kbit/convert.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "kbit/shapes.h"

namespace kbit::tools {
namespace fs = std::filesystem;
namespace {

struct DemoTensor {
  std::string name, projection;
  int64_t rows, cols;
};

std::vector<DemoTensor> demo_tensors(const ModelShapes& m, int layers) {
  std::vector<DemoTensor> out;
  for (int l = 0; l < layers; ++l)
    for (const auto& p : m.projections) {
      if (p.experts > 1) {
        // The experts one token is routed to: enough to show the shapes, not the whole model.
        for (int e = 0; e < p.active; ++e)
          out.push_back({detail::concat("model.layers.", l, ".mlp.experts.", e, ".", p.name, ".weight"), p.name, p.N, p.K});
      } else {
        out.push_back({detail::concat("model.layers.", l, ".", p.name, ".weight"), p.name, p.N, p.K});
      }
    }
  return out;
}

// Gaussian weights (sigma 0.02) with 0.1% outliers at 10x, as bf16; one RNG per row.
void fill_weights(std::vector<uint16_t>& w, int64_t rows, int64_t cols, uint64_t seed) {
  w.resize(size_t(rows * cols));
  cpu::detail::parallel_for(rows, 64, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::mt19937_64 rng(seed * 1000003u + uint64_t(r));
      std::normal_distribution<float> normal(0.0f, 0.02f);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (int64_t c = 0; c < cols; ++c) {
        float v = normal(rng);
        if (u(rng) < 0.001f) v *= 10.0f;
        w[size_t(r * cols + c)] = float_to_bf16_bits(v);
      }
    }
  });
}

void write_checkpoint(const fs::path& file, const ModelShapes& m, int layers) {
  const auto tensors = demo_tensors(m, layers);
  const int64_t hidden = m.projections.front().K;
  io::SafetensorsWriter w(file.string());
  w.declare("model.layers.0.input_layernorm.weight", DType::bf16, {hidden});
  for (const auto& t : tensors) w.declare(t.name, DType::bf16, {t.rows, t.cols});
  w.set_metadata("source", "kbit demo: synthetic weights with the shapes of " + m.source);
  w.begin();
  std::vector<uint16_t> norm(static_cast<size_t>(hidden), float_to_bf16_bits(1.0f));
  w.write(std::as_bytes(std::span(norm)));
  std::vector<uint16_t> buf;
  uint64_t seed = 1;
  for (const auto& t : tensors) {
    fill_weights(buf, t.rows, t.cols, seed++);
    w.write(std::as_bytes(std::span(buf)));
  }
  w.finish();
}

void run_demo(const std::string& model_key, const std::string& out_dir, const std::vector<int>& bits_list,
              const std::string& device, int layers) {
  const ModelShapes& m = model_shapes(model_key);
  fs::path dir = out_dir.empty() ? fs::temp_directory_path() / "kbit-demo" : fs::path(out_dir);
  fs::create_directories(dir);
  const fs::path original = dir / "original.safetensors";
  std::printf("kbit demo: %d transformer block(s) of %s\n  %s\n", layers, m.key.c_str(), m.source.c_str());
  std::printf("device: %s\n", cuda::device_available() ? cuda::device_description().c_str()
                                                         : "none (CPU reference path)");
  std::printf("writing synthetic bf16 weights (N(0, 0.02^2), 0.1%% outliers at 10x) to %s\n", original.c_str());
  write_checkpoint(original, m, layers);

  ConvertOptions opt;
  opt.overwrite = true;
  if (device == "cpu") opt.device = DevicePolicy::cpu;
  else if (device == "gpu") opt.device = DevicePolicy::gpu;
  else KBIT_REQUIRE(device == "auto", "--device must be auto, cpu or gpu, got '", device, "'");

  std::map<int, ConvertReport> reports;
  for (int k : bits_list) {
    opt.bits = k;
    const fs::path out = dir / detail::concat("kbit-k", k, ".safetensors");
    reports[k] = convert_checkpoint(original.string(), out.string(), opt);
  }

  const auto tensors = demo_tensors(m, layers);
  std::printf("\n%-12s %8s %6s", "projection", "N x K", "count");
  for (int k : bits_list) std::printf("   SQNR k=%d", k);
  std::printf("\n");
  for (const auto& p : m.projections) {
    std::printf("%-12s %8s %6d", p.name.c_str(), detail::concat(p.N, "x", p.K).c_str(), p.experts > 1 ? p.active : 1);
    for (int k : bits_list) {
      cpu::ErrorStats e;
      for (const auto& t : reports[k].tensors)
        for (const auto& dt : tensors)
          if (dt.name == t.name && dt.projection == p.name) e += t.error;
      std::printf(" %8.2f dB", e.sqnr_db());
    }
    std::printf("\n");
  }

  std::printf("\n%-4s %12s %12s %10s %10s %12s %10s\n", "k", "bf16 MB", "kbit MB", "smaller", "bits/wt", "SQNR dB",
              "time s");
  for (int k : bits_list) {
    const ConvertReport& r = reports[k];
    cpu::ErrorStats e;
    int64_t params = 0;
    uint64_t qbytes = 0, ibytes = 0;
    for (const auto& t : r.tensors)
      if (t.bits) {
        e += t.error;
        params += t.shape[0] * t.shape[1];
        qbytes += t.stored_bytes;
        ibytes += t.original_bytes;
      }
    std::printf("%-4d %12.1f %12.1f %9.2fx %10.3f %12.2f %10.2f (%s)\n", k, ibytes / 1e6, qbytes / 1e6,
                double(ibytes) / double(qbytes), 8.0 * double(qbytes) / double(params), e.sqnr_db(), r.seconds,
                r.used_gpu ? "GPU" : "CPU");
  }
  std::printf("\nfiles in %s; inspect one with: kbit inspect %s --against %s\n", dir.c_str(),
              (dir / detail::concat("kbit-k", bits_list.front(), ".safetensors")).c_str(), original.c_str());
  std::printf("decode speed against cuBLAS bf16: kbit bench --model all (needs a GPU); H200 tables in BENCHMARKS.md\n");
}

}  // namespace

void add_demo_command(CLI::App& app) {
  struct Args {
    std::string model = "qwen3_coder_next", out, device = "auto";
    std::vector<int> bits{2, 3, 4, 5};
    int layers = 1;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("demo", "Quantize a synthetic transformer block at k = 2..5 and report (default)");
  cmd->add_option("--model", args->model, "model shape set from data/shapes.json")->capture_default_str();
  cmd->add_option("--out", args->out, "folder for the files (default: $TMPDIR/kbit-demo)");
  cmd->add_option("--bits", args->bits, "bit widths")->delimiter(',')->capture_default_str();
  cmd->add_option("--device", args->device, "auto, cpu or gpu")->capture_default_str();
  cmd->add_option("--layers", args->layers, "transformer blocks in the synthetic checkpoint")->capture_default_str();
  cmd->callback([args] {
    for (int k : args->bits) require_supported_bits(k);
    KBIT_REQUIRE(!args->bits.empty(), "--bits: give at least one bit width");
    KBIT_REQUIRE(args->layers >= 1 && args->layers <= 1000, "--layers must be 1..1000, got ", args->layers);
    run_demo(args->model, args->out, args->bits, args->device, args->layers);
  });
}

}  // namespace kbit::tools
