// A row's clock record (clock_monitor.h) as JSON fields, named with a prefix where a row
// carries several timings (the MoE rows' cuBLAS and kbit). Nothing where none was recorded.
#pragma once

#include <string>

#include "bench/clock_monitor.h"

namespace kbit::bench {

template <class Json>
void add_clock_fields(Json& j, const ClockStats& c, const std::string& prefix = "") {
  if (!c.available) return;
  j[prefix + "sm_mhz_median"] = c.sm_mhz_median;
  j[prefix + "sm_mhz_min"] = c.sm_mhz_min;
  j[prefix + "sm_mhz_max"] = c.sm_mhz_max;
  j[prefix + "sm_mhz_at_start"] = c.sm_mhz_at_start;
  j[prefix + "power_w_median"] = c.power_w_median;
  j[prefix + "power_w_max"] = c.power_w_max;
  j[prefix + "temperature_c_max"] = c.temperature_c_max;
  j[prefix + "clock_event_reasons"] = clock_event_reason_names(c.event_reasons);
  j[prefix + "clock_samples"] = c.samples;
}

}  // namespace kbit::bench
