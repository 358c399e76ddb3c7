// Shape sets: data/shapes.json's schema for other models (kbit bench / tune --shapes).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "kbit/error.h"
#include "kbit/shapes.h"
#include "support/test_support.h"

namespace kbit {
namespace {


TEST(ShapeSets, CompiledSetRoundTrips) {
  const auto models = model_shapes();
  ASSERT_GE(models.size(), 3u);
  EXPECT_EQ(parse_model_shapes(model_shapes_json(models), "again"), models);
  const ModelShapes& glm = model_shapes("glm47");
  const Projection* moe = glm.find("moe_gu");
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->experts, 160);
  EXPECT_EQ(moe->active, 8);
  EXPECT_TRUE(model_shapes("kimi_k3_latent").projections.front().residual);
}

TEST(ShapeSets, ParsesOptionalFieldsAndSkipsComments) {
  const auto s = parse_model_shapes(R"({"_doc": "x", "llama": {"projections": [
      {"name": "q", "K": 4096, "N": 4096},
      {"name": "experts.up", "K": 4096, "N": 14336, "experts": 8, "active": 2, "per_block": 1},
      {"name": "o", "K": 4096, "N": 4096, "residual": true}]}})",
                                    "mine.json");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].key, "llama");
  ASSERT_EQ(s[0].projections.size(), 3u);
  EXPECT_EQ(s[0].projections[0].experts, 1);
  EXPECT_EQ(s[0].projections[1].experts, 8);
  EXPECT_EQ(s[0].projections[1].active, 2);
  EXPECT_TRUE(s[0].projections[2].residual);
}

TEST(ShapeSets, EveryProblemIsAnErrorNamingWhere) {
  const std::pair<const char*, const char*> cases[] = {
      {"{nope", "mine.json: not valid JSON"},
      {"[1, 2]", "mine.json: a shape set is a JSON object"},
      {R"({"_doc": "only a comment"})", "mine.json: no models"},
      {R"({"m": {}})", "mine.json: model m: needs a 'projections' array"},
      {R"({"m": {"projections": []}})", "model m: has no projections"},
      {R"({"m": {"projections": [{"K": 8, "N": 8}]}})", "non-empty string 'name'"},
      {R"({"m": {"projections": [{"name": "q", "K": 8}]}})", "mine.json: model m, projection q: needs K and N"},
      {R"({"m": {"projections": [{"name": "q", "K": 0, "N": 8}]}})", "K and N must be 1..2147483647, got K = 0"},
      {R"({"m": {"projections": [{"name": "q", "K": 8, "N": 4294967296}]}})", "N = 4294967296"},
      {R"({"m": {"projections": [{"name": "q", "K": "8", "N": 8}]}})", "'K' must be an integer"},
      {R"({"m": {"projections": [{"name": "q", "K": 8.5, "N": 8}]}})", "'K' must be an integer"},
      {R"({"m": {"projections": [{"name": "e", "K": 8, "N": 8, "experts": 4, "active": 5}]}})",
       "projection e: active must be 1..experts (4), got 5"},
      {R"({"m": {"projections": [{"name": "e", "K": 8, "N": 8, "experts": 0}]}})", "experts must be 1..65536, got 0"},
      {R"({"m": {"projections": [{"name": "q", "K": 8, "N": 8, "residual": 1}]}})", "'residual' must be true or false"},
      {R"({"m": {"projections": [{"name": "q", "K": 8, "N": 8}, {"name": "q", "K": 16, "N": 8}]}})",
       "projection name 'q' appears twice"},
  };
  for (const auto& [json, message] : cases) {
    SCOPED_TRACE(json);
    test::expect_error([&] { parse_model_shapes(json, "mine.json"); }, message);
  }
}

TEST(ShapeSets, SelectByKeyOrAll) {
  const auto set = parse_model_shapes(
      R"({"a": {"projections": [{"name": "q", "K": 8, "N": 8}]}, "b": {"projections": [{"name": "q", "K": 16, "N": 8}]}})",
      "x");
  EXPECT_EQ(select_model_shapes(set, {"all"}).size(), 2u);
  const auto picked = select_model_shapes(set, {"b", "a"});
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].key, "b");
  test::expect_error([&] { select_model_shapes(set, {"c"}); }, "unknown model 'c' (known: a, b)");
  test::expect_error([] { model_shapes("nope"); }, "unknown model 'nope' (known: glm47");
}

TEST(ShapeSets, LoadsAFileAndNamesAMissingOne) {
  const auto dir = test::temp_dir("shapes");
  const auto file = dir / "set.json";
  std::ofstream(file) << model_shapes_json({model_shapes("glm47")});
  const auto loaded = load_model_shapes(file.string());
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0], model_shapes("glm47"));
  const std::string missing = (dir / "missing.json").string();
  test::expect_error([&] { load_model_shapes(missing); }, missing + ": cannot open the shape set");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kbit
