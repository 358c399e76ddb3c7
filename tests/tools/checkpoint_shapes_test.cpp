// checkpoint_shapes: a checkpoint's layer projections as a shape set (kbit shapes, --shapes).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "kbit/convert.h"
#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "support/test_support.h"

namespace kbit {
namespace {
namespace fs = std::filesystem;

using Spec = test::TensorSpec;
using test::write_checkpoint;

// Layer 0 dense; layers 1 and 2 with 4 experts, a shared expert and a router; a 3-D stacked tensor.
std::vector<Spec> moe_model() {
  std::vector<Spec> s = {
      {"model.embed_tokens.weight", {100, 32}},
      {"model.layers.0.input_layernorm.weight", {32}},
      {"model.layers.0.self_attn.q_proj.weight", {64, 32}},
      {"model.layers.0.mlp.down_proj.weight", {32, 96}},
      {"lm_head.weight", {100, 32}},
  };
  for (int l = 1; l <= 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    s.push_back({p + "self_attn.q_proj.weight", {64, 32}});
    s.push_back({p + "mlp.gate.weight", {4, 32}});
    s.push_back({p + "mlp.shared_experts.down_proj.weight", {32, 48}});
    s.push_back({p + "mlp.shared_experts.gate_proj.weight", {48, 32}});
    s.push_back({p + "mlp.shared_experts.up_proj.weight", {48, 32}});
    for (int e = 0; e < 4; ++e) {
      s.push_back({p + "mlp.experts." + std::to_string(e) + ".gate_proj.weight", {48, 32}});
      s.push_back({p + "mlp.experts." + std::to_string(e) + ".up_proj.weight", {48, 32}});
      s.push_back({p + "mlp.experts." + std::to_string(e) + ".down_proj.weight", {32, 48}, DType::f32});
    }
  }
  s.push_back({"model.layers.2.mlp.stacked.weight", {4, 48, 32}});
  return s;
}


TEST(CheckpointShapes, LayersExpertsAndTopKFromConfig) {
  const fs::path dir = test::temp_dir("ckshapes");
  write_checkpoint(dir / "model.safetensors", moe_model());
  std::ofstream(dir / "config.json") << R"({"model_type": "x", "num_experts_per_tok": 2})";
  const CheckpointShapes s = checkpoint_shapes(dir.string());
  EXPECT_EQ(s.model.key, dir.filename().string());
  EXPECT_EQ(s.layers, 3);
  EXPECT_EQ(s.weights, 2 + 2 * 16);  // layer 0: q, down; each MoE layer: q, 3 shared, 12 expert weights
  EXPECT_EQ(s.skipped, 1);           // the 3-D tensor
  EXPECT_EQ(s.active_source, "from config.json (num_experts_per_tok)");
  std::vector<std::string> names;
  for (const auto& p : s.model.projections) names.push_back(p.name);
  // In the checkpoint's order: layer 0's, then those that layer 1 adds; the experts' and the shared
  // expert's gate and up projections as one gate_up_proj, as kbit::moe_forward runs them.
  EXPECT_EQ(names, (std::vector<std::string>{"self_attn.q_proj", "mlp.down_proj", "mlp.shared_experts.down_proj",
                                             "mlp.shared_experts.gate_up_proj", "mlp.experts.gate_up_proj",
                                             "mlp.experts.down_proj"}));
  const Projection* gate_up = s.model.find("mlp.experts.gate_up_proj");
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->N, 96);
  EXPECT_EQ(gate_up->K, 32);
  EXPECT_EQ(gate_up->experts, 4);
  EXPECT_EQ(s.model.find("mlp.shared_experts.gate_up_proj")->experts, 1);
  const Projection* down = s.model.find("mlp.experts.down_proj");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->N, 32);
  EXPECT_EQ(down->K, 48);
  EXPECT_EQ(down->experts, 4);
  EXPECT_EQ(down->active, 2);
  EXPECT_EQ(s.model.find("self_attn.q_proj")->experts, 1);

  // --active wins over config.json; a single file finds the config beside it; --key names the model.
  CheckpointShapesOptions o;
  o.active = 3;
  o.key = "mine";
  const CheckpointShapes t = checkpoint_shapes((dir / "model.safetensors").string(), o);
  EXPECT_EQ(t.model.key, "mine");
  EXPECT_EQ(t.model.find("mlp.experts.gate_up_proj")->active, 3);
  EXPECT_EQ(t.active_source, "from --active");
  fs::remove_all(dir);
}

TEST(CheckpointShapes, QuantizedCheckpointGivesTheSameShapes) {
  const fs::path dir = test::temp_dir("ckshapes_q");
  fs::create_directories(dir / "in");
  write_checkpoint(dir / "in" / "model.safetensors", moe_model());
  ConvertOptions o;
  o.device = DevicePolicy::cpu;
  convert_checkpoint((dir / "in" / "model.safetensors").string(), (dir / "q.safetensors").string(), o);
  const CheckpointShapes plain = checkpoint_shapes((dir / "in" / "model.safetensors").string());
  const CheckpointShapes quantized = checkpoint_shapes((dir / "q.safetensors").string());
  EXPECT_EQ(quantized.model.projections, plain.model.projections);
  EXPECT_EQ(quantized.weights, plain.weights);
  // No config.json beside it: one expert per token, and the reason says so.
  EXPECT_EQ(quantized.model.find("mlp.experts.down_proj")->active, 1);
  EXPECT_NE(quantized.active_source.find("pass --active"), std::string::npos);
  fs::remove_all(dir);
}

