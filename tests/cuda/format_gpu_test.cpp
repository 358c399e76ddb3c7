// GPU format kernels against the CPU reference: bit-exact bytes and values,
// poisoned outputs, all k, all dtypes, awkward shapes, bad input. Labelled gpu;
// every test skips without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>

#include "kbit/cpu.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "support/test_support.h"

namespace kbit {
namespace {

using test::HostMatrix;
using test::random_matrix;

void ok(cudaError_t e) { ASSERT_EQ(e, cudaSuccess) << cudaGetErrorString(e); }

struct DeviceCopy {
  Buffer buf;
  TensorView view;
  explicit DeviceCopy(const HostMatrix& m) {
    buf = Buffer::allocate(Memory::device, m.bytes.size());
    cudaMemcpy(buf.data(), m.bytes.data(), m.bytes.size(), cudaMemcpyHostToDevice);
    view = TensorView{buf.data(), m.dtype, m.rows, m.cols, m.stride};
  }
};

void expect_same_bytes(const QuantizedMatrix& host_ref, const QuantizedMatrix& device, const std::string& what) {
  const QuantizedMatrix got = cuda::to_host(device);
  ASSERT_EQ(got.layout(), host_ref.layout()) << what;
  EXPECT_EQ(got.tensor_scale(), host_ref.tensor_scale()) << what;
  ASSERT_EQ(got.word_count(), host_ref.word_count());
  for (int64_t i = 0; i < got.word_count(); ++i)
    ASSERT_EQ(got.words()[i], host_ref.words()[i]) << what << " word " << i;
  for (int64_t i = 0; i < got.scale_count(); ++i)
    ASSERT_EQ(got.scales()[i], host_ref.scales()[i]) << what << " scale " << i;
}

std::vector<Codebook> codebooks(int k) {
  std::vector<float> custom(size_t(1) << k);
  for (size_t i = 0; i < custom.size(); ++i) custom[i] = std::sin(float(i) * 2.1f);  // unsorted
  custom[1] = custom[0];                                                            // a duplicate
  return {Codebook::bnf(k), Codebook::nf(k), Codebook::custom(k, custom)};
}

struct Shape {
  int64_t rows, cols, stride;
};
const Shape kShapes[] = {{1, 1, 0}, {3, 31, 0}, {5, 33, 0}, {17, 100, 0}, {64, 4104, 0}, {7, 257, 263}, {300, 512, 0}};

TEST(GpuQuantize, BytesEqualCpuForAllKDtypesAndShapes) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 1;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Shape& s : kShapes)
      for (int k = 2; k <= 5; ++k)
        for (const Codebook& cb : codebooks(k)) {
          const HostMatrix m = random_matrix(s.rows, s.cols, dt, seed++, 0.3f, 0.002, s.stride);
          const DeviceCopy d(m);
          // poison the output: every byte must be written
          QuantizedMatrix q = QuantizedMatrix::allocate(s.rows, s.cols, cb, Layout::flat, Memory::device);
          ok(cudaMemset(q.words(), 0xab, size_t(q.word_count()) * 4));
          ok(cudaMemset(q.scales(), 0xab, size_t(q.scale_count())));
          cuda::quantize_into(d.view, q, nullptr);
          const QuantizedMatrix ref = cpu::quantize(m.view(), cb);
          expect_same_bytes(ref, q,
                            detail::concat(dtype_name(dt), " ", s.rows, "x", s.cols, " k=", k, " ", cb.name()));
        }
}

TEST(GpuQuantize, TiledOutputAndDeterminism) {
  KBIT_SKIP_WITHOUT_GPU();
  const HostMatrix m = random_matrix(129, 333, DType::bf16, 9);
  const DeviceCopy d(m);
  for (int k = 2; k <= 5; ++k) {
    const QuantizedMatrix a = cuda::quantize(d.view, Codebook::bnf(k), nullptr, Layout::tiled_k64);
    const QuantizedMatrix b = cuda::quantize(d.view, Codebook::bnf(k), nullptr, Layout::tiled_k64);
    const QuantizedMatrix ref = cpu::quantize(m.view(), Codebook::bnf(k), Layout::tiled_k64);
    expect_same_bytes(ref, a, "tiled a");
    expect_same_bytes(ref, b, "tiled b");
  }
}

