// convert_checkpoint: tensor selection, per-tensor bits, sharded folders, safety.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kbit/container.h"
#include "kbit/convert.h"
#include "kbit/cpu.h"
#include "kbit/error.h"
#include "support/test_support.h"

namespace kbit {
namespace {
namespace fs = std::filesystem;

using Spec = test::TensorSpec;
using test::write_checkpoint;

const std::vector<Spec> kModel = {
    {"model.embed_tokens.weight", {64, 96}},
    {"model.layers.0.input_layernorm.weight", {96}},
    {"model.layers.0.self_attn.q_proj.weight", {128, 96}},
    {"model.layers.0.self_attn.q_proj.bias", {128}},
    {"model.layers.0.mlp.gate.weight", {8, 96}},
    {"model.layers.0.mlp.experts.0.up_proj.weight", {64, 96}},
    {"model.layers.1.mlp.down_proj.weight", {96, 64}, DType::f32},
    {"lm_head.weight", {64, 96}},
};

TEST(Convert, DefaultRuleQuantizesLayerProjectionsOnly) {
  EXPECT_TRUE(is_default_quantized("model.layers.0.self_attn.q_proj.weight"));
  EXPECT_TRUE(is_default_quantized("transformer.h.3.attn.c_attn.weight"));
  EXPECT_FALSE(is_default_quantized("model.layers.0.input_layernorm.weight"));
  EXPECT_FALSE(is_default_quantized("model.embed_tokens.weight"));
  EXPECT_FALSE(is_default_quantized("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(is_default_quantized("model.layers.0.mlp.gate.weight"));
  EXPECT_FALSE(is_default_quantized("lm_head.weight"));
}

TEST(Convert, FileToFileWithPerTensorBits) {
  const fs::path dir = test::temp_dir("f");
  write_checkpoint(dir / "in.safetensors", kModel);
  ConvertOptions o;
  o.bits = 4;
  o.bits_for = {{"experts", 2}};
  o.include = {"^lm_head"};
  o.exclude = {"down_proj"};
  o.device = DevicePolicy::cpu;
  const ConvertReport r = convert_checkpoint((dir / "in.safetensors").string(), (dir / "out.safetensors").string(), o);
  const io::SafetensorsFile in = io::SafetensorsFile::open((dir / "in.safetensors").string());
  const io::SafetensorsFile out = io::SafetensorsFile::open((dir / "out.safetensors").string());
  auto names = io::quantized_names(out);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"lm_head.weight", "model.layers.0.mlp.experts.0.up_proj.weight",
                                             "model.layers.0.self_attn.q_proj.weight"}));
  EXPECT_EQ(io::load_quantized(out, "model.layers.0.mlp.experts.0.up_proj.weight").bits(), 2);
  EXPECT_EQ(io::load_quantized(out, "lm_head.weight").bits(), 4);
  // unquantized tensors are copied byte for byte
  for (const char* n : {"model.embed_tokens.weight", "model.layers.0.input_layernorm.weight",
                        "model.layers.1.mlp.down_proj.weight", "model.layers.0.mlp.gate.weight"}) {
    ASSERT_NE(out.find(n), nullptr) << n;
    const auto a = in.bytes(in.at(n)), b = out.bytes(out.at(n));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size())) << n;
  }
  // quantized bytes equal the library's quantize of the same tensor
  const QuantizedMatrix q = io::load_quantized(out, "model.layers.0.self_attn.q_proj.weight");
  const QuantizedMatrix ref = cpu::quantize(in.view(in.at("model.layers.0.self_attn.q_proj.weight")), Codebook::bnf(4));
  EXPECT_EQ(0, std::memcmp(q.words(), ref.words(), size_t(q.word_count()) * 4));
  EXPECT_EQ(q.tensor_scale(), ref.tensor_scale());
  EXPECT_FALSE(r.used_gpu);
  const std::string summary = format_summary(r);
  EXPECT_NE(summary.find("k=2"), std::string::npos);
  EXPECT_NE(summary.find("copied"), std::string::npos);
  for (const auto& t : r.tensors)
    if (t.bits) EXPECT_GT(t.error.sqnr_db(), 5.0) << t.name;
}

