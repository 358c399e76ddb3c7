#include "dispatch/cublas_gemm.h"

#include "kbit/error.h"

namespace kbit::detail {
namespace {

void check(cublasStatus_t s, const char* what) {
  KBIT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, "cuBLASLt ", what, " failed: status ", int(s));
}

}  // namespace

// Row-major y = x W^T is column-major y^T = W x^T: A = W (K x N, transposed), B = x (K x M), D = y^T (N x M).
LtGemm::LtGemm(int64_t m, int64_t n, int64_t k, DType dtype, bool residual, bool bias)
    : residual_(residual), bias_(bias) {
  KBIT_REQUIRE(dtype == DType::bf16 || dtype == DType::f16, "cuBLAS GEMM: dtype must be BF16 or F16");
  const cudaDataType_t t = dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  check(cublasLtCreate(&handle_), "create");
  check(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    const cudaDataType_t bt = t;
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt), "bias type");
  }
  check(cublasLtMatrixLayoutCreate(&a_, t, uint64_t(k), uint64_t(n), k), "layout A");
  check(cublasLtMatrixLayoutCreate(&b_, t, uint64_t(k), uint64_t(m), k), "layout B");
  check(cublasLtMatrixLayoutCreate(&c_, t, uint64_t(n), uint64_t(m), n), "layout C");
  cublasLtMatmulPreference_t pref;
  check(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const size_t ws = kLtWorkspaceBytes;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "ws");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  check(cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, c_, pref, 1, &result, &found), "heuristic");
  cublasLtMatmulPreferenceDestroy(pref);
  KBIT_REQUIRE(found > 0, "cuBLASLt found no algorithm for ", m, "x", n, "x", k);
  algo_ = result.algo;
  config_ = std::string("cublasLt heuristic #0, ") + (dtype == DType::bf16 ? "bf16" : "fp16") +
            (residual ? ", beta=1 residual" : "") + (bias ? ", bias epilogue" : "");
}

LtGemm::~LtGemm() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  if (handle_) cublasLtDestroy(handle_);
}

void LtGemm::run(const void* x, const void* w, const void* r, const void* bias, void* y, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) const {
  const float alpha = 1.0f, beta = residual_ ? 1.0f : 0.0f;
  if (bias_)
    check(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "bias pointer");
  check(cublasLtMatmul(handle_, op_, &alpha, w, a_, x, b_, &beta, residual_ ? r : y, c_, y, c_, &algo_, workspace,
                       workspace_bytes, stream),
        "matmul");
}

}  // namespace kbit::detail
