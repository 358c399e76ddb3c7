// Host-side checks of device pointers, usable from plain C++ files (common.cuh has the rest).
#pragma once

#include <string_view>

namespace kbit::cuda::detail {
// Throws unless p is device (or managed) memory of the current CUDA context.
void check_device_pointer(const void* p, std::string_view what);
int sm_count();  // of the current device, cached
bool device_has_wgmma();  // the current device is sm_90 (wgmma code is built for sm_90a only)
}  // namespace kbit::cuda::detail
