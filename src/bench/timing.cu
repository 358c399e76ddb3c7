#include "timing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda/common.cuh"

namespace kbit::bench {

using cuda::detail::check_cuda;

Timing time_graph(const std::function<void(cudaStream_t, int)>& launch, const TimingOptions& o) {
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "bench: stream");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "bench: begin capture");
  for (int i = 0; i < o.calls_per_graph; ++i) launch(stream, i);
  check_cuda(cudaStreamEndCapture(stream, &graph), "bench: end capture");
  check_cuda(cudaGraphInstantiate(&exec, graph, 0), "bench: instantiate");
  for (int i = 0; i < o.warmup_replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "bench: warm-up");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "bench: event");
  check_cuda(cudaEventCreate(&stop), "bench: event");
  Timing t;
  for (int r = 0; r < o.repeats; ++r) {
    check_cuda(cudaEventRecord(start, stream), "bench: record");
    for (int i = 0; i < o.replays; ++i) check_cuda(cudaGraphLaunch(exec, stream), "bench: replay");
    check_cuda(cudaEventRecord(stop, stream), "bench: record");
    check_cuda(cudaEventSynchronize(stop), "bench: sync");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "bench: elapsed");
    t.samples_us.push_back(1000.0 * ms / (double(o.replays) * o.calls_per_graph));
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);

  std::vector<double> s = t.samples_us;
  std::sort(s.begin(), s.end());
  auto pct = [&](double p) { return s[size_t(std::lround(p * double(s.size() - 1)))]; };
  t.median_us = pct(0.5);
  t.p10_us = pct(0.1);
  t.p90_us = pct(0.9);
  t.mean_us = std::accumulate(s.begin(), s.end(), 0.0) / double(s.size());
  double var = 0;
  for (double x : s) var += (x - t.mean_us) * (x - t.mean_us);
  t.cv_pct = s.size() > 1 ? 100.0 * std::sqrt(var / double(s.size() - 1)) / t.mean_us : 0.0;
  return t;
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

int buffers_to_defeat_l2(size_t bytes_per_call) {
  const size_t target = 3 * device_info().l2_bytes;
  return int(std::max<size_t>(1, target / std::max<size_t>(bytes_per_call, 1) + 1));
}

}  // namespace kbit::bench
