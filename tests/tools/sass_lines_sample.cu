// Input of the sass_lines.py test (tests/tools/sass_lines_test.cmake): a loop whose lines the
// script must find, and a kernel that spills, whose local-memory stores it must report.
// Line numbers matter: the test names lines 7-9 (the loop) and 13-20 (the spilling kernel).

__global__ void axpy_kernel(float* y, const float* x, float a, int n) {
  int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  for (; i < n; i += int(gridDim.x * blockDim.x)) {
    y[i] = a * x[i] + y[i];
  }
}

// 64 live values against the 32 registers that 1024 threads x 2 CTAs leave: spills.
__global__ void __launch_bounds__(1024, 2) spill_kernel(float* p) {
  float v[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) v[i] = p[threadIdx.x * 64 + i];
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) s += v[i] * v[63 - i] * v[(i * 7) % 64];
  for (int i = 0; i < 64; ++i) p[i * 1024 + threadIdx.x] = s * v[i];
}
