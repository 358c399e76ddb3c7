#include "bench/first_load_probe.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "cuda/common.cuh"
#include "kbit/cuda.h"
#include "kbit/error.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

// One CTA of 512 threads per SM, as the GEMV. Per warp, lane 0 stamps %globaltimer at entry
// and when the offsets, x and the first weights are in registers (each stamp waits on its
// data through a comparison).
constexpr int kThreads = 512, kWarps = kThreads / 32, kSlots = 5;  // entry, offsets, x, weights, weights issued
constexpr int kXRowBytes = 3072;  // one GLM-4.7 moe_dn row (K = 1536, bf16); a CTA stages two
constexpr int kMagic = 0x7f7f7f7f;

struct FirstLoadArgs {
  const uint8_t* x = nullptr;  // 8 rows
  const int* offsets = nullptr;  // 161 ints
  const uint2* w = nullptr;      // weights: 15 KB per warp of the grid
  bool x_wide = true, load_x = true, load_offsets = true, weights = false, table = false;
  bool split = false;  // x and the offsets in warps 0-7 only, the weights in warps 8-15 only
  int* sink = nullptr;
  unsigned long long* stamps = nullptr;  // [ctas * kWarps][kSlots]
};

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void __launch_bounds__(kThreads, 1) first_load_kernel(const FirstLoadArgs a) {
  extern __shared__ uint4 table[];
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  unsigned long long* st = a.stamps + (int64_t(blockIdx.x) * kWarps + warp) * kSlots;
  if (lane == 0) st[0] = now();
  // x: the CTA's two rows (rows blockIdx % 7 and + 1), 16 bytes per thread (384 threads) or
  // 4 bytes per thread (the first 2 KB).
  const bool loads_xo = !a.split || warp < kWarps / 2, loads_w = a.weights && (!a.split || warp >= kWarps / 2);
  uint4 xv = make_uint4(0u, 0u, 0u, 0u);
  const uint8_t* xrow = a.x + int64_t(blockIdx.x % 7) * kXRowBytes;
  if (a.load_x && loads_xo && (a.split ? tid % 256 : tid) < 2 * kXRowBytes / 16) {
    if (a.x_wide) {
      xv = __ldg(reinterpret_cast<const uint4*>(xrow) + (a.split ? tid % 256 : tid));
    } else {
      xv.x = __ldg(reinterpret_cast<const unsigned*>(xrow) + (a.split ? tid % 256 : tid));
    }
  }
  int ov = 0;
  if (a.load_offsets && loads_xo && tid % 256 <= 160) ov = a.offsets[tid % 256];
  // The GEMV's first weight requests: 3 units of 4 x 8 bytes per lane and one scale load.
  uint2 wv[15];
  if (loads_w) {
    const uint2* p = a.w + (int64_t(blockIdx.x) * kWarps + warp) * 15 * 128 + lane;
#pragma unroll
    for (int i = 0; i < 15; ++i) wv[i] = __ldcs(p + i * 128);
    if (lane == 0) st[4] = now();
  }
  // The GEMV's decode table: 64 KB of 16-byte shared stores per CTA.
  if (a.table)
    for (int i = tid; i < 4096; i += kThreads) table[i] = make_uint4(unsigned(i), unsigned(i), unsigned(i), unsigned(i));
  int keep = 0;
  if (a.load_offsets && loads_xo) {
    if (ov != kMagic && lane == 0) st[1] = now();
    keep += ov;
  }
  if (a.load_x && loads_xo) {
    if (int(xv.x) != kMagic && lane == 0) st[2] = now();
    keep += int(xv.x);
  }
  if (loads_w) {
    unsigned s = 0;
#pragma unroll
    for (int i = 0; i < 15; ++i) s += wv[i].x;
    if (int(s) != kMagic && lane == 0) st[3] = now();
    keep += int(s);
  }
  if (a.table) {
    __syncthreads();
    keep += int(table[(tid * 7) & 4095].x);
  }
  if (keep == kMagic) *a.sink = keep;  // never: keeps the loads
}

}  // namespace

