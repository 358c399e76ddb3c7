// The kbit container: quantized matrices inside an ordinary safetensors file
// (spec: "Container: safetensors"). For a quantized weight NAME:
//   NAME.kbit_packed (I32 [N, K32/32, k]), NAME.kbit_absmax (U8 [N, K32/32]),
//   NAME.kbit_codebook (F32 [2^k]) and header metadata NAME.kbit =
//   {"k":4,"shape":[N,K],"tensor_scale":0.0078125,"hadamard":null,"codebook":"bnf"},
//   "hadamard" being {"mode":"block"|"row","size":B,"signs":[uint32 words]|null} for rotated weights;
// the file carries kbit.format = "1".
#pragma once

#include <string>
#include <vector>

#include "kbit/quantized_matrix.h"
#include "kbit/safetensors.h"

namespace kbit::io {

inline constexpr const char* kFormatKey = "kbit.format";

// Declares NAME's three tensors (call before SafetensorsWriter::begin()), with the
// rotation the matrix will carry, if any.
void declare_quantized(SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols, int bits,
                       const std::optional<Rotation>& rotation = std::nullopt);
// Writes them, in declaration order, and NAME.kbit; q must be a flat host matrix.
void write_quantized(SafetensorsWriter& w, const std::string& name, const QuantizedMatrix& q);

// Names of the quantized weights in a file (from their NAME.kbit metadata).
std::vector<std::string> quantized_names(const SafetensorsFile& f);
bool is_kbit_tensor_part(const std::string& tensor_name);  // NAME.kbit_packed / _absmax / _codebook
// Loads and validates one quantized weight as a flat host matrix.
QuantizedMatrix load_quantized(const SafetensorsFile& f, const std::string& name);

}  // namespace kbit::io
