#include "streaming/parallel_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace kbit::detail {
namespace {

// memcpy into memory nobody reads soon (pinned staging, read next by the DMA engine):
// streaming stores skip the read-for-ownership of every destination line, a third of
// the DRAM traffic of a plain copy, which is what limits 8 copying threads.
void copy_streaming(char* dst, const char* src, size_t n) {
#if defined(__x86_64__)
  const size_t head = std::min(n, size_t((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15));
  std::memcpy(dst, src, head);
  dst += head, src += head, n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // the streaming stores are visible before the part is marked done
#else
  std::memcpy(dst, src, n);
#endif
}

}  // namespace

ParallelCopy::ParallelCopy(int workers, size_t part_bytes, size_t report_bytes)
    : part_bytes_(std::max<size_t>(part_bytes, 4096)), report_bytes_(report_bytes) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { worker_loop(); });
}

ParallelCopy::~ParallelCopy() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

int ParallelCopy::default_workers() {
  const int hw = int(std::thread::hardware_concurrency());
  return std::clamp(hw - 4, 0, 12);
}

void ParallelCopy::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || (open_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      active_.fetch_add(1, std::memory_order_relaxed);
    }
    copy_parts();
    active_.fetch_sub(1, std::memory_order_release);
  }
}

void ParallelCopy::copy_parts() {
  for (;;) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= parts_.size()) return;
    copy_streaming(parts_[i].dst, parts_[i].src, parts_[i].bytes);
    done_[i].store(1, std::memory_order_release);
  }
}

void ParallelCopy::copy(const std::vector<CopyRange>& ranges, const std::function<void(size_t)>& on_prefix) {
  if (ranges.empty()) return;
  char* const base = static_cast<char*>(ranges.front().dst);
  std::vector<Part> parts;
  for (const auto& r : ranges)
    for (size_t off = 0; off < r.bytes; off += part_bytes_)
      parts.push_back({static_cast<char*>(r.dst) + off, static_cast<const char*>(r.src) + off,
                       std::min(part_bytes_, r.bytes - off)});
  const size_t end = size_t(static_cast<char*>(ranges.back().dst) + ranges.back().bytes - base);
  {
    std::lock_guard lock(mutex_);
    parts_ = std::move(parts);
    done_.reset(new std::atomic<uint8_t>[parts_.size()]());
    next_.store(0, std::memory_order_relaxed);
    open_ = true;
    ++generation_;
  }
  wake_.notify_all();
  // The caller copies too; between its parts it reports the complete prefix.
  size_t prefix_parts = 0, reported = 0;
  const auto advance = [&](bool final) {
    while (prefix_parts < parts_.size() && done_[prefix_parts].load(std::memory_order_acquire)) ++prefix_parts;
    const size_t complete = prefix_parts == parts_.size() ? end : size_t(parts_[prefix_parts].dst - base);
    if (complete > reported && (final || complete - reported >= report_bytes_)) on_prefix(complete), reported = complete;
  };
  // Whatever happens (on_prefix may throw), no worker may still be copying when this returns.
  struct Quiesce {
    ParallelCopy& self;
    ~Quiesce() {
      self.next_.store(self.parts_.size(), std::memory_order_relaxed);
      {
        std::lock_guard lock(self.mutex_);
        self.open_ = false;  // a worker waking from now on sits this copy out
      }
      while (self.active_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    }
  } quiesce{*this};
  for (;;) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= parts_.size()) break;
    copy_streaming(parts_[i].dst, parts_[i].src, parts_[i].bytes);
    done_[i].store(1, std::memory_order_release);
    advance(false);
  }
  while (prefix_parts < parts_.size()) {
    advance(false);
    if (prefix_parts < parts_.size()) std::this_thread::yield();
  }
  advance(true);
}

}  // namespace kbit::detail
