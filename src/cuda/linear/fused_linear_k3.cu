// Instantiations of the fused dequantize + MMA kernel for k = 3 (one file per bit
// width keeps each translation unit's compile time short).
#include "fused_linear.cuh"

namespace kbit::cuda::detail {
void launch_fused_k3(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_fused<3>(a, s, t, stream); }
int fused_occupancy_k3(FusedShape s, DType t) { return fused_occupancy<3>(s, t); }
}  // namespace kbit::cuda::detail
