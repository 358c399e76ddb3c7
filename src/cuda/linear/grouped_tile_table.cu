// The grouped tile kernels' work list (kbit::expert_linear with wgmma_tile items): from the
// device expert offsets, one entry per token tile of a non-empty expert, {expert, first row,
// end row}, and the tile count in entry 0. The fused kernel builds the same table in each
// CTA's shared memory; the tile kernels have none left (their rings and pair table take up
// to 225 of the 227 KB), so one CTA writes it to the workspace just before them, and they
// read one 16-byte entry per item. Launch: 1 CTA of 512 threads, one expert per thread
// (E <= kMaxExperts = 1024: two each). Cost: one small launch ahead of a prefill GEMM.
#include "fused_linear.cuh"

namespace kbit::cuda::detail {

namespace {

__global__ void __launch_bounds__(512) grouped_tile_table_kernel(const int32_t* offsets, int experts, int rows,
                                                                 int32_t rows_total, int4* table, int64_t capacity) {
  __shared__ int32_t tile_start[kbit::kMaxExperts + 1];
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");  // the offsets come from the routing kernel
  build_tile_table(offsets, experts, rows, tile_start);
  const int64_t total = tile_start[experts];
  // Malformed offsets (decreasing) give negative counts: clamp, never write past the buffer.
  if (threadIdx.x == 0) table[0] = make_int4(int(std::max<int64_t>(0, std::min(total, capacity - 1))), 0, 0, 0);
  // Rows clamped to [0, rows_total): the kernels store rows m0 .. end - 1 of y.
  for (int e = int(threadIdx.x); e < experts; e += int(blockDim.x)) {
    const int end = std::min(offsets[e + 1], rows_total);
    int64_t t = tile_start[e];
    for (int m0 = std::max(offsets[e], 0); m0 < end && t + 1 < capacity; m0 += rows, ++t)
      if (t >= 0) table[1 + t] = make_int4(e, m0, end, 0);
  }
}

}  // namespace

void launch_grouped_tile_table(const int32_t* expert_offsets, int experts, int rows, int64_t rows_total, int4* table,
                               int64_t capacity, bool pdl, cudaStream_t stream) {
  KBIT_REQUIRE(experts >= 1 && experts <= kbit::kMaxExperts, "grouped tile table: experts must be 1..",
               kbit::kMaxExperts, ", got ", experts);
  KBIT_REQUIRE(rows > 0 && table && capacity >= 1, "grouped tile table: no table buffer");
  KBIT_REQUIRE(rows_total >= 0 && rows_total < (int64_t(1) << 31), "grouped tile table: ", rows_total, " rows");
  launch_maybe_pdl(grouped_tile_table_kernel, dim3(1), dim3(512), 0, stream, pdl, "grouped tile table launch",
                   expert_offsets, experts, rows, int32_t(rows_total), table, capacity);
}

}  // namespace kbit::cuda::detail
