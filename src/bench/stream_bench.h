// kbit stream-bench (issue 8): a synthetic model with the real dense layer shapes of
// a model in data/shapes.json at k = 4, run forward through every layer with
// kbit::linear, fully resident versus streamed by WeightStreamer from pinned host
// memory with 0%, 50% and 100% of the layers resident, and from a memory-mapped file
// (written to $TMPDIR, in the page cache) with none resident; prints the link speed, the
// time per pass, the overhead over resident, the achieved host-to-device bandwidth
// and the tokens per step from which streaming costs less than 5%.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit::bench {

struct StreamBenchOptions {
  std::string model = "glm47";
  int layers = 8;
  std::vector<int64_t> tokens{1, 16, 64, 256, 1024, 4096};
  int passes = 5;
  int slots = 2;
};

void run_stream_bench(const StreamBenchOptions& o);

}  // namespace kbit::bench