template <typename Fill>
std::vector<uint8_t> device_dequantize(const QuantizedMatrix& q, DType dt, int64_t stride, Fill poison) {
  const size_t bytes = size_t(q.rows() * stride) * dtype_size(dt);
  Buffer out = Buffer::allocate(Memory::device, bytes);
  poison(out.data(), bytes);
  cuda::dequantize(q, MutableTensorView{out.data(), dt, q.rows(), q.cols(), stride}, nullptr);
  std::vector<uint8_t> host(bytes);
  cudaMemcpy(host.data(), out.data(), bytes, cudaMemcpyDeviceToHost);
  return host;
}

TEST(GpuDequantize, BitExactWithCpuFlatAndTiledAllDtypes) {
  KBIT_SKIP_WITHOUT_GPU();
  uint64_t seed = 100;
  for (const Shape& s : kShapes)
    for (int k = 2; k <= 5; ++k)
      for (const Codebook& cb : codebooks(k)) {
        const HostMatrix m = random_matrix(s.rows, s.cols, DType::f32, seed++, 1.0f, 0.01);
        const QuantizedMatrix flat = cpu::quantize(m.view(), cb);
        for (Layout layout : {Layout::flat, Layout::tiled_k64}) {
          const QuantizedMatrix host_q = cpu::repack(flat, layout);
          const QuantizedMatrix dev_q = cuda::to_device(host_q);
          for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
            const int64_t stride = s.stride ? s.stride : s.cols;
            std::vector<uint8_t> ref(size_t(s.rows * stride) * dtype_size(dt), 0xee);
            cpu::dequantize(host_q, MutableTensorView{ref.data(), dt, s.rows, s.cols, stride});
            const auto got = device_dequantize(dev_q, dt, stride, [](void* p, size_t n) { cudaMemset(p, 0xee, n); });
            ASSERT_EQ(got, ref) << s.rows << "x" << s.cols << " k=" << k << " " << cb.name() << " "
                                << layout_name(layout) << " " << dtype_name(dt);
          }
        }
      }
}

TEST(GpuRepack, BothWaysEqualCpuWithPoisonedDestination) {
  KBIT_SKIP_WITHOUT_GPU();
  for (const Shape& s : kShapes)
    for (int k = 2; k <= 5; ++k) {
      const HostMatrix m = random_matrix(s.rows, s.cols, DType::f32, uint64_t(k) + 7);
      const QuantizedMatrix flat = cpu::quantize(m.view(), Codebook::bnf(k));
      const QuantizedMatrix tiled = cpu::repack(flat, Layout::tiled_k64);
      const QuantizedMatrix dflat = cuda::to_device(flat);
      QuantizedMatrix dtiled =
          QuantizedMatrix::allocate(s.rows, s.cols, flat.codebook(), Layout::tiled_k64, Memory::device);
      ok(cudaMemset(dtiled.words(), 0x5a, size_t(dtiled.word_count()) * 4));
      ok(cudaMemset(dtiled.scales(), 0x5a, size_t(dtiled.scale_count())));
      cuda::repack_into(dflat, dtiled, nullptr);
      expect_same_bytes(tiled, dtiled, "flat->tiled");
      QuantizedMatrix back = QuantizedMatrix::allocate(s.rows, s.cols, flat.codebook(), Layout::flat, Memory::device);
      ok(cudaMemset(back.words(), 0x5a, size_t(back.word_count()) * 4));
      cuda::repack_into(dtiled, back, nullptr);
      expect_same_bytes(flat, back, "tiled->flat");
    }
}

TEST(GpuQuantize, NonFiniteInputIsReportedAndOutputIsZero) {
  KBIT_SKIP_WITHOUT_GPU();
  HostMatrix m = random_matrix(4, 64, DType::bf16, 3);
  m.set(3, 63, NAN);
  const DeviceCopy d(m);
  const QuantizedMatrix q = cuda::quantize(d.view, Codebook::bnf(4), nullptr);
  EXPECT_THROW(q.tensor_scale(), Error);
  EXPECT_THROW(cuda::to_host(q), Error);
  m.set(3, 63, -INFINITY);
  const DeviceCopy d2(m);
  EXPECT_THROW(cuda::quantize(d2.view, Codebook::bnf(4), nullptr).tensor_scale(), Error);
}

