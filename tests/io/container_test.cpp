// Quantized matrices in the safetensors container.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "kbit/container.h"
#include "kbit/cpu.h"
#include "kbit/error.h"
#include "support/test_support.h"

namespace kbit::io {
namespace {

// Writes q as weight "w" into DIR/x.safetensors with its metadata replaced by `meta`.
SafetensorsFile write_with_metadata(const std::filesystem::path& dir, const QuantizedMatrix& q, const std::string& meta) {
  const auto p = (dir / "x.safetensors").string();
  SafetensorsWriter w(p);
  declare_quantized(w, "w", q.rows(), q.cols(), q.bits());
  w.begin();
  write_quantized(w, "w", q);
  w.set_metadata("w.kbit", meta);
  w.finish();
  return SafetensorsFile::open(p);
}

TEST(Container, RoundTripsQuantizedMatrices) {
  const auto dir = test::temp_dir("c");
  const auto path = (dir / "q.safetensors").string();
  const auto m = test::random_matrix(33, 65, DType::bf16, 3);
  const QuantizedMatrix a = cpu::quantize(m.view(), Codebook::bnf(3));
  const QuantizedMatrix b = cpu::quantize(m.view(), Codebook::nf(5));
  {
    SafetensorsWriter w(path);
    declare_quantized(w, "layers.0.q.weight", 33, 65, 3);
    declare_quantized(w, "layers.0.k.weight", 33, 65, 5);
    w.declare("norm", DType::f32, {2});
    w.begin();
    write_quantized(w, "layers.0.q.weight", a);
    write_quantized(w, "layers.0.k.weight", b);
    const float n[2] = {1, 2};
    w.write(std::as_bytes(std::span(n)));
    w.finish();
  }
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.metadata().at(kFormatKey), "1");
  EXPECT_EQ(quantized_names(f).size(), 2u);
  const auto meta = nlohmann::json::parse(f.metadata().at("layers.0.q.weight.kbit"));
  EXPECT_EQ(meta["k"], 3);
  EXPECT_EQ(meta["shape"], nlohmann::json::array({33, 65}));
  EXPECT_TRUE(meta["hadamard"].is_null());
  EXPECT_EQ(float(meta["tensor_scale"].get<double>()), a.tensor_scale());
  EXPECT_EQ(f.at("layers.0.q.weight.kbit_packed").shape, (std::vector<int64_t>{33, 3, 3}));
  EXPECT_EQ(f.at("layers.0.q.weight.kbit_absmax").dtype, DType::u8);

