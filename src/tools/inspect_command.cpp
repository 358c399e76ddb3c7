// kbit inspect FILE [--against ORIGINAL]
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <cstring>
#include <sstream>

#include "commands.h"
#include "cpu/elements.h"
#include "kbit/container.h"
#include "kbit/cpu.h"
#include "kbit/error.h"
#include "kbit/safetensors.h"

namespace kbit::tools {
namespace {

std::string shape_string(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

void inspect(const std::string& path, const std::string& against) {
  const io::Checkpoint ck = io::Checkpoint::open(path);
  std::optional<io::Checkpoint> original;
  if (!against.empty()) original.emplace(io::Checkpoint::open(against));
  std::printf("%s: %zu shard(s), %.1f MB of tensor data\n", path.c_str(), ck.shards().size(), ck.total_bytes() / 1e6);
  std::printf("%-56s %-10s %-16s %12s %8s %-8s %12s%s\n", "tensor", "type", "shape", "bytes", "bits/wt", "codebook",
              "tensor scale", original ? "   SQNR dB" : "");
  uint64_t quantized_bytes = 0, plain_bytes = 0;
  int64_t quantized_params = 0;
  for (const auto& shard : ck.shards()) {
    const bool is_kbit = shard.metadata().count(io::kFormatKey) > 0;
    std::set<std::string> qnames;
    if (is_kbit)
      for (const auto& n : io::quantized_names(shard)) qnames.insert(n);
    for (const auto& name : qnames) {
      const QuantizedMatrix q = io::load_quantized(shard, name);
      const uint64_t bytes = uint64_t(q.storage_bytes()) + (uint64_t(4) << q.bits());
      quantized_bytes += bytes;
      quantized_params += q.rows() * q.cols();
      std::string sqnr;
      if (original) {
        const auto [osh, oinfo] = original->find(name);
        if (!oinfo) {
          sqnr = "   (absent)";
        } else {
          TensorView original_view = osh->view(*oinfo);
          std::vector<float> rotated;
          if (q.rotation()) {  // compare in the rotated space (the rotation is orthogonal)
            rotated.resize(size_t(q.rows() * q.cols()));
            for (int64_t r = 0; r < q.rows(); ++r)
              cpu::detail::load_row(original_view.data, original_view.dtype, original_view.stride(), r, q.cols(),
                                    q.cols(), rotated.data() + r * q.cols());
            hadamard_rotate(MutableTensorView{rotated.data(), DType::f32, q.rows(), q.cols()}, *q.rotation());
            original_view = TensorView{rotated.data(), DType::f32, q.rows(), q.cols()};
          }
          const cpu::ErrorStats e = cpu::quantization_error(original_view, q);
          char b[32];
          std::snprintf(b, sizeof b, " %10.2f", e.sqnr_db());
          sqnr = b;
        }
      }
      std::printf("%-56s %-10s %-16s %12llu %8.3f %-8s %12.6g%s\n", name.c_str(),
                  detail::concat("kbit k=", q.bits()).c_str(), shape_string({q.rows(), q.cols()}).c_str(),
                  (unsigned long long)bytes, 8.0 * double(bytes) / double(q.rows() * q.cols()),
                  (q.codebook().name() + (q.rotation() ? "," + q.rotation()->describe() : "")).c_str(),
                  q.tensor_scale(), sqnr.c_str());
    }
    for (const auto& t : shard.tensors()) {
      if (is_kbit && io::is_kbit_tensor_part(t.name)) continue;
      plain_bytes += t.bytes();
      std::printf("%-56s %-10s %-16s %12llu %8s %-8s %12s\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(),
                  shape_string(t.shape).c_str(), (unsigned long long)t.bytes(), "", "", "");
    }
    for (const auto& [k, v] : shard.metadata())
      if (k == io::kFormatKey) std::printf("format: kbit version %s\n", v.c_str());
  }
  if (quantized_params)
    std::printf("quantized: %lld params in %.1f MB (%.3f bits/weight); unquantized tensors: %.1f MB\n",
                (long long)quantized_params, quantized_bytes / 1e6, 8.0 * double(quantized_bytes) / double(quantized_params),
                plain_bytes / 1e6);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto against = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand("inspect", "List a checkpoint's tensors, bit widths, sizes and format metadata");
  cmd->add_option("file", *path, "safetensors file or folder")->required();
  cmd->add_option("--against", *against, "the original checkpoint: report each quantized tensor's SQNR");
  cmd->callback([path, against] { inspect(*path, *against); });
}

}  // namespace kbit::tools
