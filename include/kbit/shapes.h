// Real model projection shapes (data/shapes.json, compiled into the library so
// the tools need no data files at run time), and shape sets of other models from a JSON
// file in the same schema (kbit bench / kbit tune --shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit {

struct Projection {
  std::string name;
  int64_t K = 0, N = 0;
  int per_block = 1;
  int experts = 1;  // > 1: a grouped (MoE) projection
  int active = 1;   // experts each token is routed to
  bool residual = false;
  bool operator==(const Projection&) const = default;
};

struct ModelShapes {
  std::string key, source;
  std::vector<Projection> projections;
  const Projection* find(const std::string& name) const;  // null when absent
  bool operator==(const ModelShapes&) const = default;
};

const std::string& shapes_json();        // the embedded data/shapes.json
std::vector<ModelShapes> model_shapes();  // every model in it
const ModelShapes& model_shapes(const std::string& key);  // throws, listing the known keys

// Shape sets in data/shapes.json's schema, for models the library does not carry:
//   {"MODEL": {"source": "...", "projections": [{"name": "q", "K": 4096, "N": 4096,
//     "per_block": 1, "experts": 1, "active": 1, "residual": false}, ...]}, ...}
// (keys starting with "_" are comments; per_block, experts, active and residual are optional).
// Every problem throws a kbit::Error that starts with `origin` (a file name, say) and names the
// model and projection: K or N not positive or above 2^31 - 1, experts < 1, active outside
// 1..experts, a duplicate projection name, a model without projections.
std::vector<ModelShapes> parse_model_shapes(const std::string& json, const std::string& origin);
std::vector<ModelShapes> load_model_shapes(const std::string& path);  // parse_model_shapes of a file
// The same schema back (parse_model_shapes(model_shapes_json(s), ...) == s).
std::string model_shapes_json(const std::vector<ModelShapes>& models);
// The models named by `keys` ("all": every one) out of `set`, in the order asked; an unknown key
// throws, listing the keys of `set`.
std::vector<ModelShapes> select_model_shapes(const std::vector<ModelShapes>& set, const std::vector<std::string>& keys);

}  // namespace kbit
