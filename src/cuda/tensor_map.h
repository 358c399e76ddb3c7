// TMA tensor maps (cuTensorMapEncodeTiled from the driver, found through the runtime: no
// libcuda link) for the kernels that copy 2-D tiles with cp.async.bulk.tensor: the skinny
// GEMM and the tile kernel of kbit::linear.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace kbit::cuda::detail {

// A 2-D map of a row-major 16-bit matrix [rows, cols] (row stride ld elements) in boxes of
// box_rows x box_cols; reads outside the matrix fill zeros. swizzle_128b: the box lands in
// shared memory with the 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8); rows of
// 128 bytes, so box_cols must be 64). `who` and `what` name the caller and the matrix in errors.
CUtensorMap tensor_map_2d(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_rows, int box_cols,
                          bool swizzle_128b, const char* who, const char* what);

}  // namespace kbit::cuda::detail
