// The +-1 Hadamard matrices of order 1, 2, 12, 20 and 28 used by the rotation (spec:
// "Hadamard rotation"), built at compile time so that the CPU reference and the GPU
// kernels (which unroll the order-p mix with the signs as constants) share one
// construction: order 12 and 20 from Paley's first construction (q = 11, 19), order
// 28 from Paley's second (q = 13).
#pragma once

#include <cstdint>

#include "kbit/hd.h"

namespace kbit::detail {

template <int P>
struct SmallHadamard {
  int8_t h[P][P];
};

// Quadratic character of a mod prime q: 0, 1 or -1.
KBIT_HD constexpr int quadratic_character(int a, int q) {
  a %= q;
  if (a < 0) a += q;
  if (a == 0) return 0;
  for (int x = 1; x < q; ++x)
    if (x * x % q == a) return 1;
  return -1;
}

// q = 3 mod 4, prime: order q + 1. S = [[0, 1^T], [-1, Q]], Q[i][j] = chi(j - i); H = I + S.
template <int Q>
KBIT_HD constexpr SmallHadamard<Q + 1> paley1() {
  SmallHadamard<Q + 1> m{};
  for (int i = 0; i <= Q; ++i)
    for (int j = 0; j <= Q; ++j) {
      const int s = i == 0 ? (j == 0 ? 0 : 1) : j == 0 ? -1 : quadratic_character(j - i, Q);
      m.h[i][j] = int8_t(s + (i == j ? 1 : 0));
    }
  return m;
}

// q = 1 mod 4, prime: order 2 (q + 1). The symmetric conference matrix
// [[0, 1^T], [1, Q]] with each 0 -> [[1, -1], [-1, -1]] and each +-1 -> +-[[1, 1], [1, -1]].
template <int Q>
KBIT_HD constexpr SmallHadamard<2 * (Q + 1)> paley2() {
  SmallHadamard<2 * (Q + 1)> m{};
  for (int i = 0; i <= Q; ++i)
    for (int j = 0; j <= Q; ++j) {
      const int v = i == 0 ? (j == 0 ? 0 : 1) : j == 0 ? 1 : quadratic_character(j - i, Q);
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
          m.h[2 * i + a][2 * j + b] =
              int8_t(v == 0 ? ((a == 0 && b == 0) ? 1 : -1) : v * ((a == 1 && b == 1) ? -1 : 1));
    }
  return m;
}

template <int P>
KBIT_HD constexpr SmallHadamard<P> small_hadamard() {
  static_assert(P == 1 || P == 2 || P == 12 || P == 20 || P == 28, "no built-in Hadamard matrix of this order");
  if constexpr (P == 1) {
    return SmallHadamard<1>{{{1}}};
  } else if constexpr (P == 2) {
    return SmallHadamard<2>{{{1, 1}, {1, -1}}};
  } else if constexpr (P == 12) {
    return paley1<11>();
  } else if constexpr (P == 20) {
    return paley1<19>();
  } else {
    return paley2<13>();
  }
}

// Entry (a, c) of H_P, or of H_P^T when TRANSPOSE: a constant expression.
template <int P, bool TRANSPOSE, int A, int C>
KBIT_HD constexpr int small_hadamard_sign() {
  return TRANSPOSE ? small_hadamard<P>().h[C][A] : small_hadamard<P>().h[A][C];
}

}  // namespace kbit::detail
