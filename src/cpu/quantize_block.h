// One block's quantization by the reference rule (spec: scale byte from the block's absmax,
// then each element's nearest level), shared by cpu::quantize and cpu::stack_rows.
#pragma once

#include <cstdint>

#include "kbit/format.h"

namespace kbit::cpu::detail {

// The E4M4 byte and the 32 indices of block x[0..32) under tensor scale s (a power of two).
uint8_t quantize_block(const float* x, float s, const QuantizeTables& tables, uint8_t* idx);

}  // namespace kbit::cpu::detail
