// Argument checks shared by the CPU and GPU entry points, so that every path
// rejects bad input with the same message.
#pragma once

#include <string_view>

#include "kbit/error.h"
#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit::detail {

inline void check_float_view(const TensorView& v, std::string_view what) {
  KBIT_REQUIRE(v.rows > 0 && v.cols > 0, what, ": shape must be positive, got [", v.rows, ", ", v.cols, "]");
  KBIT_REQUIRE(v.data != nullptr, what, ": data pointer is null");
  KBIT_REQUIRE(is_weight_float(v.dtype), what, ": dtype ", dtype_name(v.dtype),
               " is not supported (expected F32, F16 or BF16)");
  KBIT_REQUIRE(v.stride() >= v.cols, what, ": row stride ", v.stride(), " is smaller than the row length ", v.cols);
  KBIT_REQUIRE(reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype) == 0, what, ": pointer ", v.data,
               " is not aligned to its ", dtype_size(v.dtype), "-byte ", dtype_name(v.dtype), " elements");
}

inline void check_matrix(const QuantizedMatrix& q, std::string_view what, Memory where) {
  KBIT_REQUIRE(!q.empty(), what, ": the quantized matrix is empty");
  KBIT_REQUIRE(q.memory() == where, what, ": the quantized matrix is in ",
               q.memory() == Memory::host ? "host" : "device", " memory, expected ",
               where == Memory::host ? "host" : "device");
}

inline void check_same_shape(const QuantizedMatrix& q, const TensorView& v, std::string_view what) {
  KBIT_REQUIRE(q.rows() == v.rows && q.cols() == v.cols, what, ": shape mismatch, matrix is [", q.rows(), ", ",
               q.cols(), "] but the tensor is [", v.rows, ", ", v.cols, "]");
}

}  // namespace kbit::detail
