// The quality effect of Hadamard rotation: SQNR of the layer output x W^T (fp64
// reference with the original weights) when W is quantized with and without a
// rotation, on synthetic weight families. Behind `kbit report hadamard`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kbit {

struct RotationStudyRow {
  std::string weights;   // gaussian, student_t4, outliers
  int bits = 0;
  std::string rotation;  // "none", "block:64", "row", ...
  double output_sqnr_db = 0;
  double weight_sqnr_db = 0;
};

// W[n, k] per family (Gaussian; Student-t with 4 degrees of freedom; Gaussian
// with 0.1% of weights multiplied by 20), x[m, k] Gaussian.
std::vector<RotationStudyRow> hadamard_study(int64_t n, int64_t k, int64_t m, const std::vector<std::string>& rotations,
                                             const std::vector<int>& bits, uint64_t seed);
std::string format_study_markdown(const std::vector<RotationStudyRow>& rows);

}  // namespace kbit
