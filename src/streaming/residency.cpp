#include <algorithm>
#include <numeric>

#include "core/enum_names.h"
#include "kbit/error.h"
#include "kbit/streaming.h"

namespace kbit {
namespace {

std::string gib(int64_t b) { return detail::concat(double(b) / double(int64_t(1) << 30), " GiB"); }

constexpr detail::EnumNames<StreamSource, 4> kSourceNames{
    "stream source",
    {{{StreamSource::automatic, "auto"}, {StreamSource::pinned_host, "pinned"}, {StreamSource::mapped_file, "mmap"},
      {StreamSource::gds, "gds"}}}};

}  // namespace

std::string_view stream_source_name(StreamSource s) { return kSourceNames.name(s); }
StreamSource parse_stream_source(std::string_view name) { return kSourceNames.parse(name); }

std::string ResidencyPlan::describe() const {
  if (slots == 0) return detail::concat(resident_layers, " layers resident (", gib(resident_bytes), "), nothing streamed");
  return detail::concat(resident_layers, " layers resident (", gib(resident_bytes), "), the rest streamed through ", slots,
                        " slots of ", gib(slot_bytes), " from ", stream_source_name(source), ": ",
                        gib(streamed_bytes_per_pass), " per pass, ", transfer_ms_per_pass, " ms at the link speed (",
                        reason, ")");
}

ResidencyPlan plan_residency(const ResidencyRequest& r, const MemoryFacts& f) {
  const auto& layers = r.layer_bytes;
  KBIT_REQUIRE(!layers.empty(), "plan_residency: no layers");
  for (size_t i = 0; i < layers.size(); ++i)
    KBIT_REQUIRE(layers[i] > 0, "plan_residency: layer ", i, " has ", layers[i], " bytes");
  KBIT_REQUIRE(r.reserve_bytes >= 0, "plan_residency: reserve must be >= 0, got ", r.reserve_bytes);
  KBIT_REQUIRE(r.slots >= 2, "plan_residency: a ring needs at least 2 slots, got ", r.slots);
  KBIT_REQUIRE(f.gpu_free_bytes >= 0 && f.host_available_bytes >= 0, "plan_residency: negative free memory");
  const int64_t budget = f.gpu_free_bytes - r.reserve_bytes;
  KBIT_REQUIRE(budget > 0, "plan_residency: the reserve (", gib(r.reserve_bytes), ") takes all free GPU memory (",
               gib(f.gpu_free_bytes), ")");
  const int n = int(layers.size());
  // suffix_max[i] = largest layer in [i, n)
  std::vector<int64_t> suffix_max(size_t(n) + 1, 0);
  for (int i = n - 1; i >= 0; --i) suffix_max[size_t(i)] = std::max(suffix_max[size_t(i) + 1], layers[size_t(i)]);
  ResidencyPlan p;
  int64_t prefix = 0;
  int best = -1;
  for (int res = 0; res <= n; ++res) {
    if (res > 0) prefix += layers[size_t(res) - 1];
    const int64_t ring = res == n ? 0 : int64_t(r.slots) * suffix_max[size_t(res)];
    if (prefix + ring <= budget) best = res;  // keep the largest resident prefix that fits
  }
  if (best < 0)
    throw Error(detail::concat("plan_residency: not enough GPU memory: a ring of ", r.slots, " slots of the largest layer (",
                               gib(suffix_max[0]), ") needs ", gib(int64_t(r.slots) * suffix_max[0]), ", and ",
                               gib(budget), " is free after the reserve"));
  p.resident_layers = best;
  p.resident_bytes = std::accumulate(layers.begin(), layers.begin() + best, int64_t(0));
  p.streamed_bytes_per_pass = std::accumulate(layers.begin() + best, layers.end(), int64_t(0));
  if (best == n) {
    p.gpu_bytes = p.resident_bytes;
    p.source = r.source;
    return p;
  }
  p.slots = r.slots;
  p.slot_bytes = suffix_max[size_t(best)];
  p.gpu_bytes = p.resident_bytes + int64_t(p.slots) * p.slot_bytes;
  p.transfer_ms_per_pass = f.link_gbps > 0 ? double(p.streamed_bytes_per_pass) / (f.link_gbps * 1e9) * 1e3 : 0.0;
  const bool fits_in_ram = p.streamed_bytes_per_pass + r.host_margin_bytes <= f.host_available_bytes;
  switch (r.source) {
    case StreamSource::automatic:
      if (fits_in_ram) {
        p.source = StreamSource::pinned_host;
        p.reason = detail::concat("the streamed ", gib(p.streamed_bytes_per_pass), " fit in pinned RAM (",
                                  gib(f.host_available_bytes), " available)");
      } else if (f.gds_available) {
        p.source = StreamSource::gds;
        p.reason = "the streamed layers do not fit in RAM and GPUDirect Storage is available";
      } else {
        p.source = StreamSource::mapped_file;
        p.reason = "the streamed layers do not fit in RAM and GPUDirect Storage is not available: "
                   "memory-mapped file through pinned staging buffers";
      }
      break;
    case StreamSource::pinned_host:
      KBIT_REQUIRE(fits_in_ram, "plan_residency: pinned source forced, but the streamed ", gib(p.streamed_bytes_per_pass),
                   " plus a margin of ", gib(r.host_margin_bytes), " exceed the ", gib(f.host_available_bytes),
                   " of RAM available");
      p.source = r.source, p.reason = "forced";
      break;
    case StreamSource::gds:
      KBIT_REQUIRE(f.gds_available, "plan_residency: GPUDirect Storage forced, but cuFile is not available here");
      p.source = r.source, p.reason = "forced";
      break;
    case StreamSource::mapped_file:
      p.source = r.source, p.reason = "forced";
      break;
  }
  return p;
}

}  // namespace kbit
