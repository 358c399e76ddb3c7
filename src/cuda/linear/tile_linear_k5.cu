// Instantiations of the tile kernel (wgmma_tile items) for k = 5, one file per bit width.
#include "tile_linear.cuh"

namespace kbit::cuda::detail {
void launch_tile_k5(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_tile<5>(a, s, t, stream); }
int tile_occupancy_k5(FusedShape s, DType t) { return tile_occupancy<5>(s, t); }
}  // namespace kbit::cuda::detail
