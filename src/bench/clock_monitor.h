// What the GPU's clocks and power did while a benchmark timed its samples, read from
// NVML by a sampling thread. Why: the H200 we measure on runs into its 700 W power cap
// under heavy work and lowers its SM clock with a lag (timing.h), so an issue-bound
// kernel's time depends on the work before it; a row that carries its clocks shows
// whether it was timed at full clock. NVML is loaded at run time (dlopen of
// libnvidia-ml.so.1, which comes with the driver), so that the tools build and run
// without a driver: there every row simply has no clock record. Host code only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace kbit::bench {

struct ClockStats {
  bool available = false;  // false: NVML missing or recording switched off
  int samples = 0;
  double sm_mhz_min = 0, sm_mhz_median = 0, sm_mhz_max = 0;
  double sm_mhz_at_start = 0;  // the first sample after start(), before any settling
  double power_w_median = 0, power_w_max = 0;
  int temperature_c_max = 0;
  // OR of NVML's clock event (throttle) reasons over the samples, GPU idle left out.
  uint64_t event_reasons = 0;
};

// Whether the clocks were held down by power or temperature (software power cap, hardware
// slowdown, thermal limits, power brake) at some sample of the window.
inline bool clock_limited(const ClockStats& c) { return c.available && (c.event_reasons & 0xECull) != 0; }

// The reasons' names, "+"-joined ("sw_power_cap+hw_slowdown"); "none" for 0.
std::string clock_event_reason_names(uint64_t reasons);

// Whether time_graph records clocks (kbit bench's --record-clocks; on by default) and how
// often it samples. Recording never fails a benchmark: without NVML the stats stay empty.
void set_clock_recording(bool on);
bool clock_recording();
inline constexpr double kClockSampleIntervalMs = 2.0;

// Samples the SM clock, power, temperature and event reasons of the current CUDA device
// every interval from start() until stop(); mark() starts the window that stop()
// summarises (time_graph marks the start of its timed samples, after the settling).
class ClockMonitor {
 public:
  ClockMonitor();
  ~ClockMonitor();
  ClockMonitor(const ClockMonitor&) = delete;
  ClockMonitor& operator=(const ClockMonitor&) = delete;
  void start(double interval_ms = kClockSampleIntervalMs);
  void mark();
  ClockStats stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kbit::bench
