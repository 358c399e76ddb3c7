// Checkpoints: one safetensors file or a folder of shards with an index.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "kbit/error.h"
#include "kbit/safetensors.h"

namespace kbit::io {
namespace fs = std::filesystem;
using kbit::detail::concat;

inline constexpr const char* kIndexName = "model.safetensors.index.json";

Checkpoint Checkpoint::open(const std::string& path) {
  Checkpoint c;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    c.folder_ = fs::path(path).parent_path().string();
    c.shards_.push_back(SafetensorsFile::open(path));
    return c;
  }
  KBIT_REQUIRE(fs::is_directory(path, ec), path, ": no such file or folder");
  c.folder_ = path;
  c.sharded_ = true;
  const fs::path index = fs::path(path) / kIndexName;
  std::vector<std::string> files;
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      std::ifstream in(index);
      j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(concat(index.string(), ": not valid JSON (", e.what(), ")"));
    }
    KBIT_REQUIRE(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
                 ": has no weight_map object");
    std::set<std::string> seen;
    for (const auto& [name, file] : j["weight_map"].items()) {
      KBIT_REQUIRE(file.is_string(), index.string(), ": weight_map entry '", name, "' is not a file name");
      const std::string f = file.get<std::string>();
      KBIT_REQUIRE(f.find('/') == std::string::npos && f.find("..") == std::string::npos, index.string(),
                   ": shard name '", f, "' must be a plain file name in the folder");
      if (seen.insert(f).second) files.push_back(f);
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) c.shards_.push_back(SafetensorsFile::open((fs::path(path) / f).string()));
    for (const auto& [name, file] : j["weight_map"].items()) {
      const auto it = std::find(files.begin(), files.end(), file.get<std::string>());
      KBIT_REQUIRE(c.shards_[size_t(it - files.begin())].find(name), index.string(), ": tensor '", name,
                   "' is not in shard ", file.get<std::string>());
    }
  } else {
    for (const auto& e : fs::directory_iterator(path))
      if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path().filename().string());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) c.shards_.push_back(SafetensorsFile::open((fs::path(path) / f).string()));
  }
  KBIT_REQUIRE(!c.shards_.empty(), path, ": the folder holds no .safetensors files");
  std::set<std::string> names;
  for (const auto& s : c.shards_)
    for (const auto& t : s.tensors())
      KBIT_REQUIRE(names.insert(t.name).second, path, ": tensor '", t.name, "' appears in more than one shard");
  return c;
}

std::vector<std::string> Checkpoint::shard_names() const {
  std::vector<std::string> out;
  for (const auto& s : shards_) out.push_back(fs::path(s.path()).filename().string());
  return out;
}

std::vector<std::pair<const SafetensorsFile*, const TensorInfo*>> Checkpoint::tensors() const {
  std::vector<std::pair<const SafetensorsFile*, const TensorInfo*>> out;
  for (const auto& s : shards_)
    for (const auto& t : s.tensors()) out.emplace_back(&s, &t);
  return out;
}

std::pair<const SafetensorsFile*, const TensorInfo*> Checkpoint::find(std::string_view name) const {
  for (const auto& s : shards_)
    if (const TensorInfo* t = s.find(name)) return {&s, t};
  return {nullptr, nullptr};
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& s : shards_)
    for (const auto& t : s.tensors()) n += t.bytes();
  return n;
}

void write_index(const std::string& folder, const std::map<std::string, std::string>& weight_map, uint64_t total_size) {
  nlohmann::ordered_json j;
  j["metadata"] = {{"total_size", total_size}};
  j["weight_map"] = nlohmann::ordered_json::object();
  for (const auto& [k, v] : weight_map) j["weight_map"][k] = v;
  const fs::path p = fs::path(folder) / kIndexName;
  const fs::path tmp = p.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    KBIT_REQUIRE(out.good(), tmp.string(), ": write failed");
  }
  fs::rename(tmp, p);
}

}  // namespace kbit::io
