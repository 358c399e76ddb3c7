// kbit::linear on unquantized 16-bit weights: the skinny GEMM kernel for decode-sized
// M, cuBLASLt above.
#include "core/checks.h"
#include "cuda/device_checks.h"
#include "dispatch/linear_internal.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"

namespace kbit {

void linear(const TensorView& x, const TensorView& w, const MutableTensorView& y, LinearWorkspace& ws,
            cudaStream_t stream, const LinearOptions& o) {
  KBIT_REQUIRE(w.dtype == x.dtype, "linear: dense W is ", dtype_name(w.dtype), " but x is ", dtype_name(x.dtype));
  const int64_t m = x.rows, n = w.rows, k = w.cols;
  // cuBLASLt needs its scratch in the workspace and contiguous operands; at M = 17..32
  // the skinny kernel (slower there) still serves the calls that cuBLASLt cannot.
  const bool contiguous =
      x.stride() == k && w.stride() == k && y.stride() == n && (!o.residual.data || o.residual.stride() == n);
  const bool lt_ready = ws.impl().lt_workspace.size() > 0 && contiguous;
  const bool automatic_skinny = m <= kSkinnyPreferredMaxM || (m <= kMaxSkinnyM && !lt_ready);
  const bool skinny = o.path == LinearPath::fused_mma || (o.path == LinearPath::automatic && automatic_skinny);
  if (skinny) {
    SkinnyOptions so;
    so.residual = o.residual, so.bias = o.bias, so.pdl = o.pdl;
    skinny_gemm(x, w, y, stream, so);  // checks shapes, dtypes and alignment
    return;
  }
  detail::check_activation(x, "linear x");
  detail::check_activation(w, "linear W");
  detail::check_activation(y, "linear y");
  KBIT_REQUIRE(x.cols == k && y.rows == m && y.cols == n && y.dtype == x.dtype, "linear: x [", x.rows, ", ", x.cols,
               "], W [", n, ", ", k, "] and y [", y.rows, ", ", y.cols, "] do not fit");
  detail::check_epilogue(o.residual, o.bias, m, n, x.dtype, "linear");
  KBIT_REQUIRE(contiguous, "linear: the cuBLASLt path needs contiguous x, W, y and residual");
  detail::run_lt_gemm(ws, x, w.data, y, o.residual.data, o.bias, stream);
}

}  // namespace kbit
