#include "timing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <numeric>

#include "cuda/common.cuh"

namespace kbit::bench {
namespace {

__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads alive; practically never stores
}

__global__ void empty_kernel() {}

__global__ void copy_kernel(uint4* __restrict__ dst, const uint4* __restrict__ src, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    __stcs(dst + i, __ldcs(src + i));
}

std::atomic<double> g_default_settle_ms{kDefaultSettleMs};

}  // namespace

using cuda::detail::check_cuda;

void set_default_settle_ms(double ms) {
  KBIT_REQUIRE(ms >= 0.0 && ms <= 60000.0, "--settle-ms must be 0..60000, got ", ms);
  g_default_settle_ms = ms;
}

double default_settle_ms() { return g_default_settle_ms; }

Timing time_graph(const std::function<void(cudaStream_t, int)>& launch, const TimingOptions& o) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "bench: stream");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "bench: begin capture");
  try {
    for (int i = 0; i < o.calls_per_graph; ++i) launch(stream, i);
  } catch (...) {
    // A call that throws mid-capture (a plan the tune or a candidate cannot run) must not leave the
    // capture open: in thread-local mode it would forbid this thread's later allocations.
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
    cudaGetLastError();
    cudaStreamDestroy(stream);
    throw;
  }
  check_cuda(cudaStreamEndCapture(stream, &graph), "bench: end capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "bench: instantiate");
  ClockMonitor clocks;
  clocks.start();
  for (int i = 0; i < o.warmup_replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "bench: warm-up");
  // Settle: replay until the SM clock has answered this work's own power (timing.h).
  if (o.settle_ms > 0.0) {
    const auto t0 = std::chrono::steady_clock::now();
    do {
      for (int i = 0; i < std::max(o.replays, 1); ++i) check_cuda(cudaGraphLaunch(exec, stream), "bench: settle");
      check_cuda(cudaStreamSynchronize(stream), "bench: settle");
    } while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < o.settle_ms);
  }
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "bench: event");
  check_cuda(cudaEventCreate(&stop), "bench: event");
  Timing t;
  clocks.mark();
  for (int r = 0; r < o.repeats; ++r) {
    check_cuda(cudaEventRecord(start, stream), "bench: record");
    for (int i = 0; i < o.replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "bench: replay");
    check_cuda(cudaEventRecord(stop, stream), "bench: record");
    check_cuda(cudaEventSynchronize(stop), "bench: sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "bench: elapsed");
    t.samples_us.push_back(1000.0 * ms / (double(o.replays) * o.calls_per_graph));
  }
  t.clocks = clocks.stop();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);

  const std::vector<double>& s = t.samples_us;
  t.median_us = quantile(s, 0.5);
  t.p10_us = quantile(s, 0.1);
  t.p90_us = quantile(s, 0.9);
  t.mean_us = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  double var = 0;
  for (double x : s) var += (x - t.mean_us) * (x - t.mean_us);
  t.cv_pct = s.size() > 1 ? 100.0 * std::sqrt(var / double(s.size() - 1)) / t.mean_us : 0.0;
  return t;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

DeviceInfo device_info() {
  DeviceInfo d;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp p{};
  check_cuda(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sms = p.multiProcessorCount;
  d.l2_bytes = size_t(p.l2CacheSize);
  cudaRuntimeGetVersion(&d.cuda_runtime);
  return d;
}

double measure_read_tbps() {
  const size_t bytes = size_t(4) << 30;
  Buffer a = Buffer::allocate(Memory::device, bytes), sink = Buffer::allocate(Memory::device, 4);
  check_cuda(cudaMemset(a.data(), 1, bytes), "bench: memset");
  const int blocks = device_info().sms * 8;
  TimingOptions o;
  o.calls_per_graph = 2;
  o.replays = 3;
  o.repeats = 7;
  const Timing t = time_graph([&](cudaStream_t s, int) {
    read_kernel<<<blocks, 512, 0, s>>>(static_cast<const uint4*>(a.data()), bytes / 16, static_cast<uint32_t*>(sink.data()));
  }, o);
  return double(bytes) / t.median_us / 1e6;
}

void launch_copy_kernel(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  copy_kernel<<<device_info().sms * 8, 512, 0, stream>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src), bytes / 16);
}

double measure_launch_floor_us() {
  TimingOptions o;
  o.calls_per_graph = 100;
  o.replays = 10;
  o.repeats = 11;
  return time_graph([](cudaStream_t s, int) { empty_kernel<<<1, 32, 0, s>>>(); }, o).median_us;
}

int buffers_to_defeat_l2(size_t bytes_per_call) {
  const size_t target = 3 * device_info().l2_bytes;
  return int(std::max<size_t>(1, target / std::max<size_t>(bytes_per_call, 1) + 1));
}

int linear_rotation_sets(size_t bytes_per_call) {
  return std::min(buffers_to_defeat_l2(bytes_per_call), kMaxLinearSets);
}

}  // namespace kbit::bench
