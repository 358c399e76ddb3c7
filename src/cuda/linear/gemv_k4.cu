// Instantiations of the CUDA-core GEMV for k = 4 (M = 1..4, fp16 and bf16; grouped with tiles of 1, 2, 4 rows or by expert).
#include "gemv.cuh"

namespace kbit::cuda::detail {
void launch_gemv_k4(const GemvArgs& a, DType t, cudaStream_t stream) { launch_gemv<4>(a, t, stream); }
GemvGroupedPlan plan_grouped_gemv_k4(const GemvArgs& a) { return plan_grouped_gemv<4>(a); }
}  // namespace kbit::cuda::detail
