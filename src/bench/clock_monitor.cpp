#include "bench/clock_monitor.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace kbit::bench {
namespace {

// The few NVML entry points used, declared here (nvml.h is not part of every toolkit
// install); their signatures and constants are NVML's stable C ABI.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlInit = int (*)();
using NvmlHandleByPci = int (*)(const char*, NvmlDevice*);
using NvmlClockInfo = int (*)(NvmlDevice, int, unsigned int*);
using NvmlPower = int (*)(NvmlDevice, unsigned int*);
using NvmlTemperature = int (*)(NvmlDevice, int, unsigned int*);
using NvmlReasons = int (*)(NvmlDevice, unsigned long long*);
constexpr int kNvmlSuccess = 0, kNvmlClockSm = 1, kNvmlTemperatureGpu = 0;
constexpr uint64_t kReasonGpuIdle = 0x1;

struct Nvml {
  bool ok = false;
  NvmlClockInfo clock = nullptr;
  NvmlPower power = nullptr;
  NvmlTemperature temperature = nullptr;
  NvmlReasons reasons = nullptr;
  NvmlHandleByPci handle_by_pci = nullptr;
};

const Nvml& nvml() {
  static const Nvml n = [] {
    Nvml r;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return r;
    auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    r.handle_by_pci = reinterpret_cast<NvmlHandleByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    r.clock = reinterpret_cast<NvmlClockInfo>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    r.power = reinterpret_cast<NvmlPower>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    r.temperature = reinterpret_cast<NvmlTemperature>(dlsym(lib, "nvmlDeviceGetTemperature"));
    r.reasons = reinterpret_cast<NvmlReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (!r.reasons) r.reasons = reinterpret_cast<NvmlReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    r.ok = init && r.handle_by_pci && r.clock && r.power && r.temperature && r.reasons && init() == kNvmlSuccess;
    return r;  // the library stays loaded for the process's life
  }();
  return n;
}

// The NVML handle of the current CUDA device (CUDA's and NVML's device orders can
// differ, the PCI bus id is common to both); null where there is none.
NvmlDevice current_device() {
  const Nvml& n = nvml();
  if (!n.ok) return nullptr;
  int dev = 0;
  char bus[32] = {};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof bus, dev) != cudaSuccess) return nullptr;
  NvmlDevice d = nullptr;
  return n.handle_by_pci(bus, &d) == kNvmlSuccess ? d : nullptr;
}

struct Sample {
  unsigned int sm_mhz = 0, power_mw = 0, temperature_c = 0;
  unsigned long long reasons = 0;
};

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::atomic<bool> g_recording{true};

}  // namespace

std::string clock_event_reason_names(uint64_t reasons) {
  static constexpr std::pair<uint64_t, const char*> kNames[] = {
      {0x1, "gpu_idle"},          {0x2, "applications_clocks"}, {0x4, "sw_power_cap"},
      {0x8, "hw_slowdown"},       {0x10, "sync_boost"},         {0x20, "sw_thermal"},
      {0x40, "hw_thermal"},       {0x80, "hw_power_brake"},     {0x100, "display_clocks"}};
  if (reasons == 0) return "none";
  std::string s;
  auto add = [&](const char* name) {
    if (!s.empty()) s += '+';
    s += name;
  };
  for (const auto& [bit, name] : kNames)
    if (reasons & bit) add(name), reasons &= ~bit;
  if (reasons) add("other");
  return s;
}

void set_clock_recording(bool on) { g_recording = on; }
bool clock_recording() { return g_recording; }

struct ClockMonitor::Impl {
  NvmlDevice device = nullptr;
  std::thread thread;
  std::atomic<bool> running{false};
  std::mutex mutex;
  std::vector<Sample> samples;
  size_t window_start = 0;

  void sample_once() {
    const Nvml& n = nvml();
    Sample s;
    if (n.clock(device, kNvmlClockSm, &s.sm_mhz) != kNvmlSuccess) return;
    n.power(device, &s.power_mw);
    n.temperature(device, kNvmlTemperatureGpu, &s.temperature_c);
    n.reasons(device, &s.reasons);
    std::lock_guard<std::mutex> lock(mutex);
    samples.push_back(s);
  }
};

ClockMonitor::ClockMonitor() : impl_(std::make_unique<Impl>()) {}

ClockMonitor::~ClockMonitor() {
  if (impl_->running) stop();
}

void ClockMonitor::start(double interval_ms) {
  if (impl_->running || !clock_recording()) return;
  impl_->device = current_device();
  if (!impl_->device) return;
  impl_->samples.clear();
  impl_->window_start = 0;
  impl_->running = true;
  const auto interval = std::chrono::microseconds(int64_t(std::max(interval_ms, 0.1) * 1000.0));
  impl_->thread = std::thread([this, interval] {
    while (impl_->running) {
      impl_->sample_once();
      std::this_thread::sleep_for(interval);
    }
  });
}

void ClockMonitor::mark() {
  if (!impl_->running) return;
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->window_start = impl_->samples.size();
}

ClockStats ClockMonitor::stop() {
  ClockStats st;
  if (!impl_->running) return st;
  impl_->sample_once();  // the window's last state, so that even a short window has a sample
  impl_->running = false;
  impl_->thread.join();
  std::vector<double> mhz, watts;
  for (size_t i = impl_->window_start; i < impl_->samples.size(); ++i) {
    const Sample& s = impl_->samples[i];
    mhz.push_back(s.sm_mhz), watts.push_back(s.power_mw / 1000.0);
    st.temperature_c_max = std::max(st.temperature_c_max, int(s.temperature_c));
    st.event_reasons |= s.reasons & ~kReasonGpuIdle;
  }
  if (mhz.empty()) return st;
  st.available = true;
  st.sm_mhz_at_start = impl_->samples.front().sm_mhz;
  st.samples = int(mhz.size());
  st.sm_mhz_min = *std::min_element(mhz.begin(), mhz.end());
  st.sm_mhz_max = *std::max_element(mhz.begin(), mhz.end());
  st.sm_mhz_median = median_of(mhz);
  st.power_w_median = median_of(watts);
  st.power_w_max = *std::max_element(watts.begin(), watts.end());
  return st;
}

}  // namespace kbit::bench
