// safetensors files: a validating, memory-mapping reader and a streaming writer,
// plus sharded checkpoints (a folder with model.safetensors.index.json).
//
// File layout: u64 little-endian header length H, H bytes of JSON
// {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data; offsets are relative to the start of the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kbit/dtype.h"
#include "kbit/tensor.h"

namespace kbit::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  int64_t numel() const;
  uint64_t bytes() const { return end - begin; }
};

class SafetensorsFile {
 public:
  // Maps and validates the whole header; throws kbit::Error naming the file and the problem.
  static SafetensorsFile open(const std::string& path);
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // in data order
  const TensorInfo* find(std::string_view name) const;
  const TensorInfo& at(std::string_view name) const;  // throws if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::span<const std::byte> bytes(const TensorInfo& t) const;
  // Drops a tensor's pages from this process (they stay in the page cache): keeps
  // the resident size of a pass over a large checkpoint at about one tensor.
  void release(const TensorInfo& t) const;
  // A 2-D float tensor as a view (1-D tensors are one row). Throws for other ranks.
  TensorView view(const TensorInfo& t) const;
  uint64_t file_size() const { return size_; }
  // The read-only mapping of the whole file (file offset 0 at this address).
  const std::byte* mapping() const { return map_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  const std::byte* map_ = nullptr;
  uint64_t size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// Writes a safetensors file in one pass with bounded memory: declare every
// tensor, begin(), write() their bytes in declaration order (in as many pieces
// as you like), finish(). Metadata may change until finish(): the header is
// written with reserved space and rewritten at the end. The file appears under
// its name only after finish(); on error or destruction before that, nothing is left.
class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void declare(const std::string& name, DType dtype, std::vector<int64_t> shape);
  void set_metadata(const std::string& key, const std::string& value);
  void begin();
  void write(std::span<const std::byte> bytes);  // appends to the current tensor
  void finish();
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  std::string header_json() const;
  void write_header(uint64_t reserved);
  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_bytes_ = 0, written_ = 0, header_reserved_ = 0;
  bool begun_ = false, finished_ = false;
};

// A checkpoint: one .safetensors file, or a folder of shards with
// model.safetensors.index.json (or, without an index, every *.safetensors in it).
class Checkpoint {
 public:
  static Checkpoint open(const std::string& path);
  bool sharded() const { return sharded_; }
  const std::vector<SafetensorsFile>& shards() const { return shards_; }
  std::vector<std::string> shard_names() const;  // file names relative to the folder
  // Every tensor as (shard, info), in shard then data order.
  std::vector<std::pair<const SafetensorsFile*, const TensorInfo*>> tensors() const;
  std::pair<const SafetensorsFile*, const TensorInfo*> find(std::string_view name) const;
  uint64_t total_bytes() const;

 private:
  bool sharded_ = false;
  std::string folder_;
  std::vector<SafetensorsFile> shards_;
};

// Writes model.safetensors.index.json for the given tensor -> shard file map.
void write_index(const std::string& folder, const std::map<std::string, std::string>& weight_map, uint64_t total_size);

}  // namespace kbit::io
