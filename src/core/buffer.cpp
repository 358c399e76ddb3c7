// Buffer: host memory from operator new (zeroed), device memory from cudaMalloc.
#include <cuda_runtime_api.h>

#include <cstring>
#include <new>

#include "kbit/error.h"
#include "kbit/tensor.h"

namespace kbit {

Buffer Buffer::allocate(Memory where, size_t bytes) {
  Buffer b;
  b.memory_ = where;
  b.size_ = bytes;
  if (bytes == 0) return b;
  if (where == Memory::host) {
    b.data_ = ::operator new(bytes, std::nothrow);
    KBIT_REQUIRE(b.data_, "out of host memory allocating ", bytes, " bytes");
    std::memset(b.data_, 0, bytes);
  } else {
    const cudaError_t err = cudaMalloc(&b.data_, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();
      b.data_ = nullptr;
      throw Error(detail::concat("cudaMalloc of ", bytes, " bytes failed: ", cudaGetErrorString(err)));
    }
  }
  return b;
}

Buffer Buffer::borrow(Memory where, void* data, size_t bytes) {
  Buffer b;
  b.memory_ = where, b.data_ = data, b.size_ = bytes, b.owned_ = false;
  return b;
}

void Buffer::release() noexcept {
  if (!data_) return;
  if (!owned_) {
    data_ = nullptr, size_ = 0;
    return;
  }
  if (memory_ == Memory::host)
    ::operator delete(data_);
  else
    cudaFree(data_);
  data_ = nullptr;
  size_ = 0;
}

Buffer::~Buffer() { release(); }
Buffer::Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_), memory_(o.memory_), owned_(o.owned_) {
  o.data_ = nullptr;
  o.size_ = 0;
}
Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = o.data_, size_ = o.size_, memory_ = o.memory_, owned_ = o.owned_;
    o.data_ = nullptr, o.size_ = 0;
  }
  return *this;
}

}  // namespace kbit
