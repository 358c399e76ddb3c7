// Instantiations of the skinny GEMM's streaming kernel (loaders registers and staged) for
// f16 with 2 tile(s) of 8 tokens (one file per dtype and token-tile count keeps each
// compile short).
#include "skinny_stream_kernel.cuh"

namespace kbit::cuda::detail {
KBIT_INSTANTIATE_SKINNY_STREAM(__half, 2)
}  // namespace kbit::cuda::detail