TEST(Convert, ShardedFolderKeepsShardsAndWritesIndex) {
  const fs::path dir = test::temp_dir("s");
  fs::create_directories(dir / "in");
  write_checkpoint(dir / "in" / "model-00001-of-00002.safetensors", {kModel[0], kModel[2]}, 1);
  write_checkpoint(dir / "in" / "model-00002-of-00002.safetensors", {kModel[5], kModel[6]}, 5);
  { std::ofstream(dir / "in" / "config.json") << "{}"; }
  ConvertOptions o;
  o.device = DevicePolicy::cpu;
  o.bits = 3;
  o.codebook = "nf";
  convert_checkpoint((dir / "in").string(), (dir / "out").string(), o);
  EXPECT_TRUE(fs::exists(dir / "out" / "model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(dir / "out" / "config.json"));
  const io::Checkpoint ck = io::Checkpoint::open((dir / "out").string());
  EXPECT_EQ(ck.shards().size(), 2u);
  const auto [shard, info] = ck.find("model.layers.1.mlp.down_proj.weight.kbit_packed");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(io::load_quantized(*shard, "model.layers.1.mlp.down_proj.weight").codebook().name(), "nf");
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos);
}

TEST(Convert, RefusesBadInputAndLeavesNoPartialOutput) {
  const fs::path dir = test::temp_dir("bad");
  std::vector<Spec> specs = {kModel[2], kModel[5]};
  write_checkpoint(dir / "in.safetensors", specs);
  ConvertOptions o;
  o.device = DevicePolicy::cpu;
  const std::string in = (dir / "in.safetensors").string(), out = (dir / "out.safetensors").string();
  o.bits = 6;
  EXPECT_THROW(convert_checkpoint(in, out, o), Error);
  o.bits = 4;
  o.codebook = "nf7";
  EXPECT_THROW(convert_checkpoint(in, out, o), Error);
  o.codebook = "bnf";
  o.include = {"("};
  EXPECT_THROW(convert_checkpoint(in, out, o), Error);
  o.include = {};
  EXPECT_THROW(convert_checkpoint(in, in, o), Error);
  EXPECT_THROW(convert_checkpoint((dir / "nope").string(), out, o), Error);

  // NaN in the second tensor: nothing may be left behind
  {
    io::SafetensorsWriter w((dir / "nan.safetensors").string());
    w.declare("model.layers.0.a.weight", DType::f32, {2, 32});
    w.declare("model.layers.0.b.weight", DType::f32, {2, 32});
    w.begin();
    std::vector<float> v(64, 0.5f);
    w.write(std::as_bytes(std::span(v)));
    v[40] = NAN;
    w.write(std::as_bytes(std::span(v)));
    w.finish();
  }
  try {
    convert_checkpoint((dir / "nan.safetensors").string(), out, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.b.weight"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp-"), std::string::npos);

  convert_checkpoint(in, out, o);
  EXPECT_THROW(convert_checkpoint(in, out, o), Error);  // exists, no overwrite
  o.overwrite = true;
  EXPECT_NO_THROW(convert_checkpoint(in, out, o));
  EXPECT_THROW(convert_checkpoint(out, (dir / "again.safetensors").string(), o), Error);  // already kbit
}

}  // namespace
}  // namespace kbit

namespace kbit {
namespace {

TEST(Convert, HadamardRotationIsAppliedAndRecorded) {
  const fs::path dir = test::temp_dir("h");
  write_checkpoint(dir / "in.safetensors", {{"model.layers.0.mlp.up_proj.weight", {64, 256}}, kModel[1]});
  ConvertOptions o;
  o.device = DevicePolicy::cpu;
  o.bits = 3;
  o.hadamard = "block:64";
  o.hadamard_seed = 5;
  convert_checkpoint((dir / "in.safetensors").string(), (dir / "out.safetensors").string(), o);
  const io::SafetensorsFile in = io::SafetensorsFile::open((dir / "in.safetensors").string());
  const io::SafetensorsFile out = io::SafetensorsFile::open((dir / "out.safetensors").string());
  const QuantizedMatrix q = io::load_quantized(out, "model.layers.0.mlp.up_proj.weight");
  ASSERT_TRUE(q.rotation().has_value());
  EXPECT_EQ(*q.rotation(), Rotation::make(RotationMode::block, 64, 256, 5));
  // the stored matrix is the quantized rotated weight: rotating back lands near the original
  std::vector<float> w(64 * 256);
  cpu::dequantize(q, MutableTensorView{w.data(), DType::f32, 64, 256});
  hadamard_rotate(MutableTensorView{w.data(), DType::f32, 64, 256}, *q.rotation(), true);
  const TensorView orig = in.view(in.at("model.layers.0.mlp.up_proj.weight"));
  double err = 0, ref = 0;
  for (int64_t i = 0; i < 64 * 256; ++i) {
    const double x = bf16_bits_to_float(static_cast<const uint16_t*>(orig.data)[i]);
    err += (x - w[size_t(i)]) * (x - w[size_t(i)]);
    ref += x * x;
  }
  EXPECT_GT(10 * std::log10(ref / err), 12.0);  // k = 3 quality, not noise
  o.hadamard = "block:512";
  o.overwrite = true;
  EXPECT_THROW(convert_checkpoint((dir / "in.safetensors").string(), (dir / "out.safetensors").string(), o), Error);
}

}  // namespace
}  // namespace kbit
