// Reading and writing quantized matrices in the safetensors container.
#include "kbit/container.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "kbit/error.h"

namespace kbit::io {
namespace {

using kbit::detail::concat;
constexpr const char* kPacked = ".kbit_packed";
constexpr const char* kAbsmax = ".kbit_absmax";
constexpr const char* kCodebook = ".kbit_codebook";
constexpr const char* kMeta = ".kbit";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string meta_json(int bits, int64_t rows, int64_t cols, float tensor_scale, const std::optional<Rotation>& rotation,
                      const std::string& codebook) {
  nlohmann::ordered_json j;
  j["k"] = bits;
  j["shape"] = {rows, cols};
  j["tensor_scale"] = double(tensor_scale);
  if (rotation) {
    nlohmann::ordered_json h;
    h["mode"] = rotation->mode == RotationMode::row ? "row" : "block";
    h["size"] = rotation->size;
    h["signs"] = rotation->signs.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(rotation->signs);
    j["hadamard"] = h;
  } else {
    j["hadamard"] = nullptr;
  }
  j["codebook"] = codebook;
  return j.dump();
}

// f(), with `where` in front of the message of any kbit::Error it throws.
template <typename F>
auto with_context(const std::string& where, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(concat(where, ": ", e.what()));
  }
}

const TensorInfo& part(const SafetensorsFile& f, const std::string& name, const char* suffix, DType dtype,
                       int64_t numel) {
  const TensorInfo* t = f.find(name + suffix);
  KBIT_REQUIRE(t, f.path(), ": quantized weight '", name, "' has no tensor ", name, suffix);
  KBIT_REQUIRE(t->dtype == dtype, f.path(), ": ", t->name, " has dtype ", dtype_name(t->dtype), ", expected ",
               dtype_name(dtype));
  KBIT_REQUIRE(t->numel() == numel, f.path(), ": ", t->name, " has ", t->numel(), " elements, expected ", numel);
  return *t;
}

}  // namespace

void declare_quantized(SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols, int bits,
                       const std::optional<Rotation>& rotation) {
  const Geometry g{rows, cols, bits};
  w.declare(name + kPacked, DType::i32, {rows, g.blocks_per_row(), bits});
  w.declare(name + kAbsmax, DType::u8, {rows, g.blocks_per_row()});
  w.declare(name + kCodebook, DType::f32, {int64_t(1) << bits});
  w.set_metadata(kFormatKey, std::to_string(kFormatVersion));
  // Placeholder of nearly the final length; the real scale and codebook name come with write_quantized.
  w.set_metadata(name + kMeta, meta_json(bits, rows, cols, 1.0f, rotation, "custom"));
}

void write_quantized(SafetensorsWriter& w, const std::string& name, const QuantizedMatrix& q) {
  KBIT_REQUIRE(q.memory() == Memory::host && q.layout() == Layout::flat, "write_quantized('", name,
               "'): the matrix must be a flat host matrix");
  const float s = q.tensor_scale();
  w.write({reinterpret_cast<const std::byte*>(q.words()), size_t(q.word_count()) * 4});
  w.write({reinterpret_cast<const std::byte*>(q.scales()), size_t(q.scale_count())});
  w.write({reinterpret_cast<const std::byte*>(q.codebook().values().data()), q.codebook().values().size() * 4});
  w.set_metadata(name + kMeta, meta_json(q.bits(), q.rows(), q.cols(), s, q.rotation(), q.codebook().name()));
}

bool is_kbit_tensor_part(const std::string& n) { return ends_with(n, kPacked) || ends_with(n, kAbsmax) || ends_with(n, kCodebook); }

std::vector<std::string> quantized_names(const SafetensorsFile& f) {
  std::vector<std::string> out;
  for (const auto& [k, v] : f.metadata())
    if (ends_with(k, kMeta)) out.push_back(k.substr(0, k.size() - std::strlen(kMeta)));
  return out;
}

namespace {

// NAME.kbit's metadata with its bit width and shape checked; `where` names it for later errors.
struct QuantizedMeta {
  nlohmann::json j;
  std::string where;
  int k = 0;
  int64_t rows = 0, cols = 0;
};

QuantizedMeta quantized_meta(const SafetensorsFile& f, const std::string& name) {
  const auto it = f.metadata().find(name + kMeta);
  KBIT_REQUIRE(it != f.metadata().end(), f.path(), ": no quantized weight named '", name, "'");
  QuantizedMeta m;
  try {
    m.j = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    throw Error(concat(f.path(), ": metadata ", name, kMeta, " is not valid JSON (", e.what(), ")"));
  }
  const nlohmann::json& j = m.j;
  m.where = concat(f.path(), ": ", name, kMeta);
  KBIT_REQUIRE(j.is_object() && j.contains("k") && j["k"].is_number_integer(), m.where, ": missing integer k");
  m.k = j["k"].get<int>();
  KBIT_REQUIRE(is_supported_bits(m.k), m.where, ": unsupported bit width k=", m.k);
  KBIT_REQUIRE(j.contains("shape") && j["shape"].is_array() && j["shape"].size() == 2 &&
                   j["shape"][0].is_number_integer() && j["shape"][1].is_number_integer(),
               m.where, ": shape must be [N, K]");
  m.rows = j["shape"][0].get<int64_t>();
  m.cols = j["shape"][1].get<int64_t>();
  with_context(m.where, [&] { require_quantized_shape(m.rows, m.cols); });
  return m;
}

}  // namespace

