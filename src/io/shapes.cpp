#include "kbit/shapes.h"

#include <nlohmann/json.hpp>

#include "kbit/error.h"

namespace kbit {
namespace generated {
extern const char* const kShapesJson;  // shapes_data.cpp, generated from data/shapes.json
}

const std::string& shapes_json() {
  static const std::string s = generated::kShapesJson;
  return s;
}

std::vector<ModelShapes> model_shapes() {
  static const std::vector<ModelShapes> models = [] {
    std::vector<ModelShapes> out;
    const auto j = nlohmann::json::parse(shapes_json());
    for (const auto& [key, m] : j.items()) {
      if (key.starts_with("_")) continue;
      ModelShapes ms;
      ms.key = key;
      ms.source = m.value("source", "");
      for (const auto& p : m.at("projections")) {
        Projection pr;
        pr.name = p.at("name").get<std::string>();
        pr.K = p.at("K").get<int64_t>();
        pr.N = p.at("N").get<int64_t>();
        pr.per_block = p.value("per_block", 1);
        pr.experts = p.value("experts", 1);
        pr.active = p.value("active", 1);
        pr.residual = p.value("residual", false);
        ms.projections.push_back(pr);
      }
      out.push_back(std::move(ms));
    }
    return out;
  }();
  return models;
}

const ModelShapes& model_shapes(const std::string& key) {
  static const std::vector<ModelShapes> models = model_shapes();
  std::string known;
  for (const auto& m : models) {
    if (m.key == key) return m;
    known += (known.empty() ? "" : ", ") + m.key;
  }
  throw Error(detail::concat("unknown model '", key, "' (known: ", known, ")"));
}

const Projection* ModelShapes::find(const std::string& name) const {
  for (const auto& p : projections)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace kbit
