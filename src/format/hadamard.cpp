// CPU Hadamard transforms: fast Walsh-Hadamard over the power-of-two factor and
// a dense order-p product across the p blocks, in fp32 per row.
#include "kbit/hadamard.h"

#include <cmath>
#include <random>

#include "cpu/elements.h"
#include "cpu/parallel.h"
#include "format/small_hadamard.h"
#include "kbit/error.h"

namespace kbit {
namespace {

using detail::small_hadamard;
using detail::SmallHadamard;

int64_t odd_factor(int64_t n) {  // n = p * 2^m: returns p (or 0 if n <= 0)
  if (n <= 0) return 0;
  while (n % 2 == 0) n /= 2;
  return n;
}
int64_t small_order(int64_t n) {  // the order of H_p for n (1, 12, 20 or 28), or 0
  const int64_t p = odd_factor(n);
  if (p == 1) return 1;
  for (int64_t s : {12, 20, 28})
    if (n % s == 0 && (n / s & (n / s - 1)) == 0) return s;
  return 0;
}

template <int P>
std::vector<int8_t> as_vector() {  // the compile-time table (format/small_hadamard.h), row-major
  constexpr SmallHadamard<P> m = small_hadamard<P>();
  std::vector<int8_t> v(size_t(P * P));
  for (int a = 0; a < P; ++a)
    for (int c = 0; c < P; ++c) v[size_t(a * P + c)] = m.h[a][c];
  return v;
}

// In-place fast Walsh-Hadamard transform (unnormalised) of length n = 2^m.
void fwht(float* x, int64_t n) {
  for (int64_t h = 1; h < n; h *= 2)
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
}

// One chunk of length n = p * q (q = 2^m), element (a, b) at a * q + b:
// (H_p (x) H_q) x = H_p applied across a, H_q along b. `transpose` uses H_p^T.
void transform_chunk(float* x, int64_t n, bool transpose, std::vector<float>& tmp) {
  const int64_t p = small_order(n), q = n / p;
  for (int64_t a = 0; a < p; ++a) fwht(x + a * q, q);
  if (p == 1) return;
  const std::vector<int8_t>& h = hadamard_small(int(p));
  tmp.assign(size_t(n), 0.0f);
  for (int64_t a = 0; a < p; ++a)
    for (int64_t c = 0; c < p; ++c) {
      const int8_t s = transpose ? h[size_t(c * p + a)] : h[size_t(a * p + c)];
      const float* src = x + c * q;
      float* dst = tmp.data() + a * q;
      if (s > 0)
        for (int64_t b = 0; b < q; ++b) dst[b] += src[b];
      else
        for (int64_t b = 0; b < q; ++b) dst[b] -= src[b];
    }
  std::copy(tmp.begin(), tmp.end(), x);
}

}  // namespace

bool is_supported_hadamard_size(int64_t n) { return n >= 1 && n <= (int64_t(1) << 20) && small_order(n) != 0; }

const std::vector<int8_t>& hadamard_small(int p) {
  static const std::vector<int8_t> h1 = as_vector<1>(), h2 = as_vector<2>(), h12 = as_vector<12>(),
                                   h20 = as_vector<20>(), h28 = as_vector<28>();
  switch (p) {
    case 1: return h1;
    case 2: return h2;
    case 12: return h12;
    case 20: return h20;
    case 28: return h28;
    default: throw Error(detail::concat("no built-in Hadamard matrix of order ", p));
  }
}

std::vector<int8_t> hadamard_matrix(int64_t n) {
  KBIT_REQUIRE(is_supported_hadamard_size(n) && n <= 4096, "hadamard_matrix: unsupported order ", n);
  const int64_t p = small_order(n), q = n / p;
  const std::vector<int8_t>& hp = hadamard_small(int(p));
  std::vector<int8_t> h(size_t(n * n));
  for (int64_t a = 0; a < p; ++a)
    for (int64_t b = 0; b < q; ++b)
      for (int64_t c = 0; c < p; ++c)
        for (int64_t d = 0; d < q; ++d) {
          const int sylvester = (__builtin_popcountll(uint64_t(b & d)) & 1) ? -1 : 1;
          h[size_t((a * q + b) * n + c * q + d)] = int8_t(hp[size_t(a * p + c)] * sylvester);
        }
  return h;
}

void require_supported_rotation(const Rotation& r, int64_t cols) {
  KBIT_REQUIRE(is_supported_hadamard_size(r.size), "Hadamard size ", r.size,
               " is not supported (2^m, or 12, 20 or 28 times a power of two)");
  if (r.mode == RotationMode::block) {
    KBIT_REQUIRE(r.size >= 32 && r.size <= 256 && (r.size & (r.size - 1)) == 0, "Hadamard block size ", r.size,
                 " is not supported (32, 64, 128 or 256)");
    KBIT_REQUIRE(cols % r.size == 0, "Hadamard block size ", r.size, " does not divide the row length ", cols);
  } else {
    KBIT_REQUIRE(r.size == cols, "row-mode Hadamard of size ", r.size, " does not match the row length ", cols);
    KBIT_REQUIRE(r.size >= 12 && r.size <= 32768 * 28, "row-mode Hadamard size ", r.size, " is out of range");
  }
  KBIT_REQUIRE(r.signs.empty() || int64_t(r.signs.size()) == (r.size + 31) / 32, "Hadamard sign vector has ",
               r.signs.size(), " words, expected ", (r.size + 31) / 32);
}

Rotation Rotation::make(RotationMode mode, int64_t block_size, int64_t cols, std::optional<uint64_t> seed) {
  Rotation r;
  r.mode = mode;
  r.size = mode == RotationMode::row ? cols : block_size;
  require_supported_rotation(r, cols);
  if (seed) {
    std::mt19937_64 rng(*seed);
    r.signs.resize(size_t((r.size + 31) / 32));
    for (auto& w : r.signs) w = uint32_t(rng());
    if (r.size % 32) r.signs.back() &= (1u << (r.size % 32)) - 1u;
  }
  return r;
}

Rotation Rotation::parse(const std::string& spec, int64_t cols, std::optional<uint64_t> seed) {
  if (spec == "row") return make(RotationMode::row, 0, cols, seed);
  if (spec.rfind("block:", 0) == 0) {
    int64_t b = 0;
    try {
      b = std::stoll(spec.substr(6));
    } catch (...) {
      throw Error("--hadamard '" + spec + "': expected block:32|64|128|256 or row");
    }
    return make(RotationMode::block, b, cols, seed);
  }
  throw Error("--hadamard '" + spec + "': expected block:32|64|128|256 or row");
}

std::string Rotation::describe() const {
  return detail::concat(mode == RotationMode::row ? "row:" : "block:", size, signs.empty() ? "" : "+signs");
}

void hadamard_rotate(const TensorView& in, const MutableTensorView& out, const Rotation& r, bool inverse) {
  auto check = [](const TensorView& t, const char* what) {
    KBIT_REQUIRE(t.rows > 0 && t.cols > 0 && t.data, "hadamard_rotate: empty or null ", what);
    KBIT_REQUIRE(is_weight_float(t.dtype), "hadamard_rotate: ", what, " dtype ", dtype_name(t.dtype),
                 " is not supported (expected F32, F16 or BF16)");
  };
  check(in, "input");
  check(out, "output");
  KBIT_REQUIRE(in.rows == out.rows && in.cols == out.cols, "hadamard_rotate: input [", in.rows, ", ", in.cols,
               "] and output [", out.rows, ", ", out.cols, "] differ");
  require_supported_rotation(r, in.cols);
  const int64_t b = r.size;
  const float scale = float(1.0 / std::sqrt(double(b)));
  cpu::detail::parallel_for(in.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(size_t(in.cols)), tmp;
    for (int64_t i = r0; i < r1; ++i) {
      cpu::detail::load_row(in.data, in.dtype, in.stride(), i, in.cols, in.cols, row.data());
      for (int64_t c0 = 0; c0 < in.cols; c0 += b) {
        float* chunk = row.data() + c0;
        if (!inverse)
          for (int64_t p = 0; p < b; ++p)
            if (r.negates(p)) chunk[p] = -chunk[p];
        transform_chunk(chunk, b, inverse, tmp);
        for (int64_t p = 0; p < b; ++p) chunk[p] *= scale;
        if (inverse)
          for (int64_t p = 0; p < b; ++p)
            if (r.negates(p)) chunk[p] = -chunk[p];
      }
      cpu::detail::store_row(out.data, out.dtype, out.stride(), i, out.cols, row.data());
    }
  });
}

void hadamard_rotate(const MutableTensorView& x, const Rotation& r, bool inverse) { hadamard_rotate(x, x, r, inverse); }

}  // namespace kbit
