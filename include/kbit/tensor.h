// Non-owning 2-D row-major views of caller memory (host or device), and an owning
// byte buffer that lives on either side.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kbit/dtype.h"

namespace kbit {

enum class Memory : uint8_t { host, device };

struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;  // in elements; 0 means cols (contiguous)

  int64_t stride() const { return row_stride ? row_stride : cols; }
};

struct MutableTensorView {
  void* data = nullptr;
  DType dtype = DType::f32;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t row_stride = 0;

  int64_t stride() const { return row_stride ? row_stride : cols; }
  operator TensorView() const { return {data, dtype, rows, cols, row_stride}; }
};

// Owns `size` bytes on the host (zero-initialised) or on the current CUDA device.
class Buffer {
 public:
  Buffer() = default;
  static Buffer allocate(Memory where, size_t bytes);
  // A view of memory owned elsewhere (it must outlive the buffer); never freed here.
  static Buffer borrow(Memory where, void* data, size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Memory memory() const { return memory_; }

 private:
  void release() noexcept;
  void* data_ = nullptr;
  size_t size_ = 0;
  Memory memory_ = Memory::host;
  bool owned_ = true;
};

}  // namespace kbit
