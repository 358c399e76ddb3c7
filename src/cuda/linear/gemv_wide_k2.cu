// Instantiations of the decode GEMV for k = 2 at M = 5..16 (the 8- and 16-token instances,
// fp16 and bf16), apart from gemv_k2.cu so that the two compile in parallel.
#include "gemv.cuh"

namespace kbit::cuda::detail {
void launch_gemv_wide_k2(const GemvArgs& a, DType t, cudaStream_t stream) { launch_gemv_wide<2>(a, t, stream); }
}  // namespace kbit::cuda::detail
