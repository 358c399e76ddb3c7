// WeightStreamer::layers_from_checkpoint: layers as pieces of a mapped safetensors
// file, in the order named; a missing tensor, an empty layer and a truncated file
// are clear errors. Host only (no streamer is constructed).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "kbit/weight_streamer.h"
#include "support/test_support.h"

namespace kbit {
namespace {
namespace fs = std::filesystem;

fs::path write_checkpoint(const fs::path& dir, std::vector<std::vector<uint8_t>>& data) {
  const fs::path p = dir / "layers.safetensors";
  io::SafetensorsWriter w(p.string());
  data.clear();
  for (int l = 0; l < 3; ++l)
    for (const char* part : {"words", "scales"}) {
      std::vector<uint8_t> b(size_t(1000 + 37 * l + (part[0] == 'w' ? 500 : 0)));
      std::iota(b.begin(), b.end(), uint8_t(l * 16 + (part[0] == 'w')));
      w.declare("layers." + std::to_string(l) + "." + part, DType::u8, {int64_t(b.size())});
      data.push_back(std::move(b));
    }
  w.begin();
  for (const auto& b : data) w.write(std::as_bytes(std::span(b)));
  w.finish();
  return p;
}

TEST(CheckpointLayers, PiecesPointIntoTheMappingInTheOrderNamed) {
  const fs::path dir = test::temp_dir("ckpt_layers");
  std::vector<std::vector<uint8_t>> data;
  const fs::path p = write_checkpoint(dir, data);
  const io::SafetensorsFile f = io::SafetensorsFile::open(p.string());
  const auto cl = WeightStreamer::layers_from_checkpoint(
      f, {{"layers.0.words", "layers.0.scales"}, {"layers.1.scales", "layers.1.words"}, {"layers.2.words"}});
  ASSERT_EQ(cl.layers.size(), 3u);
  EXPECT_EQ(cl.backing.path, p.string());
  EXPECT_EQ(cl.backing.base, static_cast<const void*>(f.mapping()));
  EXPECT_EQ(cl.backing.bytes, size_t(f.file_size()));
  const auto& second = cl.layers[1].pieces;
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].second, data[3].size());  // layers.1.scales first, as named
  EXPECT_EQ(0, std::memcmp(second[0].first, data[3].data(), data[3].size()));
  EXPECT_EQ(0, std::memcmp(second[1].first, data[2].data(), data[2].size()));
  for (const auto& l : cl.layers)
    for (const auto& [ptr, n] : l.pieces) {
      const auto* c = static_cast<const std::byte*>(ptr);
      EXPECT_GE(c, f.mapping());
      EXPECT_LE(c + n, f.mapping() + f.file_size());
    }
}

TEST(CheckpointLayers, MissingTensorsEmptyLayersAndTruncatedFilesAreClearErrors) {
  const fs::path dir = test::temp_dir("ckpt_layers_bad");
  std::vector<std::vector<uint8_t>> data;
  const fs::path p = write_checkpoint(dir, data);
  {
    const io::SafetensorsFile f = io::SafetensorsFile::open(p.string());
    test::expect_error([&] { WeightStreamer::layers_from_checkpoint(f, {{"layers.0.words"}, {"layers.9.words"}}); },
                       "layer 1 needs tensor 'layers.9.words'");
    test::expect_error([&] { WeightStreamer::layers_from_checkpoint(f, {{"layers.0.words"}, {}}); },
                       "layer 1 names no tensors");
    test::expect_error([&] { WeightStreamer::layers_from_checkpoint(f, {}); }, "no layers");
  }
  fs::resize_file(p, fs::file_size(p) - 100);  // the last tensor's bytes cut short
  test::expect_error([&] { io::SafetensorsFile::open(p.string()); }, "outside");
}

}  // namespace
}  // namespace kbit
