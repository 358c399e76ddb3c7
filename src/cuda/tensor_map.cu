#include "tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "common.cuh"
#include "kbit/error.h"

namespace kbit::cuda::detail {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check_cuda(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found),
               "looking up cuTensorMapEncodeTiled");
    KBIT_REQUIRE(found == cudaDriverEntryPointSuccess && f, "the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

CUtensorMap tensor_map_2d(const void* base, int64_t rows, int64_t cols, int64_t ld, int box_rows, int box_cols,
                          bool swizzle_128b, const char* who, const char* what) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(ld) * 2};
  const cuuint32_t box[2] = {cuuint32_t(box_cols), cuuint32_t(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle_128b ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  KBIT_REQUIRE(r == CUDA_SUCCESS, who, ": encoding the TMA map of ", what, " [", rows, ", ", cols, "] (row stride ", ld,
               ", box ", box_rows, " x ", box_cols, ") failed with CUresult ", int(r));
  return map;
}

}  // namespace kbit::cuda::detail
