// Device discovery, host <-> device copies of quantized matrices, pointer checks.
#include <mutex>
#include <vector>

#include "common.cuh"
#include "kbit/cuda.h"

namespace kbit::cuda {

bool device_available() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n > 0;
}

std::string device_description() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return kbit::detail::concat("no usable CUDA device (", cudaGetErrorString(err), ")");
  }
  if (n == 0) return "no CUDA device";
  int dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceProp p{};
  cudaGetDeviceProperties(&p, dev);
  return kbit::detail::concat(p.name, " (sm_", p.major, p.minor, ", ", p.multiProcessorCount, " SMs, ",
                              p.l2CacheSize >> 20, " MB L2, ", p.totalGlobalMem >> 30, " GiB)");
}

namespace detail {

void check_device_pointer(const void* p, std::string_view what) {
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, p);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw Error(kbit::detail::concat(what, ": cannot inspect pointer ", p, ": ", cudaGetErrorString(err)));
  }
  KBIT_REQUIRE(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, what, ": pointer ", p,
               " is not device memory (pass a cudaMalloc'd buffer)");
}

bool device_has_wgmma() {
  static std::mutex m;
  static std::vector<int> known;  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(m);
  if (size_t(dev) >= known.size()) known.resize(size_t(dev) + 1, 0);
  if (!known[size_t(dev)]) {
    int major = 0, minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), "compute capability");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), "compute capability");
    known[size_t(dev)] = major == 9 && minor == 0 ? 2 : 1;
  }
  return known[size_t(dev)] == 2;
}

int sm_count() {
  static std::mutex m;
  static std::vector<int> counts;
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(m);
  if (size_t(dev) >= counts.size()) counts.resize(size_t(dev) + 1, 0);
  if (!counts[size_t(dev)])
    check_cuda(cudaDeviceGetAttribute(&counts[size_t(dev)], cudaDevAttrMultiProcessorCount, dev), "SM count");
  return counts[size_t(dev)];
}

}  // namespace detail

QuantizedMatrix to_device(const QuantizedMatrix& host, cudaStream_t stream) {
  kbit::detail::check_matrix(host, "to_device", Memory::host);
  QuantizedMatrix d = QuantizedMatrix::allocate(host.rows(), host.cols(), host.codebook(), host.layout(), Memory::device);
  d.set_rotation(host.rotation());
  DeviceMeta meta{};
  meta.tensor_scale = host.tensor_scale();
  for (int i = 0; i < host.codebook().levels(); ++i) meta.codebook[i] = host.codebook()[i];
  detail::check_cuda(cudaMemcpyAsync(d.words(), host.words(), size_t(host.word_count()) * 4, cudaMemcpyHostToDevice, stream),
                     "to_device: copying words");
  detail::check_cuda(cudaMemcpyAsync(d.scales(), host.scales(), size_t(host.scale_count()), cudaMemcpyHostToDevice, stream),
                     "to_device: copying scales");
  // meta is a stack object: copy synchronously with respect to the host
  detail::check_cuda(cudaMemcpyAsync(d.device_meta(), &meta, sizeof meta, cudaMemcpyHostToDevice, stream),
                     "to_device: copying metadata");
  detail::check_cuda(cudaStreamSynchronize(stream), "to_device");
  return d;
}

QuantizedMatrix to_host(const QuantizedMatrix& dev, cudaStream_t stream) {
  kbit::detail::check_matrix(dev, "to_host", Memory::device);
  QuantizedMatrix h = QuantizedMatrix::allocate(dev.rows(), dev.cols(), dev.codebook(), dev.layout(), Memory::host);
  h.set_rotation(dev.rotation());
  detail::check_cuda(cudaMemcpyAsync(h.words(), dev.words(), size_t(dev.word_count()) * 4, cudaMemcpyDeviceToHost, stream),
                     "to_host: copying words");
  detail::check_cuda(cudaMemcpyAsync(h.scales(), dev.scales(), size_t(dev.scale_count()), cudaMemcpyDeviceToHost, stream),
                     "to_host: copying scales");
  detail::check_cuda(cudaStreamSynchronize(stream), "to_host");
  h.set_tensor_scale(dev.tensor_scale());  // throws if a GPU quantize saw NaN/Inf
  return h;
}

}  // namespace kbit::cuda
