// safetensors reader (mmap + full header validation) and streaming writer.
#include "kbit/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "kbit/error.h"

namespace kbit::io {
namespace {

using kbit::detail::concat;
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the safetensors limit

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(concat(path, ": not a valid safetensors file: ", what));
}

int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

}  // namespace

int64_t TensorInfo::numel() const { return checked_numel(shape); }

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  SafetensorsFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KBIT_REQUIRE(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(concat(path, ": not a regular file"));
  }
  f.size_ = uint64_t(st.st_size);
  if (f.size_ < 8) {
    ::close(fd);
    fail(path, concat("the file is ", f.size_, " bytes, shorter than the 8-byte header length"));
  }
  void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KBIT_REQUIRE(m != MAP_FAILED, path, ": mmap failed: ", std::strerror(errno));
  f.map_ = static_cast<const std::byte*>(m);

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint64_t(std::to_integer<uint8_t>(f.map_[i]));
  if (header_len > f.size_ - 8)
    fail(path, concat("the header length ", header_len, " runs past the end of the file (", f.size_, " bytes)"));
  if (header_len > kMaxHeaderBytes) fail(path, concat("the header length ", header_len, " exceeds 100 MB"));
  f.data_start_ = 8 + header_len;
  const uint64_t data_size = f.size_ - f.data_start_;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(reinterpret_cast<const char*>(f.map_ + 8),
                                   reinterpret_cast<const char*>(f.map_ + 8 + header_len));
  } catch (const nlohmann::json::exception& e) {
    fail(path, concat("the header is not valid JSON (", e.what(), ")"));
  }
  if (!header.is_object()) fail(path, "the header is not a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, concat("__metadata__ value for '", k, "' is not a string"));
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) fail(path, concat("entry '", name, "' is not an object"));
    TensorInfo t;
    t.name = name;
    const auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) fail(path, concat("tensor '", name, "' has no dtype"));
    const auto dtype = dtype_from_name(dt->get<std::string>());
    if (!dtype) fail(path, concat("tensor '", name, "' has unknown dtype '", dt->get<std::string>(), "'"));
    t.dtype = *dtype;
    const auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array()) fail(path, concat("tensor '", name, "' has no shape"));
    for (const auto& d : *sh) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail(path, concat("tensor '", name, "' has a shape entry that is not a non-negative integer"));
      t.shape.push_back(d.get<int64_t>());
    }
    const auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      fail(path, concat("tensor '", name, "' has no valid data_offsets [begin, end]"));
    t.begin = (*off)[0].get<uint64_t>();
    t.end = (*off)[1].get<uint64_t>();
    if (t.begin > t.end) fail(path, concat("tensor '", name, "' has data_offsets with begin > end"));
    if (t.end > data_size)
      fail(path, concat("tensor '", name, "' data_offsets [", t.begin, ", ", t.end, "] lie outside the ", data_size,
                        "-byte data section"));
    const int64_t n = t.numel();
    if (n < 0) fail(path, concat("tensor '", name, "' has an overflowing shape"));
    if (uint64_t(n) > std::numeric_limits<uint64_t>::max() / dtype_size(t.dtype) ||
        uint64_t(n) * dtype_size(t.dtype) != t.bytes())
      fail(path, concat("tensor '", name, "' has ", t.bytes(), " bytes but its shape and dtype need ",
                        uint64_t(n) * dtype_size(t.dtype)));
    f.tensors_.push_back(std::move(t));
  }
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  const TensorInfo* prev = nullptr;
  for (const auto& t : f.tensors_) {
    if (t.bytes() == 0) continue;
    if (prev && t.begin < prev->end) fail(path, concat("tensors '", prev->name, "' and '", t.name, "' overlap"));
    prev = &t;
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_[f.tensors_[i].name] = i;
  return f;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& o) noexcept { *this = std::move(o); }
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(const_cast<std::byte*>(map_), size_);
    path_ = std::move(o.path_);
    map_ = o.map_, size_ = o.size_, data_start_ = o.data_start_;
    tensors_ = std::move(o.tensors_), index_ = std::move(o.index_), metadata_ = std::move(o.metadata_);
    o.map_ = nullptr, o.size_ = 0;
  }
  return *this;
}
SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(const_cast<std::byte*>(map_), size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}
const TensorInfo& SafetensorsFile::at(std::string_view name) const {
  const TensorInfo* t = find(name);
  KBIT_REQUIRE(t, path_, ": no tensor named '", name, "'");
  return *t;
}
std::span<const std::byte> SafetensorsFile::bytes(const TensorInfo& t) const {
  return {map_ + data_start_ + t.begin, size_t(t.bytes())};
}
void SafetensorsFile::release(const TensorInfo& t) const {
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (data_start_ + t.begin) / page * page;
  const uint64_t end = data_start_ + t.end;
  if (end > begin) ::madvise(const_cast<std::byte*>(map_) + begin, end - begin, MADV_DONTNEED);
}

