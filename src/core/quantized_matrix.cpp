#include "kbit/quantized_matrix.h"

#include <cuda_runtime_api.h>

#include <cmath>

#include "kbit/error.h"

namespace kbit {

QuantizedMatrix QuantizedMatrix::allocate(int64_t rows, int64_t cols, const Codebook& codebook, Layout layout,
                                          Memory where) {
  require_quantized_shape(rows, cols);
  QuantizedMatrix q;
  q.geometry_ = Geometry{rows, cols, codebook.bits()};
  q.layout_ = layout;
  q.codebook_ = codebook;
  q.words_ = Buffer::allocate(where, size_t(q.word_count()) * sizeof(uint32_t));
  q.scales_ = Buffer::allocate(where, size_t(q.scale_count()));
  if (where == Memory::device) {
    q.meta_ = Buffer::allocate(Memory::device, sizeof(DeviceMeta));
    DeviceMeta meta{};
    meta.tensor_scale = 1.0f;
    for (int i = 0; i < codebook.levels(); ++i) meta.codebook[i] = codebook[i];
    const cudaError_t err = cudaMemcpy(q.meta_.data(), &meta, sizeof meta, cudaMemcpyHostToDevice);
    KBIT_REQUIRE(err == cudaSuccess, "copying matrix metadata to the device failed: ", cudaGetErrorString(err));
  }
  return q;
}

QuantizedMatrix QuantizedMatrix::borrow_device(int64_t rows, int64_t cols, const Codebook& codebook, Layout layout,
                                               void* words, void* scales, DeviceMeta* meta) {
  require_quantized_shape(rows, cols);
  KBIT_REQUIRE(words && scales && meta, "borrow_device: null words, scales or metadata");
  QuantizedMatrix q;
  q.geometry_ = Geometry{rows, cols, codebook.bits()};
  q.layout_ = layout;
  q.codebook_ = codebook;
  q.words_ = Buffer::borrow(Memory::device, words, size_t(q.word_count()) * sizeof(uint32_t));
  q.scales_ = Buffer::borrow(Memory::device, scales, size_t(q.scale_count()));
  q.meta_ = Buffer::borrow(Memory::device, meta, sizeof(DeviceMeta));
  return q;
}

float QuantizedMatrix::tensor_scale() const {
  if (memory() == Memory::host || !meta_.data()) return tensor_scale_;
  DeviceMeta meta{};
  const cudaError_t err = cudaMemcpy(&meta, meta_.data(), sizeof meta, cudaMemcpyDeviceToHost);
  KBIT_REQUIRE(err == cudaSuccess, "reading matrix metadata from the device failed: ", cudaGetErrorString(err));
  KBIT_REQUIRE(meta.status != kStatusNonFinite,
               "quantize: the input matrix contains NaN or Inf; nothing was quantized (output is all zero)");
  return meta.tensor_scale;
}

void QuantizedMatrix::set_rotation(std::optional<Rotation> r) {
  if (r) require_supported_rotation(*r, cols());
  Buffer signs;
  if (r && !r->signs.empty() && memory() == Memory::device) {
    const size_t bytes = r->signs.size() * sizeof(uint32_t);
    signs = Buffer::allocate(Memory::device, bytes);
    const cudaError_t err = cudaMemcpy(signs.data(), r->signs.data(), bytes, cudaMemcpyHostToDevice);
    KBIT_REQUIRE(err == cudaSuccess, "copying the rotation's signs to the device failed: ", cudaGetErrorString(err));
  }
  rotation_ = std::move(r);
  rotation_signs_ = std::move(signs);
}

void QuantizedMatrix::set_tensor_scale(float s) {
  KBIT_REQUIRE(memory() == Memory::host, "set_tensor_scale: only host matrices hold the scale on the host");
  KBIT_REQUIRE(std::isfinite(s) && s > 0, "tensor scale must be a positive finite float, got ", s);
  tensor_scale_ = s;
}

}  // namespace kbit
