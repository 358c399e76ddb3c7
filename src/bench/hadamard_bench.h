// kbit bench hadamard: the GPU rotation's speed (issue 7 targets). Small: M <= 16
// rows of 7168 (row mode, order 28 x 256), per call including launch, graph-replayed.
// Large: a 16384 x 16384 bf16 tensor out of place against the device-copy kernel
// (read + write) in the same run. Fused cost: kbit::linear at M = 1 on glm47.q-like
// shapes with and without a rotation carried by W.
#pragma once

#include <string>

namespace kbit::bench {
void run_hadamard_bench(const std::string& json_path, int repeats);
}
