#include "parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kbit/cpu.h"
#include "kbit/error.h"

namespace kbit::cpu {
namespace {
std::atomic<int> g_threads{0};
}

void set_num_threads(int n) {
  KBIT_REQUIRE(n >= 0, "set_num_threads: thread count must be >= 0 (0 = all cores), got ", n);
  g_threads = n;
}

int num_threads() {
  const int n = g_threads.load();
  return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency());
}

namespace detail {

void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  const int64_t workers = std::min<int64_t>(num_threads(), std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk)));
  if (workers <= 1) {
    body(0, n);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  std::vector<std::thread> threads;
  threads.reserve(size_t(workers));
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t begin = n * w / workers, end = n * (w + 1) / workers;
    threads.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace detail
}  // namespace kbit::cpu
