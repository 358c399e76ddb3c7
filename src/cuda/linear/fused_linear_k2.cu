// Instantiations of the fused dequantize + MMA kernel for k = 2 (one file per bit
// width keeps each translation unit's compile time short).
#include "fused_linear.cuh"

namespace kbit::cuda::detail {
void launch_fused_k2(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_fused<2>(a, s, t, stream); }
int fused_occupancy_k2(FusedShape s, DType t) { return fused_occupancy<2>(s, t); }
}  // namespace kbit::cuda::detail
