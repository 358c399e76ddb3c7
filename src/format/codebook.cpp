// Built-in codebooks (BNF constants from the spec, NF computed) and validation.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kbit/error.h"
#include "kbit/format.h"

namespace kbit {
namespace {

// Positive halves of the BNF codebooks, ascending (spec: "Codebook").
constexpr float kBnf2[] = {0.1964f, 0.6642f};
constexpr float kBnf3[] = {0.1018f, 0.3141f, 0.5583f, 0.8827f};
constexpr float kBnf4[] = {0.0499f, 0.1509f, 0.2551f, 0.3652f, 0.4846f, 0.6179f, 0.7739f, 0.9686f};
constexpr float kBnf5[] = {0.0239f, 0.0718f, 0.1201f, 0.1692f, 0.2193f, 0.2707f, 0.3239f, 0.3791f,
                           0.4369f, 0.4977f, 0.5625f, 0.6321f, 0.7078f, 0.7913f, 0.8850f, 0.9920f};

std::span<const float> bnf_half(int bits) {
  switch (bits) {
    case 2: return kBnf2;
    case 3: return kBnf3;
    case 4: return kBnf4;
    default: return kBnf5;
  }
}

// Inverse standard normal CDF: Acklam's rational approximation refined by two
// Halley steps on erfc, accurate to double rounding for the p used here.
double inverse_normal_cdf(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                                 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                                 6.680131188771972e+01, -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                                 -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                                 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p > 1 - 0.02425) {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  }
  for (int i = 0; i < 2; ++i) {
    const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
    const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
    x = x - u / (1 + x * u / 2);
  }
  return x;
}

}  // namespace

void require_supported_bits(int k) {
  KBIT_REQUIRE(is_supported_bits(k), "unsupported bit width k=", k, " (kbit supports k = 2, 3, 4, 5)");
}

Codebook Codebook::bnf(int bits) {
  require_supported_bits(bits);
  Codebook cb(bits, CodebookKind::bnf);
  const auto half = bnf_half(bits);
  const int h = int(half.size());
  for (int i = 0; i < h; ++i) {
    cb.values_[size_t(h - 1 - i)] = -half[size_t(i)];  // negated half, descending
    cb.values_[size_t(h + i)] = half[size_t(i)];
  }
  return cb;
}

Codebook Codebook::nf(int bits) {
  require_supported_bits(bits);
  Codebook cb(bits, CodebookKind::nf);
  const int n = 1 << bits;
  double v[kMaxLevels];
  double vmax = 0;
  for (int i = 0; i < n; ++i) {
    v[i] = inverse_normal_cdf((i + 0.5) / n);
    vmax = std::max(vmax, std::fabs(v[i]));
  }
  for (int i = 0; i < n; ++i) cb.values_[size_t(i)] = float(v[i] / vmax);
  cb.values_[0] = -1.0f;  // endpoints exactly +-1 by definition
  cb.values_[size_t(n - 1)] = 1.0f;
  return cb;
}

Codebook Codebook::custom(int bits, std::span<const float> values) {
  require_supported_bits(bits);
  KBIT_REQUIRE(values.size() == size_t(1) << bits, "custom codebook for k=", bits, " needs exactly ", 1 << bits,
               " values, got ", values.size());
  Codebook cb(bits, CodebookKind::custom);
  for (size_t i = 0; i < values.size(); ++i) {
    KBIT_REQUIRE(std::isfinite(values[i]), "custom codebook value ", i, " is not finite (", values[i], ")");
    cb.values_[i] = values[i];
  }
  return cb;
}

Codebook Codebook::named(const std::string& name, int bits) {
  if (name == "bnf") return bnf(bits);
  if (name == "nf") return nf(bits);
  throw Error(detail::concat("unknown codebook '", name, "' (expected bnf or nf)"));
}

std::string Codebook::name() const {
  switch (kind_) {
    case CodebookKind::bnf: return "bnf";
    case CodebookKind::nf: return "nf";
    default: return "custom";
  }
}

NearestLevel Codebook::nearest_level() const {
  NearestLevel t{};
  const int n = levels();
  t.levels = n;
  int order[kMaxLevels];
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [&](int a, int b) { return values_[size_t(a)] < values_[size_t(b)]; });
  for (int i = 0; i < n; ++i) {
    const float v = values_[size_t(order[i])];
    t.codebook[order[i]] = v;
    if (t.distinct > 0 && t.sorted[t.distinct - 1] == v) {
      t.first_index[t.distinct - 1] = uint8_t(std::min<int>(t.first_index[t.distinct - 1], order[i]));
      continue;
    }
    t.sorted[t.distinct] = v;
    t.first_index[t.distinct] = uint8_t(order[i]);
    ++t.distinct;
  }
  for (int d = t.distinct; d < kMaxLevels; ++d) {
    t.sorted[d] = std::numeric_limits<float>::infinity();
    t.first_index[d] = 0;
  }
  return t;
}

}  // namespace kbit
