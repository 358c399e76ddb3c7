// The projection shapes of a checkpoint, as a shape set (kbit/shapes.h) for kbit bench / tune.
#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "kbit/container.h"
#include "kbit/convert.h"
#include "kbit/error.h"

namespace kbit {
namespace fs = std::filesystem;
namespace {

using detail::concat;

// One weight of a layer: which stack (the name before the layer index), which layer, and its
// name inside the layer with any expert index taken out.
struct LayerWeight {
  std::string stack, name;
  int64_t layer = 0, expert = -1;
};

std::optional<LayerWeight> parse_layer_weight(const std::string& tensor) {
  // The layer part as is_default_quantized sees it; the longest prefix, so that nested stacks
  // (model.vision.blocks.0...) keep their layer index.
  static const std::regex layer_re(R"(^(.*(?:^|\.)(?:layers?|h|blocks?)\.)([0-9]{1,9})\.(.+)\.weight$)");
  static const std::regex expert_re(R"(^((?:.*\.)?experts\.)([0-9]{1,9})\.(.+)$)");
  std::smatch m;
  if (!std::regex_match(tensor, m, layer_re)) return std::nullopt;
  LayerWeight w;
  w.stack = m[1].str();
  w.layer = std::stoll(m[2].str());
  w.name = m[3].str();
  std::smatch e;
  if (std::regex_match(w.name, e, expert_re)) {
    w.expert = std::stoll(e[2].str());
    w.name = e[1].str() + e[3].str();
  }
  return w;
}

// Experts per token from the Hugging Face config beside the checkpoint, with the key it came from.
std::optional<std::pair<int, std::string>> config_top_k(const std::string& path) {
  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path config = dir / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) return std::nullopt;
  const std::string text = detail::read_text_file(config.string(), "the model config");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(concat(config.string(), ": not valid JSON (", e.what(), ")"));
  }
  static const char* const keys[] = {"num_experts_per_tok", "num_experts_per_token", "moe_top_k",
                                     "experts_per_token", "n_activated_experts", "top_k"};
  for (const nlohmann::json* section : {&j, j.contains("text_config") ? &j["text_config"] : nullptr}) {
    if (!section || !section->is_object()) continue;
    for (const char* key : keys)
      if (section->contains(key) && (*section)[key].is_number_integer()) {
        const int64_t v = (*section)[key].get<int64_t>();
        KBIT_REQUIRE(v >= 1 && v <= 65536, config.string(), ": ", key, " must be 1..65536, got ", v);
        return std::make_pair(int(v), concat("from config.json (", key, ")"));
      }
  }
  return std::nullopt;
}

std::string default_key(const std::string& path) {
  fs::path p = fs::path(path);
  if (!p.has_filename()) p = p.parent_path();  // "model/" names the folder
  std::string key = fs::is_directory(p) ? p.filename().string() : p.stem().string();
  for (char& c : key)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
  return key.empty() ? std::string("checkpoint") : key;
}

}  // namespace

