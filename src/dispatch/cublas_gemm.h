// y[M, N] = x[M, K] @ W[N, K]^T (+ bias[N]) (+ r[M, N]) through cuBLASLt, row-major,
// fp16 or bf16 in and out, fp32 accumulation. The algorithm is chosen once
// (heuristic) at construction; run() takes the caller's workspace and never
// allocates, so calls are safe to capture in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kbit/dtype.h"

namespace kbit::detail {

inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

class LtGemm {
 public:
  LtGemm(int64_t m, int64_t n, int64_t k, DType dtype, bool residual, bool bias = false);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // r (bias) may be null when constructed without a residual (bias); all contiguous.
  void run(const void* x, const void* w, const void* r, const void* bias, void* y, void* workspace,
           size_t workspace_bytes, cudaStream_t stream) const;
  const std::string& config() const { return config_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool residual_, bias_;
  std::string config_;
};

}  // namespace kbit::detail