TEST(GpuFormat, RejectsBadArguments) {
  KBIT_SKIP_WITHOUT_GPU();
  const HostMatrix m = random_matrix(4, 64, DType::bf16, 3);
  const DeviceCopy d(m);
  EXPECT_THROW(cuda::quantize(m.view(), Codebook::bnf(4), nullptr), Error);  // host pointer
  TensorView misaligned = d.view;
  misaligned.data = static_cast<const char*>(d.view.data) + 1;
  misaligned.cols = 32;
  EXPECT_THROW(cuda::quantize(misaligned, Codebook::bnf(4), nullptr), Error);
  TensorView wrong_dtype = d.view;
  wrong_dtype.dtype = DType::i16;
  EXPECT_THROW(cuda::quantize(wrong_dtype, Codebook::bnf(4), nullptr), Error);
  TensorView empty = d.view;
  empty.rows = 0;
  EXPECT_THROW(cuda::quantize(empty, Codebook::bnf(4), nullptr), Error);
  const QuantizedMatrix q = cuda::quantize(d.view, Codebook::bnf(4), nullptr);
  Buffer out = Buffer::allocate(Memory::device, 4 * 65 * 4);
  EXPECT_THROW(cuda::dequantize(q, MutableTensorView{out.data(), DType::f32, 4, 65}, nullptr), Error);
  std::vector<float> host(4 * 64);
  EXPECT_THROW(cuda::dequantize(q, MutableTensorView{host.data(), DType::f32, 4, 64}, nullptr), Error);
  const QuantizedMatrix hq = cpu::quantize(m.view(), Codebook::bnf(4));
  EXPECT_THROW(cuda::dequantize(hq, MutableTensorView{out.data(), DType::f32, 4, 64}, nullptr), Error);
  QuantizedMatrix other = QuantizedMatrix::allocate(4, 64, Codebook::bnf(3), Layout::tiled_k64, Memory::device);
  EXPECT_THROW(cuda::repack_into(q, other, nullptr), Error);
}

TEST(GpuFormat, QuantizationErrorMatchesCpu) {
  KBIT_SKIP_WITHOUT_GPU();
  const HostMatrix m = random_matrix(77, 300, DType::f16, 5);
  const DeviceCopy d(m);
  const QuantizedMatrix q = cuda::quantize(d.view, Codebook::nf(3), nullptr);
  const cpu::ErrorStats g = cuda::quantization_error(d.view, q, nullptr);
  const cpu::ErrorStats c = cpu::quantization_error(m.view(), cuda::to_host(q));
  EXPECT_EQ(g.count, c.count);
  EXPECT_NEAR(g.sum_sq_error / c.sum_sq_error, 1.0, 1e-9);
  EXPECT_NEAR(g.sum_sq_ref / c.sum_sq_ref, 1.0, 1e-9);
}

// 64-bit indexing: a 151936 x 5120 embedding (778M weights) through quantize and dequantize.
TEST(GpuFormat, LargeEmbedding151936x5120) {
  KBIT_SKIP_WITHOUT_GPU();
  const int64_t rows = 151936, cols = 5120;
  HostMatrix m{std::vector<uint8_t>(size_t(rows * cols) * 2), DType::bf16, rows, cols, cols};
  uint16_t* p = reinterpret_cast<uint16_t*>(m.bytes.data());
  uint32_t h = 12345;
  for (int64_t i = 0; i < rows * cols; ++i) {
    h = h * 1664525u + 1013904223u;
    p[i] = float_to_bf16_bits((float(h >> 8) / 16777216.0f - 0.5f) * (i % 977 == 0 ? 2.0f : 0.1f));
  }
  const DeviceCopy d(m);
  const QuantizedMatrix q = cuda::quantize(d.view, Codebook::bnf(5), nullptr);
  const QuantizedMatrix ref = cpu::quantize(m.view(), Codebook::bnf(5));
  expect_same_bytes(ref, q, "embedding");
  // dequantize the tiled copy on the GPU, compare the last rows with the CPU
  const QuantizedMatrix tiled = cuda::repack(q, Layout::tiled_k64, nullptr);
  Buffer out = Buffer::allocate(Memory::device, size_t(rows * cols) * 2);
  cudaMemset(out.data(), 0xff, size_t(rows * cols) * 2);
  cuda::dequantize(tiled, MutableTensorView{out.data(), DType::bf16, rows, cols}, nullptr);
  std::vector<uint16_t> got(static_cast<size_t>(rows * cols));
  cudaMemcpy(got.data(), out.data(), got.size() * 2, cudaMemcpyDeviceToHost);
  std::vector<uint16_t> want(got.size());
  cpu::dequantize(ref, MutableTensorView{want.data(), DType::bf16, rows, cols});
  ASSERT_TRUE(got == want);
}

}  // namespace
}  // namespace kbit
