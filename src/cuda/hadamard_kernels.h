// Which GPU kernel rotates decode-sized p * q rows (p = 12, 20, 28; q = 32..256): for
// tests and benchmarks that compare them. Not part of the public API.
#pragma once

namespace kbit::cuda::detail {

enum class HadamardDecodeKernel {
  automatic,  // what hadamard_rotate picks
  rows,       // one CTA per row, the order-p mix by FADDs
  rows_mma,   // one CTA per row, the order-p mix by mma.sync first (16-bit data; f32 takes rows)
  cluster,    // a cluster of 8 CTAs per row, the mix over distributed shared memory
};

// Process-wide; returns the previous choice. Only p * q rows with q in 32..256 and few
// rows are affected.
HadamardDecodeKernel set_hadamard_decode_kernel(HadamardDecodeKernel k);

}  // namespace kbit::cuda::detail
