// convert_checkpoint: the engine of `kbit quantize`.
#include "kbit/convert.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>

#include "kbit/container.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "cpu/elements.h"
#include "cpu/parallel.h"

namespace kbit {
namespace fs = std::filesystem;
using detail::concat;

namespace {

std::regex compile(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw Error(concat("invalid pattern '", pattern, "': ", e.what()));
  }
}

bool matches_any(const std::vector<std::regex>& patterns, const std::string& name) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::regex& p) { return std::regex_search(name, p); });
}

// Quantizes tensors on the GPU, reusing one device input buffer.
class GpuQuantizer {
 public:
  QuantizedMatrix quantize(const TensorView& host, const Codebook& cb, cpu::ErrorStats* error) {
    const size_t bytes = size_t(host.rows * host.cols) * dtype_size(host.dtype);
    if (input_.size() < bytes) input_ = Buffer::allocate(Memory::device, bytes);
    const cudaError_t err = cudaMemcpy(input_.data(), host.data, bytes, cudaMemcpyHostToDevice);
    KBIT_REQUIRE(err == cudaSuccess, "copying a tensor to the GPU failed: ", cudaGetErrorString(err));
    const TensorView dev{input_.data(), host.dtype, host.rows, host.cols, host.cols};
    QuantizedMatrix q = cuda::quantize(dev, cb, nullptr);
    QuantizedMatrix h = cuda::to_host(q, nullptr);  // throws on NaN/Inf input
    if (error) *error = cuda::quantization_error(dev, q, nullptr);
    return h;
  }

 private:
  Buffer input_;
};

struct OutputPlan {
  fs::path final_path;  // file or folder the user asked for
  fs::path write_path;  // where we write before the final rename
  bool folder = false;
};

OutputPlan plan_output(const std::string& in, const std::string& out, bool folder, bool overwrite) {
  OutputPlan p;
  p.final_path = out;
  p.folder = folder;
  std::error_code ec;
  KBIT_REQUIRE(!fs::equivalent(in, out, ec), "the output ", out, " is the input");
  if (fs::exists(out)) {
    KBIT_REQUIRE(overwrite, out, " already exists (pass --force to replace it)");
    KBIT_REQUIRE(folder == fs::is_directory(out), out, " exists and is ", folder ? "not a folder" : "a folder");
  }
  if (folder) {
    std::random_device rd;
    p.write_path = concat(out, ".tmp-", std::hex, rd());
    fs::create_directories(p.write_path);
  } else {
    const fs::path parent = fs::path(out).parent_path();
    KBIT_REQUIRE(parent.empty() || fs::is_directory(parent), "the output folder ", parent.string(), " does not exist");
    p.write_path = out;
  }
  return p;
}

}  // namespace

bool is_default_quantized(const std::string& name) {
  static const std::regex layer(R"((^|\.)(layers?|h|blocks?)\.[0-9]+\.)");
  static const std::regex skip(R"((norm|embed|lm_head|wte|wpe|\.gate\.weight$|router))");
  return name.size() > 7 && name.ends_with(".weight") && std::regex_search(name, layer) &&
         !std::regex_search(name, skip);
}

TensorSelector::TensorSelector(const ConvertOptions& o) : default_bits_(o.bits) {
  require_supported_bits(o.bits);
  for (const auto& [p, k] : o.bits_for) {
    KBIT_REQUIRE(is_supported_bits(k), "--bits-for '", p, "=", k, "': unsupported bit width (kbit supports 2..5)");
    bits_for_.emplace_back(compile(p), k);
  }
  for (const auto& p : o.include) include_.push_back(compile(p));
  for (const auto& p : o.exclude) exclude_.push_back(compile(p));
}

std::optional<int> TensorSelector::bits_for(const std::string& name, int rank, bool is_float) const {
  if (rank != 2 || !is_float) return std::nullopt;
  if (matches_any(exclude_, name)) return std::nullopt;
  if (!is_default_quantized(name) && !matches_any(include_, name)) return std::nullopt;
  int bits = default_bits_;
  for (const auto& [pattern, k] : bits_for_)
    if (std::regex_search(name, pattern)) bits = k;
  return bits;
}

