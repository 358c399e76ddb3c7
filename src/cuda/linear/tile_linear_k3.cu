// Instantiations of the tile kernel (wgmma_tile items) for k = 3, one file per bit width.
#include "tile_linear.cuh"

namespace kbit::cuda::detail {
void launch_tile_k3(const FusedArgs& a, FusedShape s, DType t, cudaStream_t stream) { launch_tile<3>(a, s, t, stream); }
int tile_occupancy_k3(FusedShape s, DType t) { return tile_occupancy<3>(s, t); }
}  // namespace kbit::cuda::detail
