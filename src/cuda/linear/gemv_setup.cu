// Host helpers of the CUDA-core GEMV: its shared-memory needs (for the planner, no
// GPU required) and where dynamic shared memory starts in a CTA's window (probed).
#include <array>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string_view>

#include "gemv.cuh"

namespace kbit::cuda::detail {
namespace {

// The base most GPUs report (1 KB reserved per block since sm_80), for planning
// without a GPU; launches use the probed value.
constexpr int64_t kTypicalDynamicBase = 1024;

__global__ void probe_dynamic_smem_base(int* out) {
  extern __shared__ uint8_t smem[];
  *out = int(__cvta_generic_to_shared(smem));
}

}  // namespace

int64_t gemv_smem_bytes(int bits, int64_t m, int64_t k) {
  if (m < 1 || m > kGemvMaxM || bits < 2 || bits > 5) return 0;
  const int64_t total = gemv_smem_map(bits, m, k, kTypicalDynamicBase).total;
  return total <= kGemvMaxSmem ? total : 0;
}

int gemv_class_cost_now(int bits, int c) {
  static const std::array<int, kGemvClasses> forced = [] {
    std::array<int, kGemvClasses> v{0, 0, 0};
    if (const char* e = std::getenv("KBIT_GEMV_CLASS_COSTS")) {
      if (std::sscanf(e, "%d,%d,%d", &v[0], &v[1], &v[2]) != 3 || v[0] <= 0 || v[1] <= 0 || v[2] <= 0)
        throw Error(kbit::detail::concat("KBIT_GEMV_CLASS_COSTS must be three positive integers c0,c1,c2, got '", e, "'"));
    }
    return v;
  }();
  return forced[size_t(c)] > 0 ? forced[size_t(c)] : gemv_class_cost(bits, c);
}

bool gemv_x_bulk(const GemvArgs& a, int64_t x_rows) {
  static const int forced = [] {
    const char* e = std::getenv("KBIT_GEMV_X_BULK");
    if (!e) return -1;
    const std::string_view v(e);
    if (v != "0" && v != "1") throw Error(kbit::detail::concat("KBIT_GEMV_X_BULK must be 0 or 1, got '", e, "'"));
    return v == "1" ? 1 : 0;
  }();
  if (forced == 0 || !a.x_vec || a.K % 8 != 0 || a.x_swiglu) return false;
  return forced == 1 || !a.expert_offsets || x_rows * a.K > kGemvXBulkMinValues;
}

int dynamic_smem_base() {
  static std::mutex mutex;
  static int cached_device = -1, cached_base = 0;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "gemv: current device");
  std::lock_guard<std::mutex> lock(mutex);
  if (device != cached_device) {
    int* d = nullptr;
    check_cuda(cudaMalloc(&d, sizeof(int)), "gemv: probe allocation");
    probe_dynamic_smem_base<<<1, 1, 16>>>(d);
    cudaError_t e = cudaGetLastError();
    int base = 0;
    if (e == cudaSuccess) e = cudaMemcpy(&base, d, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    check_cuda(e, "gemv: probing the shared memory base");
    cached_device = device, cached_base = base;
  }
  return cached_base;
}

}  // namespace kbit::cuda::detail