void run_first_load_probe(const FirstLoadOptions& o) {
  KBIT_REQUIRE(cuda::device_available(), "kbit bench first-load needs a CUDA GPU: ", cuda::device_description());
  KBIT_REQUIRE(o.iterations >= 1, "--iterations must be positive");
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "first-load: SMs");
  const int ctas = sms;
  const size_t w_bytes = size_t(ctas) * kWarps * 15 * 128 * 8;
  Buffer w = Buffer::allocate(Memory::device, w_bytes);
  Buffer x = Buffer::allocate(Memory::device, 8 * kXRowBytes);
  Buffer offsets = Buffer::allocate(Memory::device, 161 * 4);
  Buffer shared_alloc = Buffer::allocate(Memory::device, 4096 + 8 * kXRowBytes);  // offsets and x in one allocation
  Buffer x_touch = Buffer::allocate(Memory::device, 8 * kXRowBytes);
  Buffer flush = Buffer::allocate(Memory::device, size_t(256) << 20);
  Buffer stamps = Buffer::allocate(Memory::device, size_t(ctas) * kWarps * kSlots * 8);
  Buffer sink = Buffer::allocate(Memory::device, 4);
  for (Buffer* b : {&w, &x, &offsets, &shared_alloc})
    check_cuda(cudaMemset(b->data(), 1, b->size()), "first-load: fill");
  check_cuda(cudaFuncSetAttribute(first_load_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536),
             "first-load: shared memory");

  struct Config {
    std::string name;
    bool wide, load_x, load_offsets, weights, table, hot_x, same_alloc, split = false;
  };
  const std::vector<Config> configs{
      {"offsets alone", true, false, true, false, false, false, false},
      {"x alone (16 B per thread)", true, true, false, false, false, false, false},
      {"x alone, 4 B per thread", false, true, false, false, false, false, false},
      {"x alone, in L2", true, true, false, false, false, true, false},
      {"x alone, in the offsets' allocation", true, true, false, false, false, false, true},
      {"x then offsets", true, true, true, false, false, false, false},
      {"x, offsets, decode table", true, true, true, false, true, false, false},
      {"x, offsets, weights", true, true, true, true, false, false, false},
      {"x, offsets, weights, table (the GEMV)", true, true, true, true, true, false, false},
      {"same, x in L2", true, true, true, true, true, true, false},
      {"same, 4 B x", false, true, true, true, true, false, false},
      {"x, offsets in warps 0-7, weights in 8-15", true, true, true, true, false, false, false, true},
  };
  std::printf("first-load: %d CTAs x %d threads, cold L2 (256 MB memset before each launch), %d launches;\n"
              "us from the first warp's entry to the data in registers, medians over warps then launches\n\n",
              ctas, kThreads, o.iterations);
  std::printf("%-40s %10s %10s %10s %10s %10s\n", "config", "offsets", "x", "x p90", "weights", "w issued");
  std::vector<unsigned long long> host(size_t(ctas) * kWarps * kSlots);
  for (const Config& c : configs) {
    FirstLoadArgs a;
    a.x = static_cast<const uint8_t*>(c.same_alloc ? static_cast<uint8_t*>(shared_alloc.data()) + 4096 : x.data());
    a.offsets = static_cast<const int*>(c.same_alloc ? shared_alloc.data() : offsets.data());
    a.w = static_cast<const uint2*>(w.data());
    a.split = c.split;
    a.x_wide = c.wide, a.load_x = c.load_x, a.load_offsets = c.load_offsets, a.weights = c.weights, a.table = c.table;
    a.sink = static_cast<int*>(sink.data());
    a.stamps = static_cast<unsigned long long*>(stamps.data());
    std::vector<double> med[kSlots], p90x;
    for (int it = 0; it < o.iterations; ++it) {
      check_cuda(cudaMemset(flush.data(), it, flush.size()), "first-load: flush");
      if (c.hot_x) check_cuda(cudaMemcpy(x_touch.data(), a.x, x_touch.size(), cudaMemcpyDeviceToDevice), "first-load: x");
      check_cuda(cudaMemset(stamps.data(), 0, stamps.size()), "first-load: clear");
      first_load_kernel<<<ctas, kThreads, c.table ? 65536 : 0>>>(a);
      check_cuda(cudaGetLastError(), "first-load: launch");
      check_cuda(cudaDeviceSynchronize(), "first-load: run");
      check_cuda(cudaMemcpy(host.data(), stamps.data(), stamps.size(), cudaMemcpyDeviceToHost), "first-load: read");
      unsigned long long t0 = ~0ull;
      for (size_t wi = 0; wi < host.size() / kSlots; ++wi)
        if (host[wi * kSlots]) t0 = std::min(t0, host[wi * kSlots]);
      for (int s = 1; s < kSlots; ++s) {
        std::vector<double> at;
        for (size_t wi = 0; wi < host.size() / kSlots; ++wi)
          if (host[wi * kSlots + size_t(s)]) at.push_back(double(host[wi * kSlots + size_t(s)] - t0) * 1e-3);
        med[s].push_back(quantile(at, 0.5));
        if (s == 2) p90x.push_back(quantile(at, 0.9));
      }
    }
    auto cell = [&](int s, bool on) { return on ? quantile(med[s], 0.5) : -1.0; };
    std::printf("%-40s %10.2f %10.2f %10.2f %10.2f %10.2f\n", c.name.c_str(), cell(1, c.load_offsets), cell(2, c.load_x),
                c.load_x ? quantile(p90x, 0.5) : -1.0, cell(3, c.weights), cell(4, c.weights));
  }
  std::printf("\n(-1: not loaded in that configuration)\n");
}

}  // namespace kbit::bench
