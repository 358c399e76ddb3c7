#include "kbit/layout.h"

#include <bit>

#include "kbit/error.h"

namespace kbit {
std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::flat: return "flat";
    case Layout::tiled_k64: return "tiled_k64";
    case Layout::mma16: return "mma16";
  }
  return "?";
}

void require_quantized_shape(int64_t rows, int64_t cols) {
  KBIT_REQUIRE(rows > 0 && cols > 0, "quantized matrix shape must be positive, got [", rows, ", ", cols, "]");
  KBIT_REQUIRE(rows <= kMaxQuantizedDim && cols <= kMaxQuantizedDim &&
                   rows <= kMaxQuantizedElements / cols,
               "quantized matrix shape [", rows, ", ", cols, "] is too large (at most ", kMaxQuantizedDim,
               " per dimension and 2^", std::countr_zero(uint64_t(kMaxQuantizedElements)), " elements)");
}
}  // namespace kbit
