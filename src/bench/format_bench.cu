// kbit bench format: GPU quantize / dequantize / repack throughput against the
// device's own HBM read and copy bandwidth, measured in the same run.
//
// Bytes counted per call: dequantize = words + scales read + output written;
// quantize = input read once + words + scales written (the kernel reads the
// input twice: absmax pass, then quantize pass); repack = read + written.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "bench/timing.h"
#include "core/build_info.h"
#include "cuda/common.cuh"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "bench/format_bench.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;
constexpr double kReferenceReadTBps = 4.40;  // H200 read ceiling measured for this project

// Uniform +-0.05 from a hash of the index: random, never all zero, reproducible.
template <typename T>
__global__ void fill_random_kernel(T* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = cuda::detail::Element<T>::from_float((float(h & 0xffffff) / 16777216.0f - 0.5f) * 0.1f);
  }
}

void fill_random(void* p, DType t, size_t n, uint32_t seed) {
  cuda::detail::dispatch_float(t, [&]<typename T>() { fill_random_kernel<T><<<1024, 256>>>(static_cast<T*>(p), n, seed); });
  cuda::detail::check_launch("bench: fill");
}

struct Row {
  std::string op, dtype, layout, note;
  int bits = 0;
  int64_t rows = 0, cols = 0;
  int buffers = 1;
  double bytes = 0;
  bench::Timing t;
};

}  // namespace

