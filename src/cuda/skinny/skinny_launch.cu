// kbit::skinny_gemm's launcher: picks the instantiation of skinny_kernel.cuh for a
// dtype and shape (the instantiations live in skinny_<dtype>_nt<n>.cu).
#include "skinny_kernel.cuh"

namespace kbit::cuda::detail {

#define KBIT_DECLARE_SKINNY(T, NT)                                                                      \
  extern template void launch_skinny_nt<T, NT>(const SkinnyArgs&, const SkinnyShape&, cudaStream_t); \
  extern template SkinnyKernelInfo skinny_info_nt<T, NT>(const SkinnyShape&);
KBIT_DECLARE_SKINNY(__half, 1)
KBIT_DECLARE_SKINNY(__half, 2)
KBIT_DECLARE_SKINNY(__half, 4)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 1)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 2)
KBIT_DECLARE_SKINNY(__nv_bfloat16, 4)

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
  KBIT_REQUIRE(s.warps == 4 || s.warps == 8, "skinny kernel: warps must be 4 or 8, got ", s.warps);
  KBIT_REQUIRE(s.stripes == 1 || s.stripes == 2, "skinny kernel: stripes must be 1 or 2, got ", s.stripes);
  KBIT_REQUIRE(s.splits == 1 || s.splits == 2 || s.splits == 4 || s.splits == 8,
               "skinny kernel: splits (cluster size) must be 1, 2, 4 or 8, got ", s.splits);
  const int lo = s.n_tiles <= 2 ? 4 : 2, work = s.stripes * s.unroll;
  KBIT_REQUIRE(s.unroll >= 1 && (work == lo || work == 2 * lo), "skinny kernel: stripes * unroll must be ", lo, " or ",
               2 * lo, " at n_tiles ", s.n_tiles, ", got ", s.stripes, " * ", s.unroll);
}

void launch_skinny(const SkinnyArgs& a, const SkinnyShape& s, DType t, cudaStream_t stream) {
  with_dtype_and_tiles(s, t, [&]<typename T, int NT>() { launch_skinny_nt<T, NT>(a, s, stream); });
}

SkinnyKernelInfo skinny_kernel_info(const SkinnyShape& s, DType t) {
  return with_dtype_and_tiles(s, t, [&]<typename T, int NT>() { return skinny_info_nt<T, NT>(s); });
}

}  // namespace kbit::cuda::detail
