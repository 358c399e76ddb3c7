#include "kbit/layout.h"

namespace kbit {
std::string_view layout_name(Layout l) { return l == Layout::flat ? "flat" : "tiled_k64"; }
}  // namespace kbit