TensorView SafetensorsFile::view(const TensorInfo& t) const {
  KBIT_REQUIRE(t.shape.size() == 1 || t.shape.size() == 2, path_, ": tensor '", t.name, "' has rank ", t.shape.size(),
               ", expected 1 or 2");
  const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1;
  const int64_t cols = t.shape.back();
  return TensorView{bytes(t).data(), t.dtype, rows, cols, cols};
}

// ------------------------------------------------------------------ writer
SafetensorsWriter::SafetensorsWriter(std::string path) : path_(std::move(path)) {
  std::random_device rd;
  tmp_path_ = concat(path_, ".tmp-", std::hex, rd());
}

SafetensorsWriter::~SafetensorsWriter() {
  if (file_) std::fclose(file_);
  if (!finished_ && begun_) std::remove(tmp_path_.c_str());
}

void SafetensorsWriter::declare(const std::string& name, DType dtype, std::vector<int64_t> shape) {
  KBIT_REQUIRE(!begun_, path_, ": declare('", name, "') after begin()");
  KBIT_REQUIRE(!name.empty() && name != "__metadata__", path_, ": invalid tensor name '", name, "'");
  for (const auto& t : tensors_) KBIT_REQUIRE(t.name != name, path_, ": tensor '", name, "' declared twice");
  TensorInfo t;
  t.name = name;
  t.dtype = dtype;
  t.shape = std::move(shape);
  const int64_t n = t.numel();
  KBIT_REQUIRE(n >= 0, path_, ": tensor '", name, "' has an invalid shape");
  t.begin = data_bytes_;
  t.end = t.begin + uint64_t(n) * dtype_size(dtype);
  data_bytes_ = t.end;
  tensors_.push_back(std::move(t));
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  KBIT_REQUIRE(!finished_, path_, ": set_metadata after finish()");
  metadata_[key] = value;
}

std::string SafetensorsWriter::header_json() const {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    h["__metadata__"] = m;
  }
  for (const auto& t : tensors_)
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  return h.dump();
}

void SafetensorsWriter::write_header(uint64_t reserved) {
  std::string json = header_json();
  KBIT_REQUIRE(json.size() <= reserved, path_, ": header grew past its reserved ", reserved, " bytes");
  json.append(size_t(reserved - json.size()), ' ');  // safetensors allows trailing spaces
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (unsigned char)((reserved >> (8 * i)) & 0xff);
  KBIT_REQUIRE(std::fseek(file_, 0, SEEK_SET) == 0 && std::fwrite(len, 1, 8, file_) == 8 &&
                   std::fwrite(json.data(), 1, json.size(), file_) == json.size(),
               tmp_path_, ": write failed: ", std::strerror(errno));
}

void SafetensorsWriter::begin() {
  KBIT_REQUIRE(!begun_, path_, ": begin() called twice");
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  KBIT_REQUIRE(file_, tmp_path_, ": cannot create: ", std::strerror(errno));
  begun_ = true;
  // Room for metadata values to change length before finish(); data starts 8-byte aligned.
  const uint64_t slack = 256 + 96 * metadata_.size();
  header_reserved_ = (header_json().size() + slack + 7) / 8 * 8;
  write_header(header_reserved_);
}

void SafetensorsWriter::write(std::span<const std::byte> bytes) {
  KBIT_REQUIRE(begun_ && !finished_, path_, ": write() outside begin()/finish()");
  KBIT_REQUIRE(written_ + bytes.size() <= data_bytes_, path_, ": more data written than the declared tensors hold");
  KBIT_REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size(), tmp_path_,
               ": write failed: ", std::strerror(errno));
  written_ += bytes.size();
}

void SafetensorsWriter::finish() {
  KBIT_REQUIRE(begun_ && !finished_, path_, ": finish() without begin()");
  KBIT_REQUIRE(written_ == data_bytes_, path_, ": ", written_, " data bytes written, the declared tensors need ",
               data_bytes_);
  write_header(header_reserved_);
  const bool ok = std::fflush(file_) == 0 && ::fsync(::fileno(file_)) == 0;
  std::fclose(file_);
  file_ = nullptr;
  KBIT_REQUIRE(ok, tmp_path_, ": flushing failed: ", std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp_path_, path_, ec);
  KBIT_REQUIRE(!ec, "cannot move ", tmp_path_, " to ", path_, ": ", ec.message());
  finished_ = true;
}

}  // namespace kbit::io
