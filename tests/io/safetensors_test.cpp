// safetensors reader/writer: round trips and every kind of corrupt file.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kbit/error.h"
#include "kbit/safetensors.h"
#include "support/test_support.h"

namespace kbit::io {
namespace {
namespace fs = std::filesystem;

void write_raw(const fs::path& p, const std::string& header, const std::string& data, int64_t claimed_len = -1) {
  std::ofstream f(p, std::ios::binary);
  const uint64_t len = claimed_len >= 0 ? uint64_t(claimed_len) : header.size();
  for (int i = 0; i < 8; ++i) f.put(char((len >> (8 * i)) & 0xff));
  f << header << data;
}

void expect_rejected(const fs::path& p, const std::string& message_part) {
  try {
    SafetensorsFile::open(p.string());
    FAIL() << "accepted " << p;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message_part), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriteThenReadRoundTrip) {
  const fs::path dir = test::temp_dir("rt");
  const fs::path p = dir / "a.safetensors";
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {7, 8, 9};
  {
    SafetensorsWriter w(p.string());
    w.declare("a", DType::f32, {2, 3});
    w.declare("b", DType::bf16, {3});
    w.declare("empty", DType::f16, {0, 4});
    w.set_metadata("format", "pt");
    w.begin();
    w.write(std::as_bytes(std::span(a)).first(8));  // in pieces
    w.write(std::as_bytes(std::span(a)).subspan(8));
    w.write(std::as_bytes(std::span(b)));
    w.set_metadata("late", "a value set after begin()");
    w.finish();
  }
  const SafetensorsFile f = SafetensorsFile::open(p.string());
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.at("a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.at("b").dtype, DType::bf16);
  EXPECT_EQ(0, std::memcmp(f.bytes(f.at("a")).data(), a.data(), 24));
  EXPECT_EQ(0, std::memcmp(f.bytes(f.at("b")).data(), b.data(), 6));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("late"), "a value set after begin()");
  const TensorView v = f.view(f.at("a"));
  EXPECT_EQ(v.rows, 2);
  EXPECT_EQ(v.cols, 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.bytes(f.at("a")).data()) % 8, 0u);  // data starts 8-aligned
}

TEST(Safetensors, WriterLeavesNothingBehindOnFailure) {
  const fs::path dir = test::temp_dir("fail");
  {
    SafetensorsWriter w((dir / "x.safetensors").string());
    w.declare("a", DType::f32, {4});
    w.begin();
    std::vector<float> two(2);
    w.write(std::as_bytes(std::span(two)));
    EXPECT_THROW(w.finish(), Error);  // too few bytes
  }
  EXPECT_TRUE(fs::is_empty(dir));
  SafetensorsWriter w2((dir / "y.safetensors").string());
  w2.declare("a", DType::f32, {1});
  EXPECT_THROW(w2.declare("a", DType::f32, {1}), Error);
}

TEST(Safetensors, RejectsCorruptFiles) {
  const fs::path dir = test::temp_dir("corrupt");
  const std::string good = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_raw(dir / "ok", good, std::string(8, '\0'));
  EXPECT_NO_THROW(SafetensorsFile::open((dir / "ok").string()));

  { std::ofstream(dir / "short") << "abc"; }
  expect_rejected(dir / "short", "shorter than the 8-byte header length");
  write_raw(dir / "trunc", good, std::string(4, '\0'));
  expect_rejected(dir / "trunc", "outside the 4-byte data section");
  write_raw(dir / "len", good, "", 1 << 20);
  expect_rejected(dir / "len", "runs past the end of the file");
  write_raw(dir / "json", R"({"a":{"dtype":"F32",)", "");
  expect_rejected(dir / "json", "not valid JSON");
  write_raw(dir / "notobj", R"([1,2,3])", "");
  expect_rejected(dir / "notobj", "not a JSON object");
  write_raw(dir / "dtype", R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_rejected(dir / "dtype", "unknown dtype 'F31'");
  write_raw(dir / "range", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(8, '\0'));
  expect_rejected(dir / "range", "outside");
  write_raw(dir / "overlap",
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            std::string(12, '\0'));
  expect_rejected(dir / "overlap", "overlap");
  write_raw(dir / "size", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_rejected(dir / "size", "need 12");
  write_raw(dir / "neg", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, '\0'));
  expect_rejected(dir / "neg", "non-negative");
  write_raw(dir / "order", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, '\0'));
  expect_rejected(dir / "order", "begin > end");
  write_raw(dir / "meta", R"({"__metadata__":{"a":1}})", "");
  expect_rejected(dir / "meta", "not a string");
  write_raw(dir / "huge", R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})",
            std::string(8, '\0'));
  expect_rejected(dir / "huge", "overflowing");
  expect_rejected(dir / "missing-file", "cannot open");
  {
    std::ofstream text(dir / "text");
    text << "this is a text file, not safetensors at all";
  }
  expect_rejected(dir / "text", "not a valid safetensors file");
}

TEST(Checkpoint, ShardedFolderWithIndex) {
  const fs::path dir = test::temp_dir("sharded");
  std::map<std::string, std::string> wm;
  for (int s = 0; s < 2; ++s) {
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-00002.safetensors";
    SafetensorsWriter w((dir / name).string());
    const std::string t = "t" + std::to_string(s);
    w.declare(t, DType::f32, {1});
    w.begin();
    const float v = float(s);
    w.write(std::as_bytes(std::span(&v, 1)));
    w.finish();
    wm[t] = name;
  }
  write_index(dir.string(), wm, 8);
  const Checkpoint ck = Checkpoint::open(dir.string());
  EXPECT_TRUE(ck.sharded());
  EXPECT_EQ(ck.shards().size(), 2u);
  EXPECT_EQ(ck.tensors().size(), 2u);
  EXPECT_NE(ck.find("t1").second, nullptr);
  EXPECT_EQ(ck.find("nope").second, nullptr);

  wm["ghost"] = "model-00001-of-00002.safetensors";
  write_index(dir.string(), wm, 8);
  EXPECT_THROW(Checkpoint::open(dir.string()), Error);
  EXPECT_THROW(Checkpoint::open((dir / "absent").string()), Error);
  const fs::path empty = test::temp_dir("empty");
  EXPECT_THROW(Checkpoint::open(empty.string()), Error);
}

}  // namespace
}  // namespace kbit::io
