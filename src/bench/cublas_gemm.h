// y[M, N] = x[M, K] @ W[N, K]^T (+ r[M, N]) through cuBLASLt, row-major, fp16 or
// bf16 in and out, fp32 accumulation. The algorithm is chosen once (heuristic)
// and the workspace is owned, so calls are safe to capture in a CUDA graph.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "kbit/dtype.h"
#include "kbit/tensor.h"

namespace kbit::bench {

class LtGemm {
 public:
  LtGemm(int64_t m, int64_t n, int64_t k, DType dtype, bool residual);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // r may be null when constructed without a residual.
  void run(const void* x, const void* w, const void* r, void* y, cudaStream_t stream) const;
  const std::string& config() const { return config_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  Buffer workspace_;
  bool residual_;
  std::string config_;
};

}  // namespace kbit::bench