CheckpointShapes checkpoint_shapes(const std::string& path, const CheckpointShapesOptions& options) {
  KBIT_REQUIRE(options.active >= 0 && options.active <= 65536, "active experts must be 1..65536 (0: from config.json), got ",
               options.active);
  const io::Checkpoint ck = io::Checkpoint::open(path);
  struct Seen {
    LayerWeight w;
    int64_t rows = 0, cols = 0;
  };
  std::vector<Seen> seen;
  CheckpointShapes out;
  constexpr std::string_view kPacked = ".kbit_packed";
  for (const auto& shard : ck.shards()) {
    const auto quantized_list = io::quantized_names(shard);
    const std::set<std::string> quantized(quantized_list.begin(), quantized_list.end());
    // In data order, a quantized weight where its packed words are, so that plain and quantized
    // checkpoints of one model list their projections alike.
    for (const io::TensorInfo& t : shard.tensors()) {
      std::string name = t.name;
      const bool packed = name.ends_with(kPacked) && quantized.count(name.substr(0, name.size() - kPacked.size()));
      if (packed) name.resize(name.size() - kPacked.size());
      else if (io::is_kbit_tensor_part(name)) continue;
      if (!is_default_quantized(name)) continue;
      const auto w = parse_layer_weight(name);
      if (!w) continue;
      if (packed) {
        const io::QuantizedShape q = io::quantized_shape(shard, name);
        seen.push_back({*w, q.rows, q.cols});
      } else if (t.shape.size() != 2 || !is_weight_float(t.dtype)) {
        ++out.skipped;
      } else {
        seen.push_back({*w, t.shape[0], t.shape[1]});
      }
    }
  }
  KBIT_REQUIRE(!seen.empty(), path, ": no transformer-layer weights (...layers.N.NAME.weight, 2-D) found",
               out.skipped ? concat(" (", out.skipped, " tensors named like them are not 2-D floats)") : std::string());
  out.weights = int64_t(seen.size());

  std::set<std::string> stacks;
  for (const auto& s : seen) stacks.insert(s.w.stack);
  // Per (stack, layer, name): the shape (which must agree across the layer's experts) and the experts.
  struct LayerProjection {
    int64_t rows = 0, cols = 0, experts = 0;
  };
  std::map<std::tuple<std::string, int64_t, std::string>, LayerProjection> per_layer;
  std::map<std::string, size_t> first_seen;  // name -> index of its first weight, to keep the checkpoint's order
  std::set<std::pair<std::string, int64_t>> layers;
  for (const auto& s : seen) {
    const std::string name = stacks.size() > 1 ? s.w.stack + "*." + s.w.name : s.w.name;
    layers.insert({s.w.stack, s.w.layer});
    first_seen.try_emplace(name, first_seen.size());
    auto [it, fresh] = per_layer.try_emplace({s.w.stack, s.w.layer, name}, LayerProjection{s.rows, s.cols, 0});
    KBIT_REQUIRE(it->second.rows == s.rows && it->second.cols == s.cols, path, ": layer ", s.w.layer, "'s ", name,
                 " weights differ in shape ([", it->second.rows, ", ", it->second.cols, "] and [", s.rows, ", ", s.cols,
                 "])");
    if (s.w.expert >= 0) it->second.experts = std::max(it->second.experts, s.w.expert + 1);
  }
  out.layers = int(layers.size());

  // The experts' and the shared expert's gate_proj and up_proj run as one [2I, H] projection
  // (io::load_moe_layer, kbit::moe_forward): list them so, as gate_up_proj.
  static const std::regex gate_re(R"(^(.*(?:^|\.)(?:experts|shared_experts?)\.)gate_proj$)");
  for (auto it = per_layer.begin(); it != per_layer.end();) {
    const auto& [stack, layer, name] = it->first;
    std::smatch m;
    if (!std::regex_match(name, m, gate_re)) {
      ++it;
      continue;
    }
    const std::string head = m[1].str();
    const auto up = per_layer.find({stack, layer, head + "up_proj"});
    if (up == per_layer.end() || up->second.rows != it->second.rows || up->second.cols != it->second.cols ||
        up->second.experts != it->second.experts) {
      ++it;
      continue;
    }
    LayerProjection merged = it->second;
    merged.rows *= 2;
    const std::tuple<std::string, int64_t, std::string> key{stack, layer, head + "gate_up_proj"};
    first_seen.try_emplace(head + "gate_up_proj", first_seen.at(name));
    per_layer.erase(up);
    it = per_layer.erase(it);
    per_layer.emplace(key, merged);  // sorts after ...gate_proj: the loop reaches it and passes over it
  }

  std::optional<std::pair<int, std::string>> top_k;
  if (options.active > 0) top_k = std::make_pair(options.active, std::string("from --active"));
  bool any_experts = false;
  for (const auto& [k, p] : per_layer) any_experts |= p.experts > 0;
  if (any_experts && !top_k) top_k = config_top_k(path);
  out.active_source = !any_experts ? ""
                      : top_k     ? top_k->second
                                  : "1, by default (no top-k key in a config.json beside the checkpoint; pass --active)";

  // One entry per (name, shape, experts), in the order of first layer, then the checkpoint's order.
  struct Entry {
    int64_t first_layer = 0;
    size_t seen = 0;
    Projection p;
  };
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, Entry> entries;
  for (const auto& [key, lp] : per_layer) {
    const auto& [stack, layer, name] = key;
    auto [it, fresh] = entries.try_emplace({name, lp.rows, lp.cols, lp.experts}, Entry{layer, first_seen.at(name), {}});
    if (!fresh) {
      it->second.first_layer = std::min(it->second.first_layer, layer);
      continue;
    }
    Projection& p = it->second.p;
    p.name = name;
    p.N = lp.rows;
    p.K = lp.cols;
    if (lp.experts > 0) {
      p.experts = int(std::min<int64_t>(lp.experts, 65536));
      p.active = std::clamp(top_k ? top_k->first : 1, 1, p.experts);
    }
  }
  std::vector<Entry> ordered;
  for (auto& [key, e] : entries) ordered.push_back(e);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Entry& a, const Entry& b) {
    return a.first_layer != b.first_layer ? a.first_layer < b.first_layer : a.seen < b.seen;
  });
  std::set<std::string> names;
  for (auto& e : ordered) {
    if (!names.insert(e.p.name).second) e.p.name = concat(e.p.name, "@L", e.first_layer);
    out.model.projections.push_back(e.p);
  }
  out.model.key = options.key.empty() ? default_key(path) : options.key;
  out.model.source = concat("checkpoint ", path, " (", out.layers, out.layers == 1 ? " layer, " : " layers, ", out.weights,
                            out.weights == 1 ? " weight)" : " weights)");
  // The same checks as a shape-set file gets (dimension limits, experts, names).
  return {parse_model_shapes(model_shapes_json({out.model}), path).front(), out.layers, out.weights, out.skipped,
          out.active_source};
}

}  // namespace kbit
