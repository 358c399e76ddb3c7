// Instantiations of the fused kernel on dense 16-bit weights: the skinny GEMM
// C = A W^T + R of kbit::skinny_gemm (issue 6) and kbit::linear's unquantized path.
#include "fused_linear.cuh"

namespace kbit::cuda::detail {
void launch_fused_dense(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) {
  launch_fused<kDenseWeights>(a, s, t, stream);
}
int fused_occupancy_dense(FusedShape s, DType t) { return fused_occupancy<kDenseWeights>(s, t); }
FusedKernelInfo fused_info_dense(FusedShape s, DType t) { return fused_info<kDenseWeights>(s, t); }
}  // namespace kbit::cuda::detail
