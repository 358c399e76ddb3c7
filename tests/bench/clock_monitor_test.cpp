// The benchmarks' clock record (bench/clock_monitor.h): reason names, the JSON fields, and
// that a machine without a GPU or NVML gives an empty record instead of failing (host only).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench/clock_json.h"
#include "bench/clock_monitor.h"

namespace kbit::bench {
namespace {

TEST(ClockMonitor, ReasonNames) {
  EXPECT_EQ(clock_event_reason_names(0), "none");
  EXPECT_EQ(clock_event_reason_names(0x4), "sw_power_cap");
  EXPECT_EQ(clock_event_reason_names(0x4 | 0x8 | 0x40), "sw_power_cap+hw_slowdown+hw_thermal");
  EXPECT_EQ(clock_event_reason_names(0x1000 | 0x20), "sw_thermal+other");
}

TEST(ClockMonitor, LimitedOnlyByPowerOrTemperature) {
  ClockStats c;
  c.event_reasons = 0x4;
  EXPECT_FALSE(clock_limited(c));  // nothing recorded
  c.available = true;
  EXPECT_TRUE(clock_limited(c));
  for (uint64_t r : {0x8ull, 0x20ull, 0x40ull, 0x80ull}) {
    c.event_reasons = r;
    EXPECT_TRUE(clock_limited(c)) << r;
  }
  for (uint64_t r : {0x0ull, 0x1ull, 0x2ull, 0x10ull, 0x100ull}) {
    c.event_reasons = r;
    EXPECT_FALSE(clock_limited(c)) << r;
  }
}

TEST(ClockMonitor, JsonFieldsOnlyWhereRecorded) {
  nlohmann::json j = nlohmann::json::object();
  add_clock_fields(j, ClockStats{});
  EXPECT_TRUE(j.empty());
  ClockStats c;
  c.available = true, c.samples = 3, c.sm_mhz_min = 1500, c.sm_mhz_median = 1755, c.sm_mhz_max = 1980;
  c.sm_mhz_at_start = 1410, c.power_w_median = 650.5, c.power_w_max = 700, c.temperature_c_max = 61;
  c.event_reasons = 0x4;
  add_clock_fields(j, c, "kbit_");
  EXPECT_EQ(j["kbit_sm_mhz_median"], 1755);
  EXPECT_EQ(j["kbit_sm_mhz_at_start"], 1410);
  EXPECT_EQ(j["kbit_clock_event_reasons"], "sw_power_cap");
  EXPECT_EQ(j["kbit_clock_samples"], 3);
}

// Without a driver (CI) or with recording off the monitor records nothing and never throws.
TEST(ClockMonitor, StartStopWithoutRecordIsEmpty) {
  set_clock_recording(false);
  ClockMonitor off;
  off.start(0.5);
  off.mark();
  EXPECT_FALSE(off.stop().available);
  set_clock_recording(true);
  ClockMonitor m;
  m.start(0.5);
  m.mark();
  const ClockStats s = m.stop();
  if (s.available) {  // a machine with a GPU and NVML: a plausible clock
    EXPECT_GT(s.samples, 0);
    EXPECT_GT(s.sm_mhz_median, 0);
  }
}

}  // namespace
}  // namespace kbit::bench
