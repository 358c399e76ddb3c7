#include "kbit/layout.h"

namespace kbit {
std::string_view layout_name(Layout l) {
  switch (l) {
    case Layout::flat: return "flat";
    case Layout::tiled_k64: return "tiled_k64";
    case Layout::mma16: return "mma16";
  }
  return "?";
}
}  // namespace kbit