ConvertReport convert_checkpoint(const std::string& in, const std::string& out, const ConvertOptions& o,
                                 const Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const TensorSelector selector(o);
  Codebook::named(o.codebook, o.bits);  // validates the name

  ConvertReport report;
  report.used_gpu = o.device == DevicePolicy::gpu || (o.device == DevicePolicy::automatic && cuda::device_available());
  if (o.device == DevicePolicy::gpu)
    KBIT_REQUIRE(cuda::device_available(), "--device gpu: ", cuda::device_description());

  const io::Checkpoint ck = io::Checkpoint::open(in);
  for (const auto& s : ck.shards())
    KBIT_REQUIRE(!s.metadata().count(io::kFormatKey), s.path(), " is already a kbit checkpoint");
  OutputPlan plan = plan_output(in, out, ck.sharded(), o.overwrite);

  std::optional<GpuQuantizer> gpu;
  if (report.used_gpu) gpu.emplace();
  std::map<std::string, std::string> weight_map;
  const auto all = ck.tensors();
  size_t done = 0;
  try {
    for (size_t si = 0; si < ck.shards().size(); ++si) {
      const io::SafetensorsFile& shard = ck.shards()[si];
      const std::string shard_name = ck.shard_names()[si];
      const fs::path file = plan.folder ? plan.write_path / shard_name : plan.write_path;
      io::SafetensorsWriter writer(file.string());
      std::vector<std::optional<int>> bits;
      std::vector<std::optional<Rotation>> rotations;
      for (const auto& t : shard.tensors()) {
        bits.push_back(selector.bits_for(t.name, int(t.shape.size()), is_weight_float(t.dtype)));
        if (bits.back() && t.numel() == 0) bits.back().reset();
        rotations.emplace_back();
        if (bits.back() && !o.hadamard.empty()) {
          try {
            rotations.back() = Rotation::parse(o.hadamard, t.shape[1], o.hadamard_seed);
          } catch (const Error& e) {
            throw Error(concat("tensor '", t.name, "': ", e.what()));
          }
        }
        if (bits.back())
          io::declare_quantized(writer, t.name, t.shape[0], t.shape[1], *bits.back(), rotations.back());
        else
          writer.declare(t.name, t.dtype, t.shape);
      }
      for (const auto& [k, v] : shard.metadata()) writer.set_metadata(k, v);
      writer.set_metadata(io::kFormatKey, std::to_string(kFormatVersion));
      writer.begin();
      for (size_t ti = 0; ti < shard.tensors().size(); ++ti) {
        const io::TensorInfo& t = shard.tensors()[ti];
        if (progress) progress(done, all.size(), t.name);
        ++done;
        TensorReport tr;
        tr.name = t.name;
        tr.shape = t.shape;
        tr.original_bytes = t.bytes();
        if (!bits[ti]) {
          const auto bytes = shard.bytes(t);
          for (size_t off = 0; off < bytes.size(); off += size_t(64) << 20)
            writer.write(bytes.subspan(off, std::min(bytes.size() - off, size_t(64) << 20)));
          tr.stored_bytes = t.bytes();
          weight_map[t.name] = shard_name;
        } else {
          TensorView view = shard.view(t);
          std::vector<std::byte> aligned;
          std::vector<float> rotated;
          if (rotations[ti]) {  // rotate in fp32, then quantize the rotated rows
            rotated.resize(size_t(view.rows * view.cols));
            cpu::detail::parallel_for(view.rows, 64, [&](int64_t r0, int64_t r1) {
              for (int64_t r = r0; r < r1; ++r)
                cpu::detail::load_row(view.data, view.dtype, view.stride(), r, view.cols, view.cols,
                                      rotated.data() + r * view.cols);
            });
            view = TensorView{rotated.data(), DType::f32, view.rows, view.cols, view.cols};
            hadamard_rotate(MutableTensorView{rotated.data(), DType::f32, view.rows, view.cols}, *rotations[ti]);
          } else if (reinterpret_cast<uintptr_t>(view.data) % dtype_size(view.dtype) != 0) {  // odd header length
            aligned.assign(shard.bytes(t).begin(), shard.bytes(t).end());
            view.data = aligned.data();
          }
          const Codebook cb = Codebook::named(o.codebook, *bits[ti]);
          QuantizedMatrix q;
          try {
            if (gpu) {
              q = gpu->quantize(view, cb, o.measure_error ? &tr.error : nullptr);
            } else {
              q = cpu::quantize(view, cb);
              if (o.measure_error) tr.error = cpu::quantization_error(view, q);
            }
          } catch (const Error& e) {
            throw Error(concat("tensor '", t.name, "': ", e.what()));
          }
          q.set_rotation(rotations[ti]);
          io::write_quantized(writer, t.name, q);
          tr.bits = *bits[ti];
          tr.stored_bytes = uint64_t(q.storage_bytes()) + (uint64_t(4) << tr.bits);
          for (const char* suffix : {".kbit_packed", ".kbit_absmax", ".kbit_codebook"})
            weight_map[t.name + suffix] = shard_name;
        }
        shard.release(t);
        report.input_bytes += tr.original_bytes;
        report.output_bytes += tr.stored_bytes;
        report.tensors.push_back(std::move(tr));
      }
      writer.finish();
    }
    if (plan.folder) {
      uint64_t total = 0;
      for (const auto& t : report.tensors) total += t.stored_bytes;
      io::write_index(plan.write_path.string(), weight_map, total);
      for (const auto& e : fs::directory_iterator(in)) {  // config, tokenizer, ...: copied as they are
        const std::string n = e.path().filename().string();
        if (e.is_regular_file() && e.path().extension() != ".safetensors" && n != "model.safetensors.index.json")
          fs::copy_file(e.path(), plan.write_path / n);
      }
      if (fs::exists(plan.final_path)) fs::remove_all(plan.final_path);
      fs::rename(plan.write_path, plan.final_path);
    }
  } catch (...) {
    if (plan.folder) {
      std::error_code ec;
      fs::remove_all(plan.write_path, ec);
    }
    throw;
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

std::string format_summary(const ConvertReport& r) {
  struct Row {
    int tensors = 0;
    int64_t params = 0;
    uint64_t original = 0, stored = 0;
    cpu::ErrorStats error;
    double sum_rel_mse = 0;
  };
  std::map<int, Row> rows;
  for (const auto& t : r.tensors) {
    Row& row = rows[t.bits];
    ++row.tensors;
    int64_t n = 1;
    for (auto d : t.shape) n *= d;
    row.params += n;
    row.original += t.original_bytes;
    row.stored += t.stored_bytes;
    row.error += t.error;
    if (t.error.sum_sq_ref > 0) row.sum_rel_mse += t.error.sum_sq_error / t.error.sum_sq_ref;
  }
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof line, "%-8s %8s %14s %12s %12s %8s %10s %14s %10s\n", "bits", "tensors", "params",
                "in MB", "out MB", "ratio", "bits/wt", "mean rel.MSE", "SQNR dB");
  out << line;
  for (const auto& [bits, row] : rows) {
    const std::string label = bits ? concat("k=", bits) : std::string("copied");
    const double bpw = row.params ? 8.0 * double(row.stored) / double(row.params) : 0;
    if (bits) {
      std::snprintf(line, sizeof line, "%-8s %8d %14lld %12.1f %12.1f %7.2fx %10.3f %14.3e %10.2f\n", label.c_str(),
                    row.tensors, (long long)row.params, row.original / 1e6, row.stored / 1e6,
                    double(row.original) / double(std::max<uint64_t>(row.stored, 1)), bpw,
                    row.sum_rel_mse / row.tensors, row.error.sqnr_db());
    } else {
      std::snprintf(line, sizeof line, "%-8s %8d %14lld %12.1f %12.1f %8s %10s %14s %10s\n", label.c_str(), row.tensors,
                    (long long)row.params, row.original / 1e6, row.stored / 1e6, "", "", "", "");
    }
    out << line;
  }
  std::snprintf(line, sizeof line, "total: %.1f MB -> %.1f MB (%.2fx) in %.1f s on the %s\n", r.input_bytes / 1e6,
                r.output_bytes / 1e6, double(r.input_bytes) / double(std::max<uint64_t>(r.output_bytes, 1)), r.seconds,
                r.used_gpu ? "GPU" : "CPU");
  out << line;
  return out.str();
}

}  // namespace kbit
