#include "bench/hadamard_bench.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/inputs.h"
#include "core/build_info.h"
#include "bench/timing.h"
#include "cuda/common.cuh"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/hadamard.h"
#include "kbit/linear.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

Buffer device_filled(size_t bytes, int value) {
  Buffer b = Buffer::allocate(Memory::device, bytes);
  check_cuda(cudaMemset(b.data(), value, bytes), "hadamard bench: fill");
  return b;
}

}  // namespace

void run_hadamard_bench(const std::string& json_path, int repeats) {
  KBIT_REQUIRE(cuda::device_available(), "kbit bench hadamard needs a CUDA GPU: ", cuda::device_description());
  const DeviceInfo dev = device_info();
  std::vector<nlohmann::json> rows;
  auto emit = [&](nlohmann::json j, const Timing& t) {
    j["median_us"] = t.median_us, j["p10_us"] = t.p10_us, j["p90_us"] = t.p90_us, j["cv_pct"] = t.cv_pct;
    j["device"] = dev.name, j["commit"] = kbit::detail::kGitCommit;
    rows.push_back(j);
  };
  const double launch_floor = measure_launch_floor_us();
  std::printf("device: %s, launch floor %.2f us\n\n", dev.name.c_str(), launch_floor);

  // Small: M rows of 7168, bf16, a decode step's activations: out of place (as kbit::linear
  // rotates x into its workspace) and in place, row mode and block:128. Row mode twice:
  // signs from the launch's parameters (hadamard_rotate with a host Rotation alone) and
  // from device memory (as kbit::linear passes a device matrix's copy).
  std::printf("%-12s %-8s %-12s %5s %6s %10s\n", "rotation", "signs", "placement", "M", "K", "median us");
  struct SmallCase {
    const char* spec;
    bool device_signs;
  };
  for (const SmallCase sc : {SmallCase{"row", false}, SmallCase{"row", true}, SmallCase{"block:128", false}})
    for (bool in_place : {false, true})
      for (int64_t m : {1, 2, 4, 8, 16}) {
        const int64_t k = 7168;
        const Rotation r = Rotation::parse(sc.spec, k, 1);
        Buffer signs;
        if (sc.device_signs) {
          signs = Buffer::allocate(Memory::device, r.signs.size() * sizeof(uint32_t));
          check_cuda(cudaMemcpy(signs.data(), r.signs.data(), signs.size(), cudaMemcpyHostToDevice),
                     "hadamard bench: signs");
        }
        const int sets = 64;
        std::vector<Buffer> x, y;
        for (int i = 0; i < sets; ++i) x.push_back(device_filled(size_t(m * k) * 2, 0x3c));
        if (!in_place)
          for (int i = 0; i < sets; ++i) y.push_back(device_filled(size_t(m * k) * 2, 0));
        TimingOptions t;
        t.calls_per_graph = sets, t.replays = 20, t.repeats = repeats;
        const Timing tm = time_graph(
            [&](cudaStream_t s, int call) {
              const MutableTensorView v{x[size_t(call % sets)].data(), DType::bf16, m, k};
              const MutableTensorView o{in_place ? v.data : y[size_t(call % sets)].data(), DType::bf16, m, k};
              cuda::hadamard_rotate(v, o, r, false, s, static_cast<const uint32_t*>(signs.data()));
            },
            t);
        const char* placement = in_place ? "in place" : "out of place";
        const char* signs_from = sc.device_signs ? "device" : "launch";
        std::printf("%-12s %-8s %-12s %5lld %6lld %10.2f\n", sc.spec, signs_from, placement, (long long)m,
                    (long long)k, tm.median_us);
        emit({{"case", "small"}, {"rotation", sc.spec}, {"signs", signs_from}, {"placement", placement}, {"m", m},
              {"k", k}},
             tm);
      }

  // Large: 16384 x 16384 bf16 out of place vs the copy kernel.
  {
    const int64_t n = 16384, k = 16384;
    const size_t bytes = size_t(n * k) * 2;
    Buffer in = device_filled(bytes, 0x3c), out = device_filled(bytes, 0);
    TimingOptions t;
    t.calls_per_graph = 2, t.replays = 5, t.repeats = repeats;
    const Timing copy = time_graph([&](cudaStream_t s, int) { launch_copy_kernel(out.data(), in.data(), bytes, s); }, t);
    std::printf("\ncopy kernel %lld x %lld bf16: %.2f us (%.2f TB/s read + write)\n", (long long)n, (long long)k,
                copy.median_us, 2.0 * double(bytes) / copy.median_us / 1e6);
    emit({{"case", "copy"}, {"m", n}, {"k", k}}, copy);
    for (const char* spec : {"block:64", "block:256", "row"}) {
      const Rotation r = Rotation::parse(spec, k, 1);
      const Timing tm = time_graph(
          [&](cudaStream_t s, int) {
            cuda::hadamard_rotate(TensorView{in.data(), DType::bf16, n, k},
                                  MutableTensorView{out.data(), DType::bf16, n, k}, r, false, s);
          },
          t);
      std::printf("rotate %-10s %.2f us = %.0f%% of the copy kernel's bandwidth\n", spec, tm.median_us,
                  100.0 * copy.median_us / tm.median_us);
      emit({{"case", "large"}, {"rotation", spec}, {"m", n}, {"k", k}, {"fraction_of_copy", copy.median_us / tm.median_us}},
           tm);
    }
  }

  // kbit::linear at M = 1 with and without a rotation carried by W (x rotated by its own kernel).
  {
    const int64_t n = 12288, k = 5120;
    Buffer wd = upload(random_bf16(size_t(n * k), 41, 0.05f));
    const QuantizedMatrix flat = cuda::quantize(TensorView{wd.data(), DType::bf16, n, k}, Codebook::bnf(4), nullptr);
    const int sets = std::min(buffers_to_defeat_l2(size_t(flat.storage_bytes())), 32);
    const char* specs[] = {"block:128", "row"};
    std::vector<QuantizedMatrix> mats[3];
    for (int i = 0; i < sets; ++i)
      for (int v = 0; v < 3; ++v) {
        mats[v].push_back(cuda::repack(flat, Layout::mma16, nullptr));
        if (v > 0) mats[v].back().set_rotation(Rotation::parse(specs[v - 1], k, 1));
      }
    Buffer x = device_filled(size_t(k) * 2, 0x3c), y = device_filled(size_t(n) * 2, 0);
    LinearWorkspace ws({1, n, k, false});
    TimingOptions t;
    t.calls_per_graph = std::max(sets, 8), t.replays = 20, t.repeats = repeats;
    Timing times[3];
    for (int v = 0; v < 3; ++v) {
      times[v] = time_graph(
          [&](cudaStream_t s, int call) {
            linear(TensorView{x.data(), DType::bf16, 1, k}, mats[v][size_t(call % sets)],
                   MutableTensorView{y.data(), DType::bf16, 1, n}, ws, s);
          },
          t);
    }
    std::printf("\nkbit::linear M = 1, %lld x %lld, k = 4: %.2f us plain\n", (long long)n, (long long)k,
                times[0].median_us);
    emit({{"case", "linear_plain"}, {"m", 1}, {"n", n}, {"k", k}}, times[0]);
    for (int v = 1; v < 3; ++v) {
      const std::string desc = Rotation::parse(specs[v - 1], k, 1).describe();
      std::printf("  with %-16s rotation: %.2f us (+%.1f%%)\n", desc.c_str(), times[v].median_us,
                  100.0 * (times[v].median_us / times[0].median_us - 1));
      emit({{"case", "linear_rotated"}, {"m", 1}, {"n", n}, {"k", k}, {"rotation", desc},
            {"overhead_pct", 100.0 * (times[v].median_us / times[0].median_us - 1)}},
           times[v]);
    }
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    KBIT_REQUIRE(f.good(), "cannot write ", json_path);
    for (const auto& r : rows) f << r.dump() << "\n";
  }
}

}  // namespace kbit::bench
