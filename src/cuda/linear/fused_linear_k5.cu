// Instantiations of the fused dequantize + MMA kernel for k = 5 (one file per bit
// width keeps each translation unit's compile time short).
#include "fused_linear.cuh"

namespace kbit::cuda::detail {
void launch_fused_k5(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_fused<5>(a, s, t, stream); }
int fused_occupancy_k5(FusedShape s, DType t) { return fused_occupancy<5>(s, t); }
}  // namespace kbit::cuda::detail