  for (const auto& [name, orig] : {std::pair{"layers.0.q.weight", &a}, std::pair{"layers.0.k.weight", &b}}) {
    const QuantizedMatrix q = load_quantized(f, name);
    EXPECT_EQ(q.bits(), orig->bits());
    EXPECT_EQ(q.codebook().name(), orig->codebook().name());
    EXPECT_EQ(q.tensor_scale(), orig->tensor_scale());
    EXPECT_EQ(0, std::memcmp(q.words(), orig->words(), size_t(q.word_count()) * 4));
    EXPECT_EQ(0, std::memcmp(q.scales(), orig->scales(), size_t(q.scale_count())));
  }
  EXPECT_THROW(load_quantized(f, "norm"), Error);
}

TEST(Container, RejectsInconsistentMetadata) {
  const auto dir = test::temp_dir("bad");
  const auto m = test::random_matrix(4, 32, DType::f32, 1);
  const QuantizedMatrix a = cpu::quantize(m.view(), Codebook::bnf(4));
  auto write_with = [&](const std::string& meta) { return write_with_metadata(dir, a, meta); };
  EXPECT_THROW(load_quantized(write_with(R"({"k":6,"shape":[4,32],"tensor_scale":1})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(R"({"k":4,"shape":[4,33],"tensor_scale":1})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(R"({"k":4,"shape":[4,32],"tensor_scale":0.3})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(R"({"k":3,"shape":[4,32],"tensor_scale":1})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(R"({"k":4,"shape":[4,32]})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with("not json"), "w"), Error);
  // Shapes whose counts would overflow int64 are refused before any size is computed from them.
  test::expect_error([&] { load_quantized(write_with(R"({"k":4,"shape":[9223372036854775807,32],"tensor_scale":1})"), "w"); },
                     "is too large");
  test::expect_error([&] { load_quantized(write_with(R"({"k":4,"shape":[4,9223372036854775807],"tensor_scale":1})"), "w"); },
                     "is too large");
  test::expect_error([&] { load_quantized(write_with(R"({"k":4,"shape":[1073741824,1073741824],"tensor_scale":1})"), "w"); },
                     "2^48 elements");
  test::expect_error([] { QuantizedMatrix::allocate(int64_t(1) << 40, 64, Codebook::bnf(4), Layout::mma16, Memory::host); },
                     "is too large");
  EXPECT_NO_THROW(load_quantized(write_with(R"({"k":4,"shape":[4,32],"tensor_scale":0.25,"hadamard":null})"), "w"));
}

}  // namespace
}  // namespace kbit::io

namespace kbit::io {
namespace {

TEST(Container, RotationRoundTripsAndIsValidated) {
  const auto dir = test::temp_dir("rot");
  const auto m = test::random_matrix(8, 3584, DType::f32, 1);
  QuantizedMatrix q = cpu::quantize(m.view(), Codebook::bnf(3));
  q.set_rotation(Rotation::make(RotationMode::row, 0, 3584, 11));
  QuantizedMatrix b = cpu::quantize(m.view(), Codebook::bnf(3));
  b.set_rotation(Rotation::make(RotationMode::block, 128, 3584, std::nullopt));
  const auto path = (dir / "r.safetensors").string();
  {
    SafetensorsWriter w(path);
    declare_quantized(w, "a", 8, 3584, 3, q.rotation());
    declare_quantized(w, "b", 8, 3584, 3, b.rotation());
    w.begin();
    write_quantized(w, "a", q);
    write_quantized(w, "b", b);
    w.finish();
  }
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(load_quantized(f, "a").rotation(), q.rotation());
  EXPECT_EQ(load_quantized(f, "b").rotation(), b.rotation());
  EXPECT_EQ(cpu::repack(load_quantized(f, "a"), Layout::tiled_k64).rotation(), q.rotation());

  auto write_with = [&](const std::string& meta) { return write_with_metadata(dir, q, meta); };
  const std::string head = R"({"k":3,"shape":[8,3584],"tensor_scale":)" + std::to_string(q.tensor_scale()) + ",";
  EXPECT_THROW(load_quantized(write_with(head + R"("hadamard":{"mode":"diag","size":64}})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(head + R"("hadamard":{"mode":"block","size":48}})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(head + R"("hadamard":{"mode":"row","size":2048}})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(head + R"("hadamard":{"mode":"block","size":64,"signs":[1]}})"), "w"), Error);
  EXPECT_THROW(load_quantized(write_with(head + R"("hadamard":"row"})"), "w"), Error);
  EXPECT_NO_THROW(load_quantized(write_with(head + R"("hadamard":{"mode":"block","size":64,"signs":[1,2]}})"), "w"));
}

}  // namespace
}  // namespace kbit::io

namespace kbit::io {
namespace {

// A checkpoint quantized one expert at a time (as kbit quantize writes a Hugging Face MoE layer), read back
// as the stacks kbit::moe_forward takes.
TEST(Container, ExpertWeightsLoadAsOneStack) {
  const auto dir = test::temp_dir("experts");
  const int experts = 4;
  const int64_t hidden = 64, inter = 32;
  std::map<std::string, QuantizedMatrix> q;
  auto quantized = [&](const std::string& name, int64_t rows, int64_t cols, uint64_t seed, float sigma) {
    q.emplace(name, cpu::quantize(test::random_matrix(rows, cols, DType::bf16, seed, sigma).view(), Codebook::bnf(4)));
  };
  const std::string layer = "model.layers.3.mlp";
  for (int e = 0; e < experts; ++e) {  // expert e's weights 2^e larger: four tensor scales
    const std::string p = layer + ".experts." + std::to_string(e) + ".";
    quantized(p + "gate_proj.weight", inter, hidden, 10 + e, float(1 << e));
    quantized(p + "up_proj.weight", inter, hidden, 20 + e, float(1 << e));
    quantized(p + "down_proj.weight", hidden, inter, 30 + e, float(1 << e));
  }
  // Names the expert lookup must pass over.
  quantized(layer + ".experts.x.down_proj.weight", hidden, inter, 40, 1.0f);
  quantized(layer + ".shared_expert.down_proj.weight", hidden, inter, 41, 1.0f);
  quantized(layer + ".experts.0.down_proj.weight_scale", hidden, inter, 42, 1.0f);
  {
    SafetensorsWriter w((dir / "model.safetensors").string());
    for (const auto& [name, m] : q) declare_quantized(w, name, m.rows(), m.cols(), m.bits());
    w.begin();
    for (const auto& [name, m] : q) write_quantized(w, name, m);
    w.finish();
  }
  const Checkpoint ck = Checkpoint::open((dir / "model.safetensors").string());
  const auto down_names = expert_weight_names(ck, layer, "down_proj");
  ASSERT_EQ(down_names.size(), size_t(experts));
  EXPECT_EQ(down_names[2], layer + ".experts.2.down_proj.weight");
  cpu::StackStats st;
  const QuantizedMatrix down = load_stacked(ck, down_names, &st);
  EXPECT_EQ(down.rows(), experts * hidden);
  EXPECT_EQ(down.tensor_scale(), q.at(down_names[3]).tensor_scale());
  EXPECT_EQ(st.requantized, 0);
  std::vector<float> all(size_t(down.rows() * inter)), one(size_t(hidden * inter));
  cpu::dequantize(down, MutableTensorView{all.data(), DType::f32, down.rows(), inter, inter});
  for (int e = 0; e < experts; ++e) {
    cpu::dequantize(q.at(down_names[size_t(e)]), MutableTensorView{one.data(), DType::f32, hidden, inter, inter});
    EXPECT_EQ(0, std::memcmp(all.data() + e * hidden * inter, one.data(), one.size() * 4)) << "expert " << e;
  }
  // gate_up: each expert's gate rows, then its up rows.
  const auto gate = expert_weight_names(ck, layer, "gate_proj"), up = expert_weight_names(ck, layer, "up_proj");
  std::vector<std::string> gate_up;
  for (int e = 0; e < experts; ++e) gate_up.push_back(gate[size_t(e)]), gate_up.push_back(up[size_t(e)]);
  EXPECT_EQ(load_stacked(ck, gate_up).rows(), experts * 2 * inter);

  test::expect_error([&] { expert_weight_names(ck, layer, "w9"); }, "no quantized weights model.layers.3.mlp.experts.N.w9.weight");
  test::expect_error([&] { expert_weight_names(ck, "model.layers.4.mlp", "down_proj"); }, "no quantized weights");
  const std::vector<std::string> mixed = {down_names[0], gate[0]};  // [64, 32] and [32, 64]
  test::expect_error([&] { load_stacked(ck, mixed); },
                     "'" + gate[0] + "' has K = 64, '" + down_names[0] + "' has K = 32");
  const std::vector<std::string> absent = {down_names[0], "nope"};
  test::expect_error([&] { load_stacked(ck, absent); }, "no quantized weight named 'nope'");
}

// load_moe_layer: the experts' gate_up and down stacks and the shared expert's, as MoeWeights takes them.
TEST(Container, MoeLayerStacksExpertsAndSharedExpert) {
  const auto dir = test::temp_dir("moe_layer");
  const int experts = 3;
  const int64_t hidden = 64, inter = 32, shared_inter = 96;
  const std::string layer = "model.layers.1.mlp";
  std::map<std::string, QuantizedMatrix> q;
  auto quantized = [&](const std::string& name, int64_t rows, int64_t cols, uint64_t seed, float sigma) {
    q.insert_or_assign(name, cpu::quantize(test::random_matrix(rows, cols, DType::bf16, seed, sigma).view(), Codebook::bnf(3)));
  };
  for (int e = 0; e < experts; ++e) {
    const std::string p = layer + ".experts." + std::to_string(e) + ".";
    quantized(p + "gate_proj.weight", inter, hidden, 10 + e, float(1 << e));
    quantized(p + "up_proj.weight", inter, hidden, 20 + e, 0.5f);
    quantized(p + "down_proj.weight", hidden, inter, 30 + e, 2.0f);
  }
  quantized(layer + ".shared_experts.gate_proj.weight", shared_inter, hidden, 40, 1.0f);
  quantized(layer + ".shared_experts.up_proj.weight", shared_inter, hidden, 41, 4.0f);
  quantized(layer + ".shared_experts.down_proj.weight", hidden, shared_inter, 42, 1.0f);
  auto write = [&](const std::string& file) {
    SafetensorsWriter w((dir / file).string());
    for (const auto& [name, m] : q) declare_quantized(w, name, m.rows(), m.cols(), m.bits());
    w.begin();
    for (const auto& [name, m] : q) write_quantized(w, name, m);
    w.finish();
    return Checkpoint::open((dir / file).string());
  };
  auto dequantized = [](const QuantizedMatrix& m) {
    std::vector<float> v(size_t(m.rows() * m.cols()));
    cpu::dequantize(m, MutableTensorView{v.data(), DType::f32, m.rows(), m.cols(), m.cols()});
    return v;
  };
  // Rows [row0, row0 + part's rows) of `stack` dequantize bit-identically to `part`.
  auto expect_rows = [&](const std::vector<float>& stack, int64_t row0, const QuantizedMatrix& part, const std::string& what) {
    const auto one = dequantized(part);
    EXPECT_EQ(0, std::memcmp(stack.data() + row0 * part.cols(), one.data(), one.size() * 4)) << what;
  };

  const MoeLayer l = load_moe_layer(write("a.safetensors"), layer);
  EXPECT_EQ(l.experts, experts);
  EXPECT_EQ(l.hidden, hidden);
  EXPECT_EQ(l.intermediate, inter);
  ASSERT_EQ(l.gate_up.rows(), experts * 2 * inter);
  ASSERT_EQ(l.down.rows(), experts * hidden);
  EXPECT_EQ(l.down.cols(), inter);
  ASSERT_TRUE(l.has_shared);
  EXPECT_EQ(l.shared_intermediate, shared_inter);
  EXPECT_EQ(l.stats.requantized, 0);
  const auto gate_up = dequantized(l.gate_up), down = dequantized(l.down);
  for (int e = 0; e < experts; ++e) {
    const std::string p = layer + ".experts." + std::to_string(e) + ".";
    expect_rows(gate_up, e * 2 * inter, q.at(p + "gate_proj.weight"), "gate " + std::to_string(e));
    expect_rows(gate_up, e * 2 * inter + inter, q.at(p + "up_proj.weight"), "up " + std::to_string(e));
    expect_rows(down, e * hidden, q.at(p + "down_proj.weight"), "down " + std::to_string(e));
  }
  const auto shared_gate_up = dequantized(l.shared_gate_up);
  expect_rows(shared_gate_up, 0, q.at(layer + ".shared_experts.gate_proj.weight"), "shared gate");
  expect_rows(shared_gate_up, shared_inter, q.at(layer + ".shared_experts.up_proj.weight"), "shared up");
  expect_rows(dequantized(l.shared_down), 0, q.at(layer + ".shared_experts.down_proj.weight"), "shared down");

  // Problems name the tensor.
  quantized(layer + ".experts.1.down_proj.weight", hidden, inter + 32, 50, 1.0f);
  test::expect_error([&] { load_moe_layer(write("b.safetensors"), layer); },
                     layer + ".experts.1.down_proj.weight is [64, 64], expected [64, 32]");
  quantized(layer + ".experts.1.down_proj.weight", hidden, inter, 50, 1.0f);
  q.erase(layer + ".experts.2.up_proj.weight");
  test::expect_error([&] { load_moe_layer(write("c.safetensors"), layer); },
                     "the experts number 3 (gate_proj), 2 (up_proj) and 3 (down_proj)");
  quantized(layer + ".experts.2.up_proj.weight", inter, hidden, 51, 1.0f);
  q.erase(layer + ".shared_experts.gate_proj.weight");
  test::expect_error([&] { load_moe_layer(write("d.safetensors"), layer); },
                     "no quantized weight named '" + layer + ".shared_experts.gate_proj.weight'");
  q.erase(layer + ".shared_experts.up_proj.weight");
  q.erase(layer + ".shared_experts.down_proj.weight");
  EXPECT_FALSE(load_moe_layer(write("e.safetensors"), layer).has_shared);
  test::expect_error([&] { load_moe_layer(write("f.safetensors"), "model.layers.2.mlp"); }, "no quantized weights");
}

TEST(Container, ExpertWeightNamesNeedEveryExpert) {
  const auto dir = test::temp_dir("gap");
  const QuantizedMatrix m = cpu::quantize(test::random_matrix(16, 32, DType::f32, 1).view(), Codebook::bnf(2));
  {
    SafetensorsWriter w((dir / "m.safetensors").string());
    for (int e : {0, 1, 3}) declare_quantized(w, "blk.experts." + std::to_string(e) + ".w1.weight", 16, 32, 2);
    w.begin();
    for (int e : {0, 1, 3}) write_quantized(w, "blk.experts." + std::to_string(e) + ".w1.weight", m);
    w.finish();
  }
  const Checkpoint ck = Checkpoint::open((dir / "m.safetensors").string());
  test::expect_error([&] { expert_weight_names(ck, "blk", "w1"); }, "expert 2 is missing (3 found, up to expert 3)");
}

}  // namespace
}  // namespace kbit::io
