#include "kbit/rotation_study.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <map>
#include <random>
#include <sstream>

#include "cpu/parallel.h"
#include "kbit/cpu.h"
#include "kbit/error.h"
#include "kbit/hadamard.h"

namespace kbit {
namespace {

std::vector<float> family(const std::string& name, int64_t n, int64_t k, uint64_t seed) {
  std::vector<float> w(size_t(n * k));
  cpu::detail::parallel_for(n, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::mt19937_64 rng(seed * 7919 + uint64_t(r));
      std::normal_distribution<float> g(0.0f, 1.0f);
      std::student_t_distribution<float> t(4.0f);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (int64_t c = 0; c < k; ++c) {
        float v = name == "student_t4" ? t(rng) : g(rng);
        if (name == "outliers" && u(rng) < 0.001f) v *= 20.0f;
        w[size_t(r * k + c)] = v;
      }
    }
  });
  return w;
}

double sqnr(const std::vector<double>& ref, const std::vector<double>& got) {
  double s = 0, e = 0;
  for (size_t i = 0; i < ref.size(); ++i) s += ref[i] * ref[i], e += (ref[i] - got[i]) * (ref[i] - got[i]);
  return 10 * std::log10(s / e);
}

}  // namespace

std::vector<RotationStudyRow> hadamard_study(int64_t n, int64_t k, int64_t m, const std::vector<std::string>& rotations,
                                             const std::vector<int>& bits, uint64_t seed) {
  KBIT_REQUIRE(n > 0 && k > 0 && m > 0, "hadamard study: sizes must be positive");
  std::vector<RotationStudyRow> out;
  std::vector<float> x = family("gaussian", m, k, seed + 1000);
  for (const std::string fam : {"gaussian", "student_t4", "outliers"}) {
    const std::vector<float> w = family(fam, n, k, seed);
    // reference output with the original weights, fp64
    std::vector<double> ref(size_t(m * n));
    cpu::detail::parallel_for(n, 16, [&](int64_t j0, int64_t j1) {
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = j0; j < j1; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < k; ++c) acc += double(x[size_t(i * k + c)]) * double(w[size_t(j * k + c)]);
          ref[size_t(i * n + j)] = acc;
        }
    });
    for (const std::string& rot_spec : rotations) {
      std::vector<float> wr = w, xr = x;
      if (rot_spec != "none") {
        const Rotation r = Rotation::parse(rot_spec, k, seed);
        hadamard_rotate(MutableTensorView{wr.data(), DType::f32, n, k}, r);
        hadamard_rotate(MutableTensorView{xr.data(), DType::f32, m, k}, r);
      }
      for (int b : bits) {
        const QuantizedMatrix q = cpu::quantize(TensorView{wr.data(), DType::f32, n, k}, Codebook::bnf(b));
        const std::vector<double> y = cpu::matmul_fp64(TensorView{xr.data(), DType::f32, m, k}, q);
        RotationStudyRow row;
        row.weights = fam, row.bits = b, row.rotation = rot_spec;
        row.output_sqnr_db = sqnr(ref, y);
        row.weight_sqnr_db = cpu::quantization_error(TensorView{wr.data(), DType::f32, n, k}, q).sqnr_db();
        out.push_back(row);
      }
    }
  }
  return out;
}

std::string format_study_markdown(const std::vector<RotationStudyRow>& rows) {
  std::vector<std::string> rots;
  for (const auto& r : rows)
    if (std::find(rots.begin(), rots.end(), r.rotation) == rots.end()) rots.push_back(r.rotation);
  std::map<std::pair<std::string, int>, std::map<std::string, double>> grid;
  std::vector<std::pair<std::string, int>> keys;
  for (const auto& r : rows) {
    const auto key = std::make_pair(r.weights, r.bits);
    if (!grid.count(key)) keys.push_back(key);
    grid[key][r.rotation] = r.output_sqnr_db;
  }
  std::ostringstream s;
  s << "| weights | k |";
  for (const auto& r : rots) s << " " << r << " |";
  for (size_t i = 1; i < rots.size(); ++i) s << " gain " << rots[i] << " |";
  s << "\n|---|---|";
  for (size_t i = 0; i < 2 * rots.size() - 1; ++i) s << "---|";
  s << "\n";
  char b[32];
  for (const auto& key : keys) {
    s << "| " << key.first << " | " << key.second << " |";
    for (const auto& r : rots) std::snprintf(b, sizeof b, " %.2f |", grid[key][r]), s << b;
    for (size_t i = 1; i < rots.size(); ++i)
      std::snprintf(b, sizeof b, " %+.2f |", grid[key][rots[i]] - grid[key][rots[0]]), s << b;
    s << "\n";
  }
  return s.str();
}

}  // namespace kbit