// A Hugging Face folder: shards with an index, the top-k nested in text_config; and its quantized copy.
TEST(CheckpointShapes, ShardedFolderAndItsQuantizedCopy) {
  const fs::path dir = test::temp_dir("ckshapes_shards");
  fs::create_directories(dir / "in");
  std::vector<Spec> first, second;
  std::map<std::string, std::string> weight_map;
  for (const Spec& t : moe_model()) {
    const bool late = t.name.find("layers.2.") != std::string::npos;
    (late ? second : first).push_back(t);
    weight_map[t.name] = late ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
  }
  write_checkpoint(dir / "in" / "model-00001-of-00002.safetensors", first);
  write_checkpoint(dir / "in" / "model-00002-of-00002.safetensors", second, 100);
  io::write_index((dir / "in").string(), weight_map, 0);
  std::ofstream(dir / "in" / "config.json") << R"({"text_config": {"num_experts_per_tok": 3, "hidden_size": 32}})";
  const CheckpointShapes plain = checkpoint_shapes((dir / "in").string());
  EXPECT_EQ(plain.model.key, "in");
  EXPECT_EQ(plain.layers, 3);
  EXPECT_EQ(plain.model.find("mlp.experts.gate_up_proj")->active, 3);
  EXPECT_EQ(plain.active_source, "from config.json (num_experts_per_tok)");
  ConvertOptions o;
  o.device = DevicePolicy::cpu;
  convert_checkpoint((dir / "in").string(), (dir / "q").string(), o);  // copies config.json
  const CheckpointShapes quantized = checkpoint_shapes((dir / "q").string());
  EXPECT_EQ(quantized.model.projections, plain.model.projections);
  EXPECT_EQ(quantized.weights, plain.weights);
  fs::remove_all(dir);
}

TEST(CheckpointShapes, ANameWithAnotherShapeInLaterLayersIsListedAgain) {
  const fs::path dir = test::temp_dir("ckshapes_var");
  write_checkpoint(dir / "m.safetensors", {{"model.layers.0.mlp.down_proj.weight", {32, 96}},
                                      {"model.layers.1.mlp.down_proj.weight", {32, 96}},
                                      {"model.layers.3.mlp.down_proj.weight", {32, 80}}});
  const CheckpointShapes s = checkpoint_shapes((dir / "m.safetensors").string());
  ASSERT_EQ(s.model.projections.size(), 2u);
  EXPECT_EQ(s.model.projections[0].name, "mlp.down_proj");
  EXPECT_EQ(s.model.projections[0].K, 96);
  EXPECT_EQ(s.model.projections[1].name, "mlp.down_proj@L3");
  EXPECT_EQ(s.model.projections[1].K, 80);
  EXPECT_TRUE(s.active_source.empty());
  fs::remove_all(dir);
}

TEST(CheckpointShapes, TwoLayerStacksKeepTheirPrefix) {
  const fs::path dir = test::temp_dir("ckshapes_stacks");
  write_checkpoint(dir / "m.safetensors", {{"model.vision.blocks.0.attn.qkv.weight", {96, 32}},
                                      {"model.language_model.layers.0.self_attn.q_proj.weight", {64, 32}}});
  const CheckpointShapes s = checkpoint_shapes((dir / "m.safetensors").string());
  ASSERT_EQ(s.model.projections.size(), 2u);
  EXPECT_NE(s.model.find("model.vision.blocks.*.attn.qkv"), nullptr);
  EXPECT_NE(s.model.find("model.language_model.layers.*.self_attn.q_proj"), nullptr);
  fs::remove_all(dir);
}

TEST(CheckpointShapes, ErrorsNameTheProblem) {
  const fs::path dir = test::temp_dir("ckshapes_bad");
  write_checkpoint(dir / "none.safetensors", {{"model.embed_tokens.weight", {100, 32}}, {"model.norm.weight", {32}}});
  test::expect_error([&] { checkpoint_shapes((dir / "none.safetensors").string()); },
                     "none.safetensors: no transformer-layer weights");
  write_checkpoint(dir / "mixed.safetensors", {{"model.layers.0.mlp.experts.0.up.weight", {48, 32}},
                                          {"model.layers.0.mlp.experts.1.up.weight", {48, 16}}});
  test::expect_error([&] { checkpoint_shapes((dir / "mixed.safetensors").string()); },
                     "layer 0's mlp.experts.up weights differ in shape ([48, 32] and [48, 16])");
  fs::create_directories(dir / "cfg");
  write_checkpoint(dir / "cfg" / "m.safetensors", {{"model.layers.0.mlp.experts.0.up.weight", {48, 32}}});
  std::ofstream(dir / "cfg" / "config.json") << "{not json";
  test::expect_error([&] { checkpoint_shapes((dir / "cfg").string()); }, "config.json: not valid JSON");
  test::expect_error([&] { checkpoint_shapes((dir / "missing").string()); }, "missing");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kbit
