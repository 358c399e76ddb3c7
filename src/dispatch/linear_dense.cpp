// kbit::linear on unquantized 16-bit weights: the skinny GEMM kernel for decode-sized
// M, cuBLASLt above.
#include <tuple>

#include "core/checks.h"
#include "cuda/device_checks.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_internal.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"

namespace kbit {

void linear(const TensorView& x, const TensorView& w, const MutableTensorView& y, LinearWorkspace& ws,
            cudaStream_t stream, const LinearOptions& o) {
  KBIT_REQUIRE(w.dtype == x.dtype, "linear: dense W is ", dtype_name(w.dtype), " but x is ", dtype_name(x.dtype));
  const int64_t m = x.rows, n = w.rows, k = w.cols;
  const bool skinny = o.path == LinearPath::fused_mma || (o.path == LinearPath::automatic && m <= kMaxSkinnyM);
  if (skinny) {
    SkinnyOptions so;
    so.residual = o.residual, so.bias = o.bias, so.pdl = o.pdl;
    skinny_gemm(x, w, y, stream, so);  // checks shapes, dtypes and alignment
    return;
  }
  detail::check_float_view(x, "linear x");
  detail::check_float_view(w, "linear W");
  detail::check_float_view(y, "linear y");
  KBIT_REQUIRE(x.dtype == DType::f16 || x.dtype == DType::bf16, "linear: x must be F16 or BF16, got ",
               dtype_name(x.dtype));
  for (const void* p : {x.data, w.data, static_cast<const void*>(y.data)})
    cuda::detail::check_device_pointer(p, "linear operand");
  KBIT_REQUIRE(x.cols == k && y.rows == m && y.cols == n && y.dtype == x.dtype, "linear: x [", x.rows, ", ", x.cols,
               "], W [", n, ", ", k, "] and y [", y.rows, ", ", y.cols, "] do not fit");
  const bool contiguous = x.stride() == k && w.stride() == k && y.stride() == n &&
                          (!o.residual.data || (o.residual.stride() == n && o.residual.rows == m &&
                                                o.residual.cols == n && o.residual.dtype == x.dtype));
  KBIT_REQUIRE(contiguous, "linear: the cuBLASLt path needs contiguous x, W, y and an [M, N] residual of x's dtype");
  if (o.bias) cuda::detail::check_device_pointer(o.bias, "linear bias");
  auto& impl = ws.impl();
  KBIT_REQUIRE(impl.lt_workspace.size() > 0, "linear: dense W with M = ", m,
               " runs on cuBLASLt, which needs a workspace created with dequant_path");
  const auto key = std::make_tuple(m, n, k, int(x.dtype), o.residual.data != nullptr, o.bias != nullptr);
  auto& gemm = impl.gemms[key];
  if (!gemm) gemm = std::make_unique<detail::LtGemm>(m, n, k, x.dtype, o.residual.data != nullptr, o.bias != nullptr);
  gemm->run(x.data, w.data, o.residual.data, o.bias, y.data, impl.lt_workspace.data(), impl.lt_workspace.size(), stream);
}

}  // namespace kbit
