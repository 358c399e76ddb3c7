// QuantizedMatrix: one kbit weight matrix W[N, K] (packed words, E4M4 scale
// bytes, codebook, tensor scale) in a given layout, owning host or device memory.
#pragma once

#include <cstdint>
#include <optional>

#include "kbit/format.h"
#include "kbit/hadamard.h"
#include "kbit/layout.h"
#include "kbit/tensor.h"

namespace kbit {

// Per-matrix values that GPU code reads from device memory: the tensor scale is
// produced on the device by GPU quantize (it needs a global max), so it stays there.
struct DeviceMeta {
  uint32_t amax_bits;  // scratch: max |w| as float bits, reduced with atomicMax
  uint32_t status;     // DeviceStatus
  float tensor_scale;
  uint32_t reserved;
  float codebook[kMaxLevels];
};
enum DeviceStatus : uint32_t { kStatusOk = 0, kStatusNonFinite = 1 };

class QuantizedMatrix {
 public:
  QuantizedMatrix() = default;
  // Zero-filled storage for an N x K matrix at codebook.bits() bits.
  static QuantizedMatrix allocate(int64_t rows, int64_t cols, const Codebook& codebook, Layout layout, Memory where);
  // A device matrix over memory owned elsewhere (e.g. a WeightStreamer slot): words,
  // scales and a DeviceMeta laid out as this class would allocate them; never freed here.
  static QuantizedMatrix borrow_device(int64_t rows, int64_t cols, const Codebook& codebook, Layout layout,
                                       void* words, void* scales, DeviceMeta* meta);

  const Geometry& geometry() const { return geometry_; }
  int64_t rows() const { return geometry_.rows; }
  int64_t cols() const { return geometry_.cols; }
  int bits() const { return geometry_.bits; }
  Layout layout() const { return layout_; }
  Memory memory() const { return words_.memory(); }
  const Codebook& codebook() const { return codebook_; }
  bool empty() const { return geometry_.rows == 0; }

  // Host matrices store it directly; for device matrices it is read back from the
  // device (this synchronizes) and a GPU quantize of NaN/Inf input is reported here.
  float tensor_scale() const;
  void set_tensor_scale(float s);  // host matrices only

  // The Hadamard rotation the rows were quantized in (activations need the same one).
  const std::optional<Rotation>& rotation() const { return rotation_; }
  // On a device matrix, a rotation with signs also gets a device copy of its sign words
  // (set_rotation uploads it, synchronously), which the activation rotation reads.
  void set_rotation(std::optional<Rotation> r);
  const uint32_t* device_rotation_signs() const { return static_cast<const uint32_t*>(rotation_signs_.data()); }

  uint32_t* words() { return static_cast<uint32_t*>(words_.data()); }
  const uint32_t* words() const { return static_cast<const uint32_t*>(words_.data()); }
  uint8_t* scales() { return static_cast<uint8_t*>(scales_.data()); }
  const uint8_t* scales() const { return static_cast<const uint8_t*>(scales_.data()); }
  int64_t word_count() const { return geometry_.packed_words(layout_); }
  int64_t scale_count() const { return geometry_.scale_bytes(layout_); }
  DeviceMeta* device_meta() const { return static_cast<DeviceMeta*>(meta_.data()); }  // device matrices only

  // Bytes of the format proper (words + scales), as counted for bits per weight.
  int64_t storage_bytes() const { return word_count() * 4 + scale_count(); }

 private:
  Geometry geometry_;
  Layout layout_ = Layout::flat;
  Codebook codebook_ = Codebook::bnf(4);
  float tensor_scale_ = 1.0f;
  std::optional<Rotation> rotation_;
  Buffer words_, scales_, meta_;
  Buffer rotation_signs_;  // device matrices: rotation_->signs on the device (empty otherwise)
};

}  // namespace kbit