QuantizedShape quantized_shape(const SafetensorsFile& f, const std::string& name) {
  const QuantizedMeta m = quantized_meta(f, name);
  return {m.rows, m.cols, m.k};
}

QuantizedMatrix load_quantized(const SafetensorsFile& f, const std::string& name) {
  const QuantizedMeta meta = quantized_meta(f, name);
  const nlohmann::json& j = meta.j;
  const std::string& where = meta.where;
  const int k = meta.k;
  const int64_t rows = meta.rows, cols = meta.cols;
  KBIT_REQUIRE(j.contains("tensor_scale") && j["tensor_scale"].is_number(), where, ": missing tensor_scale");
  const float s = float(j["tensor_scale"].get<double>());
  int exp = 0;
  KBIT_REQUIRE(std::isfinite(s) && s > 0 && std::frexp(s, &exp) == 0.5f, where, ": tensor_scale ", s,
               " is not a positive power of two");
  std::optional<Rotation> rotation;
  if (j.contains("hadamard") && !j["hadamard"].is_null()) {
    const auto& h = j["hadamard"];
    KBIT_REQUIRE(h.is_object() && h.contains("mode") && h["mode"].is_string() && h.contains("size") &&
                     h["size"].is_number_integer(),
                 where, ": hadamard must be null or {\"mode\": \"block\"|\"row\", \"size\": B, \"signs\": [...]}");
    const std::string mode = h["mode"].get<std::string>();
    KBIT_REQUIRE(mode == "block" || mode == "row", where, ": unknown hadamard mode '", mode, "'");
    Rotation r;
    r.mode = mode == "row" ? RotationMode::row : RotationMode::block;
    r.size = h["size"].get<int64_t>();
    if (h.contains("signs") && !h["signs"].is_null()) {
      KBIT_REQUIRE(h["signs"].is_array(), where, ": hadamard signs must be an array of uint32 words");
      for (const auto& w : h["signs"]) {
        KBIT_REQUIRE(w.is_number_unsigned() && w.get<uint64_t>() <= 0xffffffffu, where,
                     ": hadamard signs must be uint32 words");
        r.signs.push_back(w.get<uint32_t>());
      }
    }
    with_context(where, [&] { require_supported_rotation(r, cols); });
    rotation = r;
  }

  const Geometry g{rows, cols, k};
  const TensorInfo& packed = part(f, name, kPacked, DType::i32, g.packed_words(Layout::flat));
  const TensorInfo& absmax = part(f, name, kAbsmax, DType::u8, g.scale_bytes(Layout::flat));
  const TensorInfo& cbt = part(f, name, kCodebook, DType::f32, int64_t(1) << k);

  float values[kMaxLevels];
  std::memcpy(values, f.bytes(cbt).data(), size_t(4) << k);
  Codebook cb =
      with_context(concat(f.path(), ": ", cbt.name), [&] { return Codebook::custom(k, {values, size_t(1) << k}); });
  if (cb == Codebook::bnf(k)) cb = Codebook::bnf(k);
  else if (cb == Codebook::nf(k)) cb = Codebook::nf(k);

  QuantizedMatrix q = QuantizedMatrix::allocate(rows, cols, cb, Layout::flat, Memory::host);
  q.set_tensor_scale(s);
  q.set_rotation(rotation);
  std::memcpy(q.words(), f.bytes(packed).data(), packed.bytes());
  std::memcpy(q.scales(), f.bytes(absmax).data(), absmax.bytes());
  return q;
}

std::vector<std::string> expert_weight_names(const Checkpoint& ck, const std::string& prefix,
                                             const std::string& projection) {
  const std::string head = prefix + ".experts.", tail = "." + projection + ".weight";
  std::map<int64_t, std::string> by_expert;
  for (const auto& shard : ck.shards())
    for (const std::string& name : quantized_names(shard)) {
      if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 || !ends_with(name, tail))
        continue;
      const std::string index = name.substr(head.size(), name.size() - head.size() - tail.size());
      if (index.empty() || index.size() > 9 || !std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      by_expert[std::stoll(index)] = name;
    }
  KBIT_REQUIRE(!by_expert.empty(), "no quantized weights ", head, "N", tail, " in the checkpoint");
  std::vector<std::string> out;
  for (const auto& [e, name] : by_expert) {
    KBIT_REQUIRE(e == int64_t(out.size()), "quantized expert weights ", head, "N", tail, ": expert ", out.size(),
                 " is missing (", by_expert.size(), " found, up to expert ", by_expert.rbegin()->first, ")");
    out.push_back(name);
  }
  return out;
}

