// kbit bench format: GPU quantize / dequantize / repack throughput.
#pragma once

#include <cstdint>
#include <string>

namespace kbit::bench {
void run_format_bench(int64_t rows, int64_t cols, const std::string& json_path, int repeats);
}
