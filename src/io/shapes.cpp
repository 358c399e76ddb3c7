#include "kbit/shapes.h"

#include <algorithm>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "kbit/error.h"

namespace kbit {
namespace generated {
extern const char* const kShapesJson;  // shapes_data.cpp, generated from data/shapes.json
}

namespace {

using nlohmann::json;

// A field's value, or `fallback` when absent; a present field of the wrong type is an error.
template <typename T>
T field(const json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if constexpr (std::is_same_v<T, bool>) {
    KBIT_REQUIRE(v.is_boolean(), where, ": '", key, "' must be true or false");
  } else if constexpr (std::is_integral_v<T>) {
    KBIT_REQUIRE(v.is_number_integer(), where, ": '", key, "' must be an integer");
  } else {
    KBIT_REQUIRE(v.is_string(), where, ": '", key, "' must be a string");
  }
  return v.get<T>();
}

Projection parse_projection(const json& p, const std::string& where_model) {
  KBIT_REQUIRE(p.is_object(), where_model, ": each projection must be an object");
  KBIT_REQUIRE(p.contains("name") && p["name"].is_string() && !p["name"].get<std::string>().empty(), where_model,
               ": a projection needs a non-empty string 'name'");
  Projection pr;
  pr.name = p["name"].get<std::string>();
  const std::string where = where_model + ", projection " + pr.name;
  KBIT_REQUIRE(p.contains("K") && p.contains("N"), where, ": needs K and N");
  pr.K = field<int64_t>(p, "K", 0, where);
  pr.N = field<int64_t>(p, "N", 0, where);
  constexpr int64_t kMaxDim = std::numeric_limits<int32_t>::max();
  KBIT_REQUIRE(pr.K > 0 && pr.K <= kMaxDim && pr.N > 0 && pr.N <= kMaxDim, where, ": K and N must be 1..", kMaxDim,
               ", got K = ", pr.K, ", N = ", pr.N);
  const int64_t per_block = field<int64_t>(p, "per_block", 1, where);
  const int64_t experts = field<int64_t>(p, "experts", 1, where);
  const int64_t active = field<int64_t>(p, "active", 1, where);
  KBIT_REQUIRE(per_block >= 1 && per_block <= 1024, where, ": per_block must be 1..1024, got ", per_block);
  KBIT_REQUIRE(experts >= 1 && experts <= 65536, where, ": experts must be 1..65536, got ", experts);
  KBIT_REQUIRE(active >= 1 && active <= experts, where, ": active must be 1..experts (", experts, "), got ", active);
  pr.per_block = int(per_block);
  pr.experts = int(experts);
  pr.active = int(active);
  pr.residual = field<bool>(p, "residual", false, where);
  return pr;
}

Error unknown_model(const std::vector<ModelShapes>& set, const std::string& key) {
  std::string known;
  for (const auto& m : set) known += (known.empty() ? "" : ", ") + m.key;
  return Error(detail::concat("unknown model '", key, "' (known: ", known, ")"));
}

}  // namespace

std::vector<ModelShapes> parse_model_shapes(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(detail::concat(origin, ": not valid JSON (", e.what(), ")"));
  }
  KBIT_REQUIRE(j.is_object(), origin, ": a shape set is a JSON object {\"MODEL\": {\"projections\": [...]}, ...}");
  std::vector<ModelShapes> out;
  for (const auto& [key, m] : j.items()) {
    if (key.starts_with("_")) continue;
    const std::string where = origin + ": model " + key;
    KBIT_REQUIRE(m.is_object() && m.contains("projections") && m["projections"].is_array(), where,
                 ": needs a 'projections' array");
    KBIT_REQUIRE(!m["projections"].empty(), where, ": has no projections");
    ModelShapes ms;
    ms.key = key;
    ms.source = field<std::string>(m, "source", "", where);
    std::set<std::string> names;
    for (const auto& p : m["projections"]) {
      Projection pr = parse_projection(p, where);
      KBIT_REQUIRE(names.insert(pr.name).second, where, ": projection name '", pr.name, "' appears twice");
      ms.projections.push_back(std::move(pr));
    }
    out.push_back(std::move(ms));
  }
  KBIT_REQUIRE(!out.empty(), origin, ": no models (every key starts with '_')");
  return out;
}

std::vector<ModelShapes> load_model_shapes(const std::string& path) {
  return parse_model_shapes(detail::read_text_file(path, "the shape set"), path);
}

std::string model_shapes_json(const std::vector<ModelShapes>& models) {
  using ordered = nlohmann::ordered_json;  // fields in the order data/shapes.json writes them
  ordered j = ordered::object();
  for (const auto& m : models) {
    ordered ps = ordered::array();
    for (const auto& p : m.projections) {
      ordered e = {{"name", p.name}, {"K", p.K}, {"N", p.N}};
      if (p.per_block != 1) e["per_block"] = p.per_block;
      if (p.experts != 1) e["experts"] = p.experts, e["active"] = p.active;
      if (p.residual) e["residual"] = true;
      ps.push_back(std::move(e));
    }
    j[m.key] = {{"source", m.source}, {"projections", std::move(ps)}};
  }
  return j.dump(2) + "\n";
}

std::vector<ModelShapes> select_model_shapes(const std::vector<ModelShapes>& set, const std::vector<std::string>& keys) {
  std::vector<ModelShapes> out;
  for (const auto& key : keys) {
    if (key == "all") {
      out.insert(out.end(), set.begin(), set.end());
      continue;
    }
    const auto it = std::find_if(set.begin(), set.end(), [&](const ModelShapes& m) { return m.key == key; });
    if (it == set.end()) throw unknown_model(set, key);
    out.push_back(*it);
  }
  return out;
}

const std::string& shapes_json() {
  static const std::string s = generated::kShapesJson;
  return s;
}

std::vector<ModelShapes> model_shapes() {
  static const std::vector<ModelShapes> models = parse_model_shapes(shapes_json(), "data/shapes.json");
  return models;
}

const ModelShapes& model_shapes(const std::string& key) {
  static const std::vector<ModelShapes> models = model_shapes();
  for (const auto& m : models)
    if (m.key == key) return m;
  throw unknown_model(models, key);
}

const Projection* ModelShapes::find(const std::string& name) const {
  for (const auto& p : projections)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace kbit
