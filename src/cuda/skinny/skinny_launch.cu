// kbit::skinny_gemm's launcher: picks the instantiation of skinny_kernel.cuh (loader tma)
// or skinny_stream_kernel.cuh (registers, staged, async) for a dtype and shape (the instantiations
// live in skinny_<dtype>_nt<n>.cu and skinny_stream_<dtype>_nt<n>.cu).
#include <cudaTypedefs.h>

#include "../tensor_map.h"
#include "skinny_kernel.cuh"
#include "skinny_stream_kernel.cuh"

namespace kbit::cuda::detail {

#define KBIT_DECLARE_SKINNY(T, NT)                                                                      \
  extern template void launch_skinny_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t); \
  extern template SkinnyKernelInfo skinny_info_nt<T, NT>(const SkinnyShape&, int);
#define KBIT_DECLARE_SKINNY_STREAM(T, NT)                                                                      \
  extern template void launch_skinny_stream_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t); \
  extern template SkinnyKernelInfo skinny_stream_info_nt<T, NT>(const SkinnyShape&, int64_t, bool);
KBIT_DECLARE_SKINNY(__half, 1)
KBIT_DECLARE_SKINNY(__half, 2)
KBIT_DECLARE_SKINNY(__half, 4)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 1)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 2)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 4)
KBIT_DECLARE_SKINNY_STREAM(__half, 1)
KBIT_DECLARE_SKINNY_STREAM(__half, 2)
KBIT_DECLARE_SKINNY_STREAM(__nv_bfloat16, 1)
KBIT_DECLARE_SKINNY_STREAM(__nv_bfloat16, 2)

namespace {

template <typename F>
auto with_dtype_and_tiles(const SkinnyShape& s, DType t, F&& f) {
  check_skinny_shape(s);
  auto typed = [&]<typename T>() {
    switch (s.n_tiles) {
      case 1: return f.template operator()<T, 1>();
      case 2: return f.template operator()<T, 2>();
      default: return f.template operator()<T, 4>();
    }
  };
  if (t == DType::f16) return typed.template operator()<__half>();
  KBIT_REQUIRE(t == DType::bf16, "skinny kernel: dtype must be F16 or BF16, got ", dtype_name(t));
  return typed.template operator()<__nv_bfloat16>();
}

}  // namespace

void check_skinny_shape(const SkinnyShape& s) {
  KBIT_REQUIRE(s.n_tiles == 1 || s.n_tiles == 2 || s.n_tiles == 4, "skinny kernel: n_tiles must be 1, 2 or 4, got ",
               s.n_tiles);
  KBIT_REQUIRE(s.splits == 1 || s.splits == 2 || s.splits == 4 || s.splits == 8,
               "skinny kernel: splits (cluster size) must be 1, 2, 4 or 8, got ", s.splits);
  KBIT_REQUIRE(s.loader != SkinnyLoader::automatic, "skinny kernel: no loader chosen");
  if (s.loader != SkinnyLoader::tma) {
    const char* l = skinny_loader_name(s.loader);
    KBIT_REQUIRE(s.n_tiles <= 2, "skinny kernel (loader ", l, "): M must be at most 16 (loader tma above)");
    KBIT_REQUIRE(s.warps == 4 || s.warps == 8, "skinny kernel (loader ", l, "): warps must be 4 or 8, got ", s.warps);
    KBIT_REQUIRE(s.stripes == 1 || (s.stripes == 2 && s.loader == SkinnyLoader::async), "skinny kernel (loader ", l,
                 "): stripes must be 1 (or 2 with loader async), got ", s.stripes);
    KBIT_REQUIRE(s.kslice == skinny::kStreamBatchColumnsSmall || s.kslice == skinny::kStreamBatchColumnsLarge,
                 "skinny kernel (loader ", l, "): kslice (columns per batch) must be 64 or 128, got ", s.kslice);
    if (s.loader == SkinnyLoader::async) {
      KBIT_REQUIRE(s.stripes == 1 || s.kslice == 64, "skinny kernel (loader async): two stripes need kslice 64 "
                   "(128 would spill)");
      KBIT_REQUIRE(s.stages >= 2 && s.stages <= 8, "skinny kernel (loader async): stages (tiles in each warp's ring) "
                   "must be 2..8, got ", s.stages);
      return;
    }
    KBIT_REQUIRE(s.stages == 2 || (s.stages == 3 && s.kslice == 64), "skinny kernel (loader ", l,
                 "): stages (batches in flight) must be 2 or 3 (2 with kslice 128), got ", s.stages);
    KBIT_REQUIRE(s.kslice == 64 || s.n_tiles == 1, "skinny kernel (loader ", l,
                 "): kslice 128 is for M <= 8 only (it would spill)");
    return;
  }
  KBIT_REQUIRE(s.warps == 2 || s.warps == 4 || s.warps == 8, "skinny kernel: warps must be 2, 4 or 8, got ", s.warps);
  KBIT_REQUIRE(s.stripes == 1 || s.stripes == 2 || s.stripes == 4, "skinny kernel: stripes must be 1, 2 or 4, got ",
               s.stripes);
  KBIT_REQUIRE(s.stages >= 2 && s.stages <= 8, "skinny kernel: stages must be 2..8, got ", s.stages);
  KBIT_REQUIRE(s.kslice == 128 || s.kslice == 256 || s.kslice == 512,
               "skinny kernel: kslice must be 128, 256 or 512 columns, got ", s.kslice);
}

