// kbit::linear's internals shared inside src/dispatch (workspace, plan helpers).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "cuda/linear/fused_args.h"
#include "dispatch/cublas_gemm.h"
#include "kbit/linear.h"

namespace kbit {

struct LinearWorkspace::Impl {
  Buffer partials, counters, rotated, dequant, lt_workspace;
  int64_t partial_floats = 0, counter_count = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool, bool>, std::unique_ptr<detail::LtGemm>> gemms;
};

namespace detail {

inline constexpr int64_t kMaxPartialRows = 256;  // splits * padded tokens, bounds the partials workspace

int linear_occupancy(int bits, int n_tiles, int warps, bool cta, DType t);
int linear_sm_count();
// The fused kernel's instantiation for a bit width (2..5).
void launch_fused(int bits, const cuda::detail::FusedArgs& a, const cuda::detail::FusedShape& s, DType t,
                  cudaStream_t stream);
// `requested` splits made valid: 1..supertiles, none empty, and no more partial rows
// (splits x padded tokens) than the workspace holds.
int normalize_splits(int requested, int64_t k, int64_t m, int n_tiles);
int linear_heuristic_splits(int64_t m, int64_t n, int64_t k, int bits, int n_tiles, int warps, bool cta, DType t);

}  // namespace detail
}  // namespace kbit
