#include "dispatch/linear_configs.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "dispatch/cublas_gemm.h"
#include "kbit/error.h"

namespace kbit::generated {
extern const char* const kLinearConfigsJson;
}

namespace kbit::detail {

std::vector<LinearConfig> parse_linear_configs(const std::string& text) {
  std::vector<LinearConfig> out;
  try {
    const auto j = nlohmann::json::parse(text);
    for (const auto& e : j.at("entries")) {
      LinearConfig c;
      c.device = e.at("device").get<std::string>();
      c.bits = e.at("bits").get<int>();
      c.n = e.at("n").get<int64_t>(), c.k = e.at("k").get<int64_t>(), c.m = e.at("m").get<int64_t>();
      c.path = parse_linear_path(e.at("path").get<std::string>());
      c.n_tiles = e.value("n_tiles", 1), c.warps = e.value("warps", 4), c.splits = e.value("splits", 1);
      c.us = e.value("us", 0.0);
      c.items = parse_linear_items(e.value("items", std::string("cta")));
      KBIT_REQUIRE(c.items != LinearItems::automatic, "linear config table: items must name an item mode (cta, warp, stripes, wgmma, cta_shuffle, wgmma_tile, wgmma_stream), not auto");
      c.stripes = e.value("stripes", 1), c.stages = e.value("stages", 0), c.kslice = e.value("kslice", 0);
      c.loader = parse_skinny_loader(e.value("loader", std::string("tma")));
      KBIT_REQUIRE(c.loader != SkinnyLoader::automatic, "linear config table: loader must be tma, reg, smem or async");
      KBIT_REQUIRE(c.bits != 16 || (c.stages > 0 && c.kslice > 0),
                   "linear config table: a bits-16 (skinny) entry needs stages and kslice");
      c.pdl = e.value("pdl", false);
      c.gemm_algo = e.value("gemm_algo", 0);
      KBIT_REQUIRE(c.gemm_algo >= 0 && c.gemm_algo < kLtMaxCandidates, "linear config table: gemm_algo must be 0..",
                   kLtMaxCandidates - 1, ", got ", c.gemm_algo);
      KBIT_REQUIRE(is_supported_bits(c.bits) || c.bits == 16, "linear config table: bits must be 2..5 or 16, got ", c.bits);
      KBIT_REQUIRE(c.n > 0 && c.k > 0 && c.m > 0, "linear config table: n, k and m must be positive, got n = ", c.n,
                   ", k = ", c.k, ", m = ", c.m);
      KBIT_REQUIRE(c.n_tiles > 0 && c.warps > 0 && c.splits > 0 && c.stripes > 0,
                   "linear config table: n_tiles, warps, splits and stripes must be positive");
      out.push_back(c);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("linear config table: ") + e.what());
  }
  return out;
}

std::string linear_configs_to_json(const std::vector<LinearConfig>& entries) {
  std::string s = "{\n  \"_doc\": \"Tuned kbit::linear plans, written by `kbit tune`: for M in (previous m, m] and above m / 2 of the "
                  "same device, bits, n, k; an entry with pdl: true serves PDL launches first.\",\n  \"entries\": [\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& c = entries[i];
    nlohmann::json e = {{"device", c.device}, {"bits", c.bits}, {"n", c.n}, {"k", c.k}, {"m", c.m},
                        {"path", std::string(linear_path_name(c.path))}, {"n_tiles", c.n_tiles}, {"warps", c.warps},
                        {"splits", c.splits}, {"items", std::string(linear_items_name(c.items))},
                        {"us", std::round(c.us * 100) / 100}};
    if (c.bits == 16) e["stripes"] = c.stripes, e["stages"] = c.stages, e["kslice"] = c.kslice, e.erase("items");
    if (c.bits == 16 && c.loader != SkinnyLoader::tma) e["loader"] = skinny_loader_name(c.loader);
    if (c.pdl) e["pdl"] = true;
    if (c.gemm_algo) e["gemm_algo"] = c.gemm_algo;
    s += "    " + e.dump() + (i + 1 < entries.size() ? ",\n" : "\n");
  }
  return s + "  ]\n}\n";
}

const LinearConfig* find_linear_config(const std::vector<LinearConfig>& table, const std::string& device, int bits,
                                       int64_t n, int64_t k, int64_t m, bool pdl, const LinearConfigFilter& applies) {
  auto find = [&](bool pdl_entries) {
    const LinearConfig* best = nullptr;
    for (const auto& c : table)
      if (c.pdl == pdl_entries && c.device == device && c.bits == bits && c.n == n && c.k == k && c.m >= m &&
          2 * m > c.m && (!best || c.m < best->m))
        best = &c;
    return best && (!applies || applies(*best)) ? best : nullptr;
  };
  const LinearConfig* tuned_for_pdl = pdl ? find(true) : nullptr;
  return tuned_for_pdl ? tuned_for_pdl : find(false);
}

std::vector<LinearConfig> load_linear_configs_file(const std::string& path) {
  const std::string text = read_text_file(path, "the tuned table");
  try {
    return parse_linear_configs(text);
  } catch (const Error& e) {
    throw Error(concat(path, ": ", e.what()));
  }
}

std::vector<LinearConfig> load_linear_config_files(const std::string& path_list) {
  std::vector<LinearConfig> out;
  size_t begin = 0;
  while (begin <= path_list.size()) {
    const size_t end = std::min(path_list.find(':', begin), path_list.size());
    const std::string path = path_list.substr(begin, end - begin);
    if (!path.empty()) {
      try {
        const auto entries = load_linear_configs_file(path);
        out.insert(out.end(), entries.begin(), entries.end());
      } catch (const Error& e) {
        throw Error(concat(kLinearConfigsEnv, ": ", e.what()));
      }
    }
    begin = end + 1;
  }
  return out;
}

const LinearConfig* find_linear_config(const std::vector<LinearConfig>& user, const std::vector<LinearConfig>& compiled,
                                       const std::string& device, int bits, int64_t n, int64_t k, int64_t m, bool pdl,
                                       const LinearConfigFilter& applies) {
  const LinearConfig* c = find_linear_config(user, device, bits, n, k, m, pdl, applies);
  return c ? c : find_linear_config(compiled, device, bits, n, k, m, pdl, applies);
}

std::vector<LinearConfig> read_user_linear_configs() {
  const char* list = std::getenv(kLinearConfigsEnv);
  return list ? load_linear_config_files(list) : std::vector<LinearConfig>{};
}

const std::vector<LinearConfig>& user_linear_configs() {
  // Read at the first plan; a bad file throws here, and so again at every later plan.
  static const std::vector<LinearConfig> table = read_user_linear_configs();
  return table;
}

const std::vector<LinearConfig>& compiled_linear_configs() {
  static const std::vector<LinearConfig> table = parse_linear_configs(generated::kLinearConfigsJson);
  return table;
}

const LinearConfig* find_linear_config(int bits, int64_t n, int64_t k, int64_t m, bool pdl,
                                       const LinearConfigFilter& applies) {
  const std::vector<LinearConfig>& table = compiled_linear_configs();
  const std::vector<LinearConfig>& user = user_linear_configs();
  static const std::string device = [] {
    int dev = 0;
    cudaDeviceProp p{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
      cudaGetLastError();
      return std::string();
    }
    return std::string(p.name);
  }();
  if (device.empty()) return nullptr;
  return find_linear_config(user, table, device, bits, n, k, m, pdl, applies);
}

}  // namespace kbit::detail
