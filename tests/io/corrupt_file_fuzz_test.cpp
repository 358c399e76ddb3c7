// Corrupt files by the thousand: a valid kbit file (and a sharded checkpoint's index) mutated many ways with a
// fixed seed. Every mutant must either load, dequantize and repack, or be rejected with kbit::Error; no other
// exception may escape, and nothing may read out of bounds (build with -DKBIT_SANITIZE=ON to have ASan and
// UBSan check that, see README).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kbit/container.h"
#include "kbit/cpu.h"
#include "kbit/error.h"
#include "kbit/hadamard.h"
#include "support/test_support.h"

namespace kbit::io {
namespace {
namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A small file with every kind of part: two quantized matrices (k = 3 with a row rotation, k = 5 with a custom
// codebook and a K that is not a multiple of 32), a plain bf16 tensor and the format's metadata.
std::string make_valid_file(const fs::path& dir) {
  const auto m = test::random_matrix(6, 3584, DType::f32, 7);
  QuantizedMatrix a = cpu::quantize(m.view(), Codebook::bnf(3));
  a.set_rotation(Rotation::make(RotationMode::row, 0, 3584, 5));
  const auto m2 = test::random_matrix(3, 70, DType::bf16, 8);
  std::vector<float> levels(32);
  for (int i = 0; i < 32; ++i) levels[size_t(i)] = -1.0f + 2.0f * float(i) / 31.0f;
  const QuantizedMatrix b = cpu::quantize(m2.view(), Codebook::custom(5, levels));
  const auto plain = test::random_matrix(2, 4, DType::bf16, 9);
  const fs::path p = dir / "valid.safetensors";
  SafetensorsWriter w(p.string());
  declare_quantized(w, "layers.0.q.weight", 6, 3584, 3, a.rotation());
  declare_quantized(w, "layers.0.k.weight", 3, 70, 5);
  w.declare("norm.weight", DType::bf16, {2, 4});
  w.begin();
  write_quantized(w, "layers.0.q.weight", a);
  write_quantized(w, "layers.0.k.weight", b);
  w.write(std::as_bytes(std::span(plain.bytes)));
  w.finish();
  return read_all(p);
}

uint64_t header_length(const std::string& file) {
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i) len |= uint64_t(uint8_t(file[size_t(i)])) << (8 * i);
  return len;
}

// Numbers that sit on the edges of the readers' checks: signs, zero, int32 / int64 limits, overflowing products.
const std::vector<std::string> kEdgeNumbers = {
    "0", "-1", "1", "2", "5", "6", "31", "33", "64", "2147483647", "2147483648", "4294967296",
    "9223372036854775807", "9223372036854775808", "18446744073709551615", "99999999999999999999999",
    "4611686018427387904", "1e308", "-1e308", "0.5", "1.5", "1e-45", "NaN", "null", "[]", "{}", "\"x\""};

// Words that swap one valid value for another valid (or nearly valid) one of the same place in the header.
const std::vector<std::pair<std::string, std::string>> kSwaps = {
    {"\"I32\"", "\"U8\""},      {"\"U8\"", "\"I32\""},        {"\"F32\"", "\"BF16\""},  {"\"BF16\"", "\"F64\""},
    {"\"row\"", "\"block\""},   {"\"block\"", "\"row\""},     {"kbit_packed", "kbit_absmax"},
    {"kbit_absmax", "kbit_codebook"}, {"kbit_codebook", "kbit_packed"}, {"\"shape\"", "\"shapes\""},
    {"data_offsets", "data_offset"},  {"\"hadamard\"", "\"hadamart\""}, {"\"signs\":[", "\"signs\":[-"},
    {"\"k\":3", "\"k\":4"},     {"\"k\":5", "\"k\":2"},       {"tensor_scale", "tensor_scales"}};

struct Mutant {
  std::string bytes;
  std::string how;
};

Mutant mutate(const std::string& valid, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return size_t(std::uniform_int_distribution<uint64_t>(0, n - 1)(rng)); };
  const size_t header_end = size_t(8 + header_length(valid));
  Mutant m{valid, ""};
  switch (pick(7)) {
    case 0: {  // bit flips in the header
      const size_t n = 1 + pick(4);
      for (size_t i = 0; i < n; ++i) {
        const size_t at = 8 + pick(header_end - 8);
        m.bytes[at] = char(m.bytes[at] ^ (1 << pick(8)));
        m.how += "flip@" + std::to_string(at) + " ";
      }
      break;
    }
    case 1: {  // one number of the header replaced by an edge value
      std::vector<size_t> starts;
      for (size_t i = 8; i < header_end; ++i)
        if (std::isdigit(uint8_t(m.bytes[i])) && !std::isdigit(uint8_t(m.bytes[i - 1])) && m.bytes[i - 1] != '.')
          starts.push_back(i);
      const size_t at = starts[pick(starts.size())];
      size_t end = at;
      while (end < header_end && (std::isdigit(uint8_t(m.bytes[end])) || m.bytes[end] == '.' ||
                                  m.bytes[end] == 'e' || m.bytes[end] == '-'))
        ++end;
      const std::string& v = kEdgeNumbers[pick(kEdgeNumbers.size())];
      // The metadata values are JSON strings inside JSON: their quotes are escaped, so a bare replacement keeps
      // the outer header valid and reaches the inner parser.
      m.bytes.replace(at, end - at, v);
      m.how = "number@" + std::to_string(at) + "=" + v;
      break;
    }
    case 2: {  // a swapped word
      const auto& [from, to] = kSwaps[pick(kSwaps.size())];
      const size_t at = m.bytes.find(from, 8);
      if (at == std::string::npos || at >= header_end) return mutate(valid, rng);
      m.bytes.replace(at, from.size(), to);
      m.how = "swap " + from + "->" + to;
      break;
    }
    case 3: {  // truncated anywhere
      const size_t len = pick(m.bytes.size());
      m.bytes.resize(len);
      m.how = "truncate " + std::to_string(len);
      break;
    }
    case 4: {  // the header length field
      const uint64_t real = header_length(valid);
      const uint64_t choices[] = {0, 1, real - 1, real + 1, real + 8, uint64_t(m.bytes.size()), ~uint64_t(0),
                                  uint64_t(1) << 63, rng()};
      const uint64_t len = choices[pick(std::size(choices))];
      for (int i = 0; i < 8; ++i) m.bytes[size_t(i)] = char((len >> (8 * i)) & 0xff);
      m.how = "header length " + std::to_string(len);
      break;
    }
    case 5: {  // data bytes: packed codes, scales and codebook values (NaN, unsorted, ...)
      const size_t n = 1 + pick(16);
      for (size_t i = 0; i < n; ++i) m.bytes[header_end + pick(m.bytes.size() - header_end)] = char(rng());
      m.how = "data bytes";
      break;
    }
    default: {  // a byte of the header deleted or duplicated (shifts everything after it)
      const size_t at = 8 + pick(header_end - 8);
      if (pick(2)) m.bytes.erase(at, 1);
      else m.bytes.insert(at, 1, m.bytes[at]);
      m.how = "indel@" + std::to_string(at);
      break;
    }
  }
  return m;
}

// Everything a reader of the file would do with it; returns whether all of it was accepted.
bool use_file(const fs::path& p) {
  const SafetensorsFile f = SafetensorsFile::open(p.string());
  for (const auto& t : f.tensors()) {
    const auto bytes = f.bytes(t);
    volatile uint8_t sink = 0;
    for (const std::byte b : bytes) sink = sink ^ uint8_t(b);
  }
  bool all = true;
  for (const auto& name : quantized_names(f)) {
    try {
      const QuantizedMatrix q = load_quantized(f, name);
      std::vector<float> out(size_t(q.rows() * q.cols()));
      cpu::dequantize(q, MutableTensorView{out.data(), DType::f32, q.rows(), q.cols(), q.cols()});
      const QuantizedMatrix tiled = cpu::repack(q, Layout::tiled_k64);
      EXPECT_EQ(tiled.rows(), q.rows());
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << "the message names no file: " << e.what();
      all = false;
    }
  }
  return all;
}

TEST(CorruptFiles, EveryMutantLoadsOrIsRejectedWithAnError) {
  const fs::path dir = test::temp_dir("fuzz");
  const std::string valid = make_valid_file(dir);
  ASSERT_TRUE(use_file(dir / "valid.safetensors"));
  std::mt19937_64 rng(20261204);
  int rejected = 0, accepted = 0;
  const int kMutants = 3000;
  for (int i = 0; i < kMutants; ++i) {
    const Mutant m = mutate(valid, rng);
    const fs::path p = dir / "mutant.safetensors";
    write_all(p, m.bytes);
    try {
      (use_file(p) ? accepted : rejected)++;
    } catch (const Error& e) {
      ++rejected;
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << m.how << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "mutant " << i << " (" << m.how << ") escaped as a non-kbit exception: " << e.what();
    }
  }
  // Both outcomes occur: data corruption loads (any code and scale byte is valid), header damage mostly not.
  EXPECT_GT(accepted, kMutants / 20);
  EXPECT_GT(rejected, kMutants / 2);
}

// A sharded folder's index mutated the same way: the checkpoint opens or is rejected with kbit::Error.
TEST(CorruptFiles, MutatedShardIndexOpensOrIsRejected) {
  const fs::path dir = test::temp_dir("index");
  for (int s = 0; s < 2; ++s) {
    SafetensorsWriter w((dir / ("model-0000" + std::to_string(s + 1) + "-of-00002.safetensors")).string());
    w.declare("t" + std::to_string(s), DType::f32, {1});
    w.begin();
    const float v = float(s);
    w.write(std::as_bytes(std::span(&v, 1)));
    w.finish();
  }
  const std::string index =
      R"({"metadata":{"total_size":8},"weight_map":{"t0":"model-00001-of-00002.safetensors",)"
      R"("t1":"model-00002-of-00002.safetensors"}})";
  write_all(dir / "model.safetensors.index.json", index);
  ASSERT_EQ(Checkpoint::open(dir.string()).tensors().size(), 2u);
  std::mt19937_64 rng(4);
  const std::vector<std::string> replacements = {"../x", "/etc/passwd", "", "\"", "{", "1", "null", "[",
                                                 "model-00001-of-00002.safetensors", "t0", "weight_map"};
  for (int i = 0; i < 500; ++i) {
    std::string bad = index;
    const size_t at = size_t(std::uniform_int_distribution<uint64_t>(0, bad.size() - 1)(rng));
    const size_t len = size_t(std::uniform_int_distribution<uint64_t>(0, 12)(rng));
    const std::string& with = replacements[size_t(rng() % replacements.size())];
    bad.replace(at, len, with);
    write_all(dir / "model.safetensors.index.json", bad);
    try {
      (void)Checkpoint::open(dir.string());
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "index mutant " << i << " escaped as a non-kbit exception: " << e.what() << "\n" << bad;
    }
  }
}

}  // namespace
}  // namespace kbit::io
