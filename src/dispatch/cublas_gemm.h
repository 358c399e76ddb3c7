// y[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) (+ r[M, N]) through cuBLASLt, row-major,
// fp16 or bf16 in and out, fp32 accumulation. The algorithm is chosen once
// at construction (cuBLASLt's heuristic: its first candidate, or another of the first
// kLtMaxCandidates by index, as kbit tune picks for the dequant_cublas path); run() takes the caller's workspace and never
// allocates, so calls are safe to capture in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kbit/dtype.h"

namespace kbit::detail {

inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
// How many of cuBLASLt's heuristic candidates LtGemm asks for (and kbit tune may try).
inline constexpr int kLtMaxCandidates = 8;

class LtGemm {
 public:
  // algo: which of cuBLASLt's heuristic candidates for this problem (0: its first choice). One it does
  // not offer is an error, or with or_first the first candidate (a tuned table's index, tuned on a
  // problem whose list may differ).
  LtGemm(int64_t m, int64_t n, int64_t k, DType dtype, bool residual, bool bias = false, int algo = 0,
         bool or_first = false);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // r (bias) may be null when constructed without a residual (bias); all contiguous.
  void run(const void* x, const void* w, const void* r, const void* bias, void* y, void* workspace,
           size_t workspace_bytes, cudaStream_t stream) const;
  const std::string& config() const { return config_; }
  int candidates() const { return candidates_; }
  // How many candidates cuBLASLt's heuristic offers for this problem (at most kLtMaxCandidates).
  static int candidate_count(int64_t m, int64_t n, int64_t k, DType dtype, bool residual, bool bias = false);

 private:
  void init(int64_t m, int64_t n, int64_t k, DType dtype, int algo, bool or_first);
  void release();
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool residual_, bias_;
  int candidates_ = 0;
  std::string config_;
};

}  // namespace kbit::detail
