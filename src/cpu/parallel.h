// parallel_for over [0, n) in contiguous chunks, one per worker thread. Work is
// split by index only, so results never depend on the number of threads.
#pragma once

#include <cstdint>
#include <functional>

namespace kbit::cpu::detail {

// Calls body(begin, end) on disjoint chunks covering [0, n); `min_chunk` keeps
// small jobs on the calling thread. Exceptions from workers are rethrown.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body);

}  // namespace kbit::cpu::detail
