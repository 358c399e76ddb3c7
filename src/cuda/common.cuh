// Helpers shared by kbit's CUDA code: error checks, argument checks for device
// pointers, grid sizing, and f32/f16/bf16 element access.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../core/checks.h"
#include "kbit/error.h"
#include "kbit/tensor.h"

namespace kbit::cuda::detail {

inline void check_cuda(cudaError_t err, std::string_view what) {
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear a sticky launch error so the caller may continue
    throw Error(kbit::detail::concat(what, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ")"));
  }
}
inline void check_launch(std::string_view what) { check_cuda(cudaGetLastError(), what); }

// Quotient and remainder of non-negative 32-bit ints in unsigned arithmetic: the signed
// forms add sign fix-ups, and the decode kernels are that sensitive to their instruction
// count (the GEMV's runtime divisions unsigned: 2.4% by geomean over 96 forced rows at
// M = 1, 4; the fused kernel's per-item ones 0.4% at M = 8, 16; H100, 2026-12-06;
// docs/KERNEL_HISTORY.md).
__device__ __forceinline__ int udiv(int a, int b) { return int(uint32_t(a) / uint32_t(b)); }
__device__ __forceinline__ int umod(int a, int b) { return int(uint32_t(a) % uint32_t(b)); }

// The sum of v over lanes 0..lane of the (full) warp: a Hillis-Steele scan, 5 shuffles.
__device__ __forceinline__ int warp_inclusive_sum(int v, int lane) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int o = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

// kernel<<<grid, block, smem, stream>>>(args...), with programmatic dependent launch when
// `pdl` is set: the kernel may then start while the previous one on the stream finishes,
// so it must execute griddepcontrol.wait before it reads what that kernel wrote.
// carveout_percent >= 0: the shared memory carveout of this launch (a launch attribute, so
// each node of a captured graph keeps its own; see even_share_carveout).
template <typename... Params, typename... Args>
void launch_maybe_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      int carveout_percent, std::string_view what, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cudaLaunchAttribute attr[2]{};
  unsigned n = 0;
  if (pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (carveout_percent >= 0) {
    attr[n].id = cudaLaunchAttributePreferredSharedMemoryCarveout;
    attr[n].val.sharedMemCarveout = unsigned(carveout_percent);
    ++n;
  }
  cfg.attrs = attr, cfg.numAttrs = n;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), what);
}
template <typename... Params, typename... Args>
void launch_maybe_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                      std::string_view what, Args&&... args) {
  launch_maybe_pdl(kernel, grid, block, smem, stream, pdl, -1, what, std::forward<Args>(args)...);
}

int sm_count();  // of the current device, cached

// Shared memory of an SM that the carveout divides (sm_90: 228 KB), and what each resident
// CTA takes beyond its dynamic shared memory (1 KB reserved by the system).
inline constexpr size_t kSharedBytesPerSm = 228 * 1024, kSharedBytesReservedPerCta = 1024;

// ceil(ctas / SMs): the CTAs per SM of a grid spread evenly over the SMs.
inline int even_share_per_sm(int64_t ctas) {
  const int64_t sms = sm_count();
  return int((ctas + sms - 1) / sms);
}

// Lets `kernel` take `smem` bytes of dynamic shared memory (needed above 48 KB, and before
// an occupancy query at that size).
template <typename Kernel>
void allow_dynamic_smem(Kernel kernel, size_t smem, std::string_view what) {
  if (smem > 48 * 1024)
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), what);
}

// The carveout (percent) that gives an SM room for `ctas` CTAs of `smem` bytes each.
inline int carveout_for(int ctas, size_t smem) {
  const size_t need = size_t(ctas) * (smem + kSharedBytesReservedPerCta);
  return int(std::min<size_t>(100, (need * 100 + kSharedBytesPerSm - 1) / kSharedBytesPerSm));
}

// CTAs of `kernel` an SM holds at once (the occupancy calculator, with the kernel's own
// carveout preference), cached per kernel, block and shared memory size.
template <typename Kernel>
int resident_ctas_per_sm(Kernel kernel, unsigned threads, size_t smem, std::string_view what) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, unsigned, size_t>, int> cache;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), threads, smem);
  auto it = cache.find(key);
  if (it == cache.end()) {
    int per_sm = 0;
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(threads), smem), what);
    it = cache.emplace(key, per_sm).first;
  }
  return it->second;
}

// For a PDL launch of a grid that fits on the SMs at once: a carveout that leaves room for
// its even share of CTAs per SM (ceil(ctas / SMs)) only, or -1 where the grid takes more
// than one wave or the share is already the occupancy. Without it the next kernel's CTAs,
// launched early into any free room, pile up on some SMs, and an SM's CTAs share its
// bandwidth (skinny GEMM, glm47 o at M = 1, 320 CTAs: 30.7 us isolated, 39.7 chained).
template <typename Kernel>
int even_share_carveout(Kernel kernel, int64_t ctas, unsigned threads, size_t smem, std::string_view what) {
  const int per_sm = resident_ctas_per_sm(kernel, threads, smem, what);
  if (per_sm <= 0 || ctas > int64_t(per_sm) * sm_count()) return -1;
  const int even = even_share_per_sm(ctas);
  return even < per_sm ? carveout_for(even, smem) : -1;
}

