// Instantiations of the tile kernel (wgmma_tile items) for k = 2, one file per bit width.
#include "tile_linear.cuh"

namespace kbit::cuda::detail {
void launch_tile_k2(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_tile<2>(a, s, t, stream); }
int tile_occupancy_k2(FusedShape s, DType t) { return tile_occupancy<2>(s, t); }
}  // namespace kbit::cuda::detail
