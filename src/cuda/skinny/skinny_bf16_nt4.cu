// Instantiations of the skinny GEMM kernel for bf16 with 4 tile(s) of 8 tokens
// (one file per dtype and token-tile count keeps each compile short).
#include "skinny_kernel.cuh"

namespace kbit::cuda::detail {
KBIT_INSTANTIATE_SKINNY(__nv_bfloat16, 4)
}  // namespace kbit::cuda::detail