QuantizedMatrix load_stacked(const Checkpoint& ck, std::span<const std::string> names, cpu::StackStats* stats) {
  KBIT_REQUIRE(!names.empty(), "load_stacked: no weight names");
  std::vector<QuantizedMatrix> parts;
  parts.reserve(names.size());
  for (const std::string& name : names) {
    const auto [file, info] = ck.find(name + kPacked);
    KBIT_REQUIRE(file, "load_stacked: no quantized weight named '", name, "' in the checkpoint");
    parts.push_back(load_quantized(*file, name));
  }
  std::vector<const QuantizedMatrix*> pointers;
  for (const auto& p : parts) pointers.push_back(&p);
  return cpu::stack_rows(pointers, stats, names);
}

namespace {

void add_stats(cpu::StackStats& total, const cpu::StackStats& s) {
  total.blocks += s.blocks, total.rescaled += s.rescaled, total.requantized += s.requantized;
}

// PREFIX.experts.E.gate_proj, then up_proj, for every expert: the names of gate_up's stack.
std::vector<std::string> gate_up_names(const std::vector<std::string>& gate, const std::vector<std::string>& up) {
  std::vector<std::string> names;
  for (size_t e = 0; e < gate.size(); ++e) names.push_back(gate[e]), names.push_back(up[e]);
  return names;
}

QuantizedShape shape_of(const Checkpoint& ck, const std::string& name) {
  const auto [file, info] = ck.find(name + kPacked);
  KBIT_REQUIRE(file, "no quantized weight named '", name, "' in the checkpoint");
  return quantized_shape(*file, name);
}

// Every named weight's shape is [rows, cols].
void require_shapes(const Checkpoint& ck, const std::vector<std::string>& names, int64_t rows, int64_t cols) {
  for (const std::string& name : names) {
    const QuantizedShape s = shape_of(ck, name);
    KBIT_REQUIRE(s.rows == rows && s.cols == cols, name, " is [", s.rows, ", ", s.cols, "], expected [", rows, ", ",
                 cols, "] like the layer's first");
  }
}

}  // namespace

MoeLayer load_moe_layer(const Checkpoint& ck, const std::string& prefix) {
  const auto gate = expert_weight_names(ck, prefix, "gate_proj");
  const auto up = expert_weight_names(ck, prefix, "up_proj");
  const auto down = expert_weight_names(ck, prefix, "down_proj");
  KBIT_REQUIRE(gate.size() == up.size() && gate.size() == down.size(), prefix, ": the experts number ", gate.size(),
               " (gate_proj), ", up.size(), " (up_proj) and ", down.size(), " (down_proj)");
  MoeLayer l;
  l.experts = int64_t(gate.size());
  const QuantizedShape first = shape_of(ck, gate.front());
  l.intermediate = first.rows, l.hidden = first.cols;
  require_shapes(ck, gate, l.intermediate, l.hidden);
  require_shapes(ck, up, l.intermediate, l.hidden);
  require_shapes(ck, down, l.hidden, l.intermediate);
  cpu::StackStats s;
  l.gate_up = load_stacked(ck, gate_up_names(gate, up), &s);
  add_stats(l.stats, s);
  l.down = load_stacked(ck, down, &s);
  add_stats(l.stats, s);

  for (const char* shared : {".shared_expert.", ".shared_experts."}) {
    const std::string base = prefix + shared;
    const std::string g = base + "gate_proj.weight", u = base + "up_proj.weight", d = base + "down_proj.weight";
    const bool any = ck.find(g + kPacked).first || ck.find(u + kPacked).first || ck.find(d + kPacked).first;
    if (!any) continue;
    KBIT_REQUIRE(!l.has_shared, prefix, ": both shared_expert and shared_experts weights");
    const QuantizedShape sg = shape_of(ck, g);
    KBIT_REQUIRE(sg.cols == l.hidden, g, " is [", sg.rows, ", ", sg.cols, "], expected ", l.hidden, " columns");
    l.shared_intermediate = sg.rows;
    require_shapes(ck, {u}, l.shared_intermediate, l.hidden);
    require_shapes(ck, {d}, l.hidden, l.shared_intermediate);
    l.shared_gate_up = load_stacked(ck, std::vector<std::string>{g, u}, &s);
    add_stats(l.stats, s);
    l.shared_down = load_stacked(ck, std::vector<std::string>{d}, &s);
    add_stats(l.stats, s);
    l.has_shared = true;
  }
  return l;
}

}  // namespace kbit::io
