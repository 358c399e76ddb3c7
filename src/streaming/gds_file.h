// GPUDirect Storage reads for kbit::WeightStreamer's gds source: a file registered
// with cuFile, read straight into device memory (through the NVMe DMA path where the
// nvidia-fs driver is loaded, cuFile's own POSIX compatibility path otherwise).
// Optional at build time (cuFile found by CMake: KBIT_HAVE_CUFILE), detected at run
// time (probe()): without it, every entry point reports why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kbit::detail {

class GdsFile {
 public:
  // True when this build has cuFile and its driver opens; otherwise false and *why says why.
  static bool probe(std::string* why);

  explicit GdsFile(const std::string& path);  // throws kbit::Error
  ~GdsFile();
  GdsFile(const GdsFile&) = delete;
  GdsFile& operator=(const GdsFile&) = delete;

  // Registers a device buffer for faster reads (best effort; reads work without it).
  void register_buffer(void* device, size_t bytes);
  // Reads `bytes` at file_offset into device_base + device_offset; throws on a short read.
  void read(void* device_base, size_t bytes, int64_t file_offset, int64_t device_offset);

 private:
  int fd_ = -1;
  void* handle_ = nullptr;  // CUfileHandle_t
  std::string path_;
  void* registered_[16] = {};  // buffers registered with cuFileBufRegister
  int n_registered_ = 0;
};

}  // namespace kbit::detail
