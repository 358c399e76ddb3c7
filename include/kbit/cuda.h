// GPU versions of the format operations. All work is enqueued on the caller's
// stream and returns without waiting, except where a function says it
// synchronizes. Pointers in views must be device memory aligned to their dtype.
#pragma once

#include <cuda_runtime_api.h>

#include "kbit/cpu.h"
#include "kbit/hadamard.h"
#include "kbit/quantized_matrix.h"
#include "kbit/tensor.h"

namespace kbit::cuda {

// True when a CUDA device can be used; never throws.
bool device_available();
// "NVIDIA H200 (sm_90, 132 SMs)" or the reason there is none.
std::string device_description();

QuantizedMatrix to_device(const QuantizedMatrix& host, cudaStream_t stream = nullptr);
QuantizedMatrix to_host(const QuantizedMatrix& device, cudaStream_t stream = nullptr);  // synchronizes

// Quantize an f32/f16/bf16 device matrix; bytes identical to kbit::cpu::quantize.
// NaN/Inf input is reported when the result is next read on the host.
QuantizedMatrix quantize(const TensorView& w, const Codebook& codebook, cudaStream_t stream,
                         Layout layout = Layout::flat);
void quantize_into(const TensorView& w, QuantizedMatrix& out, cudaStream_t stream);  // out: device, flat

// Into an f32/f16/bf16 device view of N x K, from the flat or tiled layout.
void dequantize(const QuantizedMatrix& q, const MutableTensorView& out, cudaStream_t stream);

QuantizedMatrix repack(const QuantizedMatrix& q, Layout to, cudaStream_t stream);
void repack_into(const QuantizedMatrix& src, QuantizedMatrix& dst, cudaStream_t stream);

// Rotates every row of `in` into `out` (the same buffer for in place) by r, or its
// inverse; f32/f16/bf16 device views of equal shape and dtype; chunks up to 57344.
// device_signs (optional): r.signs already in device memory, as a device QuantizedMatrix
// keeps them (device_rotation_signs()); the decode-row kernel (row mode, p x 2^m, up to
// 64 rows) reads them there instead of from the launch's parameters, which is faster.
void hadamard_rotate(const TensorView& in, const MutableTensorView& out, const Rotation& r, bool inverse,
                     cudaStream_t stream, const uint32_t* device_signs = nullptr);

// Quantization error of q against the device matrix it came from (synchronizes).
cpu::ErrorStats quantization_error(const TensorView& original, const QuantizedMatrix& q, cudaStream_t stream);

}  // namespace kbit::cuda
