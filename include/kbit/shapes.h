// Real model projection shapes (data/shapes.json, compiled into the library so
// the tools need no data files at run time).
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
};

struct ModelShapes {
  std::string key, source;
  std::vector<Projection> projections;
  const Projection* find(const std::string& name) const;  // null when absent
};

const std::string& shapes_json();        // the embedded data/shapes.json
std::vector<ModelShapes> model_shapes();  // every model in it
const ModelShapes& model_shapes(const std::string& key);  // throws, listing the known keys

}  // namespace kbit
