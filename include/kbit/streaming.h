// Weight streaming (issue 8), first part: the residency planner and the choice of
// source. Given the bytes of each layer (in execution order), the GPU memory the
// caller can give up and what the host has, decide how many leading layers stay
// resident on the GPU, how big the ring of slots for the rest must be, where the
// streamed bytes come from, and how long one pass's transfers take at the link
// speed. Pure host logic: every input is injectable, so it is tested without a GPU.
// The streamer itself is kbit::WeightStreamer (kbit/weight_streamer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit {

enum class StreamSource : uint8_t { automatic, pinned_host, mapped_file, gds };
std::string_view stream_source_name(StreamSource s);
StreamSource parse_stream_source(std::string_view name);  // auto, pinned, mmap, gds

// What the machine offers (measured by the caller, or injected by tests).
struct MemoryFacts {
  int64_t gpu_free_bytes = 0;
  int64_t host_available_bytes = 0;  // RAM that can be pinned without swapping
  bool gds_available = false;        // cuFile usable for the checkpoint's file system
  double link_gbps = 0;              // host-to-device bandwidth, GB/s (measured)
};

struct ResidencyRequest {
  std::vector<int64_t> layer_bytes;  // every layer, in execution order
  int64_t reserve_bytes = 0;         // GPU memory the caller keeps (activations, workspace)
  int slots = 2;                     // ring slots for streamed layers (>= 2)
  StreamSource source = StreamSource::automatic;
  // Host memory left free when pinning every streamed layer (page cache, the rest of the process).
  int64_t host_margin_bytes = int64_t(4) << 30;
};

struct ResidencyPlan {
  int resident_layers = 0;          // layers [0, resident_layers) stay on the GPU
  int slots = 0;                    // ring slots (0 when everything is resident)
  int64_t slot_bytes = 0;           // each slot holds the largest streamed layer
  int64_t resident_bytes = 0;
  int64_t streamed_bytes_per_pass = 0;
  int64_t gpu_bytes = 0;            // resident + ring
  double transfer_ms_per_pass = 0;  // streamed bytes at the link speed
  StreamSource source = StreamSource::automatic;  // resolved; automatic only when nothing streams
  std::string reason;               // why this source
  std::string describe() const;
};

// Throws kbit::Error when even a ring of the requested slots does not fit, or on bad input.
ResidencyPlan plan_residency(const ResidencyRequest& request, const MemoryFacts& facts);

}  // namespace kbit
