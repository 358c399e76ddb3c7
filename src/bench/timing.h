// The timing core every kbit benchmark uses: the work is captured into a CUDA
// graph (calls_per_graph calls, rotating over input buffers so that nothing is
// served from L2), replayed `replays` times between two events per sample, and
// summarised over `repeats` samples after warm-up and a settling period.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/clock_monitor.h"

namespace kbit::bench {

struct Timing {
  double median_us = 0, p10_us = 0, p90_us = 0, mean_us = 0, cv_pct = 0;
  std::vector<double> samples_us;  // per call
  ClockStats clocks;               // over the timed samples (clock_monitor.h)
};

// How long the work is replayed, untimed, before its samples (ms), unless a TimingOptions
// says otherwise: kbit bench's and kbit tune's --settle-ms. Why: the H200 we measure on runs
// into its 700 W software power cap under heavy rows, and its SM clock answers the power of
// the work before with a lag of ~0.5 s (nvidia-smi every 20 ms, 2026-12-03: 1425-1935 MHz
// under the cap, 1965-1980 otherwise). Without settling, an issue-bound kernel timed right
// after heavy work ran up to 37% slower, depending on the rows before it. Heavy rows stay
// under the cap whatever the settling (GLM-4.7 routed moe_gu at T = 8: 1665-1890 MHz, the
// grouped GEMV itself drawing ~650-700 W): Timing::clocks records what each row ran at.
inline constexpr double kDefaultSettleMs = 200.0;
void set_default_settle_ms(double ms);
double default_settle_ms();

struct TimingOptions {
  int calls_per_graph = 8;
  int replays = 10;
  int repeats = 15;
  int warmup_replays = 3;
  double settle_ms = default_settle_ms();  // untimed replays for at least this long after the warm-up
};

// The q-quantile of v (nearest rank; 0 for none): the benchmarks' medians and percentiles.
double quantile(std::vector<double> v, double q);

// launch(stream, call_index) enqueues one call; call_index selects the buffer set.
Timing time_graph(const std::function<void(cudaStream_t, int)>& launch, const TimingOptions& o);

// How many buffer sets of `bytes_per_call` are needed so that the rotation spans
// more than 3x the L2 of the current device (at least 1).
int buffers_to_defeat_l2(size_t bytes_per_call);

// The buffer sets kbit bench and kbit tune rotate a kbit::linear call over:
// buffers_to_defeat_l2, capped at kMaxLinearSets. The cap is high enough that the
// smallest model projection (2048 x 512 at k = 2 with its activations, ~0.3 MB) still
// spans 3x L2: at a cap of 64 (the tune's, until this) or 256 (the bench's) small
// shapes were partly served from L2, so the tune timed them faster than the bench did.
inline constexpr int kMaxLinearSets = 1024;
int linear_rotation_sets(size_t bytes_per_call);

struct DeviceInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0, sms = 0;
  size_t l2_bytes = 0;
  int cuda_runtime = 0;
};
DeviceInfo device_info();

// The roofline references, measured in the run that uses them.
double measure_read_tbps();       // streaming read of 4 GiB (xor-reduce), TB/s
double measure_launch_floor_us();  // one empty kernel per call, graph-replayed, us per call
// A grid-stride 16-byte copy kernel (bytes must be a multiple of 16). A memcpy
// node captured in a graph runs on a copy path about 35% slower on the H200, so
// the copy reference is this kernel.
void launch_copy_kernel(void* dst, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace kbit::bench