void run_format_bench(int64_t rows, int64_t cols, const std::string& json_path, int repeats) {
  KBIT_REQUIRE(cuda::device_available(), "kbit bench needs a CUDA GPU: ", cuda::device_description());
  const bench::DeviceInfo dev = bench::device_info();
  bench::TimingOptions opt;
  opt.repeats = repeats;
  opt.calls_per_graph = 4;
  opt.replays = 5;
  std::vector<Row> out;

  // References: streaming read and device-to-device copy of 4 GiB, measured now.
  {
    const size_t bytes = size_t(4) << 30;
    Row r{"hbm_read", "", "", "xor-reduce 4 GiB, 16-byte streaming loads"};
    r.bytes = double(bytes);
    r.t.median_us = double(bytes) / (measure_read_tbps() * 1e6);
    out.push_back(r);
    Buffer a = Buffer::allocate(Memory::device, bytes), b = Buffer::allocate(Memory::device, bytes);
    check_cuda(cudaMemset(a.data(), 1, bytes), "bench: memset");
    Row c{"d2d_copy", "", "", "copy kernel 4 GiB, 16-byte streaming loads and stores, bytes read + written"};
    c.bytes = 2.0 * double(bytes);
    c.t = bench::time_graph([&](cudaStream_t s, int) { launch_copy_kernel(b.data(), a.data(), bytes, s); }, opt);
    out.push_back(c);
  }

  for (DType dt : {DType::bf16, DType::f16, DType::f32}) {
    const size_t in_bytes = size_t(rows * cols) * dtype_size(dt);
    Buffer input = Buffer::allocate(Memory::device, in_bytes);
    fill_random(input.data(), dt, size_t(rows * cols), 1234u);
    check_cuda(cudaDeviceSynchronize(), "bench: fill");
    const TensorView in{input.data(), dt, rows, cols, cols};
    for (int k = 2; k <= 5; ++k) {
      const Codebook cb = Codebook::bnf(k);
      QuantizedMatrix q = cuda::quantize(in, cb, nullptr);
      q.tensor_scale();  // synchronizes, checks status
      QuantizedMatrix tiled = cuda::repack(q, Layout::tiled_k64, nullptr);
      const double qbytes = double(q.storage_bytes());

      Row qr{"quantize", std::string(dtype_name(dt)), "flat", ""};
      qr.bits = k, qr.rows = rows, qr.cols = cols, qr.bytes = double(in_bytes) + qbytes;
      qr.t = bench::time_graph([&](cudaStream_t s, int) { cuda::quantize_into(in, q, s); }, opt);
      out.push_back(qr);

      for (Layout layout : {Layout::flat, Layout::tiled_k64}) {
        const QuantizedMatrix& src = layout == Layout::flat ? q : tiled;
        MutableTensorView o{input.data(), dt, rows, cols, cols};  // dequantize over the input buffer
        Row dr{"dequantize", std::string(dtype_name(dt)), std::string(layout_name(layout)), ""};
        dr.bits = k, dr.rows = rows, dr.cols = cols, dr.bytes = double(src.storage_bytes()) + double(in_bytes);
        dr.t = bench::time_graph([&](cudaStream_t s, int) { cuda::dequantize(src, o, s); }, opt);
        out.push_back(dr);
      }
      if (dt == DType::bf16) {
        Row rr{"repack", "", "flat->tiled_k64", ""};
        rr.bits = k, rr.rows = rows, rr.cols = cols, rr.bytes = double(q.storage_bytes() + tiled.storage_bytes());
        rr.t = bench::time_graph([&](cudaStream_t s, int) { cuda::repack_into(q, tiled, s); }, opt);
        out.push_back(rr);
      }
      fill_random(input.data(), dt, size_t(rows * cols), 1234u);  // dequantize overwrote it
    }
  }

  const double read_tbps = out[0].bytes / out[0].t.median_us / 1e6;
  const double copy_tbps = out[1].bytes / out[1].t.median_us / 1e6;
  std::printf("device: %s (sm_%d%d, %d SMs, %zu MB L2), CUDA runtime %d, commit %s\n", dev.name.c_str(), dev.cc_major,
              dev.cc_minor, dev.sms, dev.l2_bytes >> 20, dev.cuda_runtime, kbit::detail::kGitCommit);
  std::printf("matrix %lld x %lld; every call moves > 3x L2, so one buffer set suffices\n", (long long)rows,
              (long long)cols);
  std::printf("%-11s %-5s %-16s %2s %10s %9s %8s %8s %9s %9s\n", "op", "dtype", "layout", "k", "median us", "p90 us",
              "cv %", "TB/s", "% read", "% copy");
  std::unique_ptr<std::ofstream> json;
  if (!json_path.empty()) json = std::make_unique<std::ofstream>(json_path);
  for (const Row& r : out) {
    const double tbps = r.bytes / r.t.median_us / 1e6;
    std::printf("%-11s %-5s %-16s %2d %10.1f %9.1f %8.2f %8.3f %8.1f%% %8.1f%%\n", r.op.c_str(), r.dtype.c_str(),
                r.layout.c_str(), r.bits, r.t.median_us, r.t.p90_us, r.t.cv_pct, tbps, 100 * tbps / read_tbps,
                100 * tbps / copy_tbps);
    if (json) {
      nlohmann::ordered_json j;
      j["op"] = r.op, j["dtype"] = r.dtype, j["layout"] = r.layout, j["bits"] = r.bits;
      j["rows"] = r.rows, j["cols"] = r.cols, j["bytes"] = r.bytes, j["num_buffers"] = r.buffers;
      j["median_us"] = r.t.median_us, j["p10_us"] = r.t.p10_us, j["p90_us"] = r.t.p90_us;
      j["mean_us"] = r.t.mean_us, j["cv_pct"] = r.t.cv_pct, j["samples_us"] = r.t.samples_us;
      j["TBps"] = tbps, j["frac_measured_read"] = tbps / read_tbps, j["frac_measured_copy"] = tbps / copy_tbps;
      j["frac_4p40"] = tbps / kReferenceReadTBps;
      j["device"] = dev.name, j["compute_capability"] = dev.cc_major * 10 + dev.cc_minor;
      j["cuda_version"] = dev.cuda_runtime, j["commit"] = kbit::detail::kGitCommit;
      if (!r.note.empty()) j["note"] = r.note;
      *json << j.dump() << "\n";
    }
  }
}

}  // namespace kbit::bench
