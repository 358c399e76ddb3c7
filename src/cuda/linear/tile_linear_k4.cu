// Instantiations of the tile kernel (wgmma_tile items) for k = 4, one file per bit width.
#include "tile_linear.cuh"

namespace kbit::cuda::detail {
void launch_tile_k4(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_tile<4>(a, s, t, stream); }
int tile_occupancy_k4(FusedShape s, DType t) { return tile_occupancy<4>(s, t); }
}  // namespace kbit::cuda::detail