// Throws unless p is device (or managed) memory of the current CUDA context.
void check_device_pointer(const void* p, std::string_view what);
inline void check_device_view(const TensorView& v, std::string_view what) {
  kbit::detail::check_float_view(v, what);
  check_device_pointer(v.data, what);
}

bool device_has_wgmma();  // the current device is sm_90 (wgmma code is built for sm_90a only)

// Enough CTAs to fill the machine a few times over, never more than the work needs.
inline unsigned grid_for(int64_t work_items, int threads_per_cta, int ctas_per_sm = 8) {
  const int64_t needed = (work_items + threads_per_cta - 1) / threads_per_cta;
  const int64_t cap = int64_t(sm_count()) * ctas_per_sm;
  return unsigned(needed < cap ? (needed > 0 ? needed : 1) : cap);
}

template <typename T> struct Element;
template <> struct Element<float> {
  static __device__ __forceinline__ float to_float(float v) { return v; }
  static __device__ __forceinline__ float from_float(float v) { return v; }
};
template <> struct Element<__half> {
  static __device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
  static __device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
};
template <> struct Element<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

// d += A B for one m16n8k16 tile (fp16 or bf16 inputs by T, fp32 accumulators): a holds
// the A fragment (rows g and g + 8), b0 and b1 the B fragment, as mma.sync lays them out.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// d = a b: mma_16816 on zeroed accumulators (ptxas reads C as the zero register: the same
// machine code as an asm form with C = 0, compared cubin for cubin).
template <typename T>
__device__ __forceinline__ void mma_16816_zero_c(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  d[0] = d[1] = d[2] = d[3] = 0.0f;
  mma_16816<T>(d, a, b0, b1);
}

// Calls f.template operator()<T>() with T the CUDA type of a float dtype.
template <typename F>
void dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::f32: f.template operator()<float>(); break;
    case DType::f16: f.template operator()<__half>(); break;
    case DType::bf16: f.template operator()<__nv_bfloat16>(); break;
    default: throw Error(kbit::detail::concat("dtype ", dtype_name(t), " is not supported (expected F32, F16 or BF16)"));
  }
}

template <typename F>
void dispatch_bits(int k, F&& f) {
  switch (k) {
    case 2: f.template operator()<2>(); break;
    case 3: f.template operator()<3>(); break;
    case 4: f.template operator()<4>(); break;
    case 5: f.template operator()<5>(); break;
    default: require_supported_bits(k);
  }
}

// Loads 8 consecutive elements [c0, c0+8) of a row as floats; past `cols` reads 0.
// `vec` says the row start is 16-byte aligned, so a full chunk can use wide loads.
template <typename T>
__device__ __forceinline__ void load8(const T* row, int64_t c0, int64_t cols, bool vec, float (&v)[8]) {
  if (vec && c0 + 8 <= cols) {
    if constexpr (sizeof(T) == 4) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(row + c0));
      const float4 b = __ldg(reinterpret_cast<const float4*>(row + c0 + 4));
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
      const uint4 a = __ldg(reinterpret_cast<const uint4*>(row + c0));
      const uint32_t w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        T lo, hi;
        const uint16_t l16 = uint16_t(w[i] & 0xffffu), h16 = uint16_t(w[i] >> 16);
        memcpy(&lo, &l16, 2);
        memcpy(&hi, &h16, 2);
        v[2 * i] = Element<T>::to_float(lo);
        v[2 * i + 1] = Element<T>::to_float(hi);
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = (c0 + i < cols) ? Element<T>::to_float(row[c0 + i]) : 0.0f;
}

// 8 consecutive elements as raw bytes, so that a load can be issued one loop
// iteration ahead of the arithmetic that consumes it (software prefetch).
template <typename T>
struct Raw8 {
  uint4 bits[sizeof(T) / 2];  // 16 bytes for 16-bit types, 32 for float
};

template <typename T>
__device__ __forceinline__ void load_raw8(const T* row, int64_t c0, int64_t cols, bool vec, Raw8<T>& r) {
  if (vec && c0 + 8 <= cols) {
#pragma unroll
    for (int i = 0; i < int(sizeof(T)) / 2; ++i) r.bits[i] = __ldg(reinterpret_cast<const uint4*>(row + c0) + i);
    return;
  }
  T tmp[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (c0 + i < cols) {
      tmp[i] = row[c0 + i];
    } else {
      const uint32_t zero = 0;
      memcpy(&tmp[i], &zero, sizeof(T));
    }
  }
  memcpy(r.bits, tmp, sizeof tmp);
}

template <typename T>
__device__ __forceinline__ void unpack_raw8(const Raw8<T>& r, float (&v)[8]) {
  T tmp[8];
  memcpy(tmp, r.bits, sizeof tmp);
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = Element<T>::to_float(tmp[i]);
}

inline bool aligned16(const void* p, int64_t stride_elems, size_t elem) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && (stride_elems * int64_t(elem)) % 16 == 0;
}

}  // namespace kbit::cuda::detail