size_t skinny_shared_bytes(const SkinnyShape& s, int m) {
  if (s.loader != SkinnyLoader::tma)
    return skinny::stream_shared_bytes(s.warps, s.stripes, s.n_tiles, s.kslice, stream_tiles_per_warp(s),
                                       s.loader == SkinnyLoader::async);
  return skinny::shared_bytes(s.warps, s.stripes, s.n_tiles, s.stages, s.kslice, m);
}

int skinny_stream_resident_ctas(const SkinnyShape& s, int m) {
  const size_t by_smem = kSharedBytesPerSm / (skinny_shared_bytes(s, m) + kSharedBytesReservedPerCta);
  return int(std::min<size_t>(size_t(kSkinnyStreamWarpsPerSm / s.warps), by_smem));
}

void launch_skinny(const SkinnyArgs& a, const SkinnyShape& s, DType t, cudaStream_t stream) {
  if (s.loader != SkinnyLoader::tma) {
    const size_t smem = skinny_shared_bytes(s, a.M);
    KBIT_REQUIRE(smem <= kMaxSkinnySharedBytes, "skinny kernel (loader ", skinny_loader_name(s.loader), "): ",
                 s.warps, " warps x ", s.stages, " tiles of 16 x ", s.kslice, " columns need ", smem,
                 " bytes of shared memory per CTA (at most ", kMaxSkinnySharedBytes, ")");
    KBIT_REQUIRE(a.ldw < (int64_t(1) << 27), "skinny kernel (loader ", skinny_loader_name(s.loader),
                 "): W's row stride ", a.ldw, " is too long for its 32-bit offsets (use loader tma)");
    with_dtype_and_tiles(s, t, [&]<typename T, int NT>() {
      if constexpr (NT <= 2) launch_skinny_stream_nt<T, NT>(a, s, stream);
    });
    return;
  }
  const size_t smem = skinny_shared_bytes(s, a.M);
  KBIT_REQUIRE(smem <= kMaxSkinnySharedBytes, "skinny kernel: stages=", s.stages, " x kslice=", s.kslice, " at ",
               16 * s.stripes, " rows + M=", a.M, " needs ", smem, " bytes of shared memory per CTA (at most ",
               kMaxSkinnySharedBytes, ")");
  SkinnyArgs args = a;
  const int box = skinny::box_columns(s.kslice);
  args.w_map = tensor_map_2d(a.w, a.N, a.K, a.ldw, 16 * s.stripes, box, false, "skinny kernel", "W");
  if (a.x_vec) args.x_map = tensor_map_2d(a.x, a.M, a.K, a.ldx, a.M, box, false, "skinny kernel", "A");
  with_dtype_and_tiles(s, t, [&]<typename T, int NT>() { launch_skinny_nt<T, NT>(args, s, stream); });
}

SkinnyKernelInfo skinny_kernel_info(const SkinnyShape& s, DType t, int m, int64_t n, bool pdl) {
  if (s.loader != SkinnyLoader::tma)
    return with_dtype_and_tiles(s, t, [&]<typename T, int NT>() {
      if constexpr (NT <= 2) return skinny_stream_info_nt<T, NT>(s, n, pdl);
      else return SkinnyKernelInfo{};  // not instantiated: check_skinny_shape has refused it
    });
  return with_dtype_and_tiles(s, t, [&]<typename T, int NT>() { return skinny_info_nt<T, NT>(s, m); });
}

}  // namespace kbit::cuda::detail
