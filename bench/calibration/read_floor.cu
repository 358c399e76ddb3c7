// Calibration, not part of the library: how fast can plain kernels read the 51.4 MB of the
// Kimi-K3 latent projection (N = 7168, K = 3584, bf16) when called back to back in a CUDA
// graph with 6 buffers rotated past L2 (24 calls per graph, median of 15 replays)? Grid-
// stride, contiguous chunks per CTA, and the skinny GEMM's row-band order (CTA i reads
// rows [16 i, 16 i + 16), a piece of every row per step). Build and run on the GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90a bench/calibration/read_floor.cu -o read_floor && ./read_floor
// H200 results: bench/results/h200-read-floor-51MB.txt. `./read_floor BYTES` reads BYTES
// per call instead, and adds the GEMV's per-warp ring pattern (read_warp_ranges) in three
// unit orders: bench/results/h200-read-floor-gemv-pattern-33MB-17MB.txt (the order does not matter).
// `READ_FLOOR_ASYNC_ONLY=1 ./read_floor` times the skinny stream kernel's async loader without
// its MMAs, in several ring shapes: bench/results/h200-read-floor-async-ring-session28.txt.
// `READ_FLOOR_PARTS=1 ./read_floor` adds the stream kernel's pieces to that ring one at a time
// (parameters, A rows, epilogue): bench/results/h200-read-floor-ring-parts-session30.txt; both
// modes of this version (the cv4cta rows): bench/results/h200-read-floor-and-dense-tests-session32.txt
// (bare ring 12.95-13.1 us, all pieces 13.63, the real kernel 13.93 at M = 1 on that machine).
// `READ_FLOOR_BEST=1 ./read_floor BYTES`: the fastest plain read of BYTES over a sweep of grid-stride
// and chunked reads, the ceiling for a kernel that reads them once per call (issue 4's M = 1 target).
// `READ_FLOOR_PDL=1 ./read_floor BYTES`: the same reads chained with programmatic dependent launch
// (first loads before griddepcontrol.wait), the ceiling for a kernel in a PDL chain.
// `READ_FLOOR_GEMV_GAP=1 ./read_floor BYTES`: the GEMV's ring against batches of the same units
// (read_warp_batches) and grid-stride reads, side by side; batches gained at most 3-5%, not at
// both sizes (bench/results/h200-read-floor-gemv-gap-session34.txt).
#include <cuda_runtime.h>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <type_traits>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

template <int U>
__global__ void __launch_bounds__(256) read_kernel(const uint4* __restrict__ p, size_t n, unsigned* out) {
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + i + u * stride));
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678) out[0] = acc;
}

// Chained (PDL) form of read_kernel: the next call may launch once every CTA of this one has
// started (trigger at entry), and each thread requests its first U loads before
// griddepcontrol.wait (WAIT: 1) or all of its loads (WAIT: 2, reads that never depend on the
// previous call), the order kbit's kernels use under PDL (weights requested before the wait,
// x and the rest after). WAIT 0 waits first: the isolated form through the same launch. WAIT 3:
// all loads before the wait, then one 16-byte load per thread of `dep` (4 KB, L2-resident) after it:
// a GEMV's dependence on the previous kernel's x, one L2 round trip after the wait.
template <int U, int WAIT, int THREADS>
__global__ void __launch_bounds__(THREADS) read_kernel_pdl(const uint4* __restrict__ p, size_t n, unsigned* out,
                                                           const uint4* __restrict__ dep) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (WAIT == 0) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned acc = 0;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  bool waited = WAIT == 0;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + i + u * stride));
    if (WAIT == 1 && !waited) {
      asm volatile("griddepcontrol.wait;" ::: "memory");
      waited = true;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) { uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (!waited) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (WAIT == 3) {
    uint4 v;
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(dep + (threadIdx.x & 255)));
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

// Contiguous chunk per CTA (like a row group), U loads in flight per thread.
template <int U>
__global__ void __launch_bounds__(256) read_chunks(const uint4* __restrict__ p, size_t n, unsigned* out) {
  const size_t per = (n + gridDim.x - 1) / gridDim.x;
  const size_t b = blockIdx.x * per, e = min(n, b + per);
  unsigned acc = 0;
  size_t i = b + threadIdx.x;
  for (; i + (U - 1) * 256 < e; i += U * 256) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w) : "l"(p + i + u * 256));
#pragma unroll
    for (int u = 0; u < U; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < e; i += 256) { uint4 v = p[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678) out[0] = acc;
}

// Row-group pattern of the skinny GEMM: CTA i reads rows [16 i, 16 i + 16) of a
// [7168, 3584] bf16 matrix, PIECE bytes of every row per step, 8 warps, each warp two rows.
template <int PIECE>
__global__ void __launch_bounds__(256) read_rowpieces(const uint4* __restrict__ p, unsigned* out) {
  constexpr int row_bytes = 7168, per_lane = PIECE / 16 / 32 > 0 ? PIECE / 16 / 32 : 1;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned acc = 0;
  const char* base = reinterpret_cast<const char*>(p) + size_t(blockIdx.x) * 16 * row_bytes;
  for (int k = 0; k < row_bytes; k += PIECE) {
    uint4 v[2][per_lane];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < per_lane; ++u) {
        const int off = k + (u * 32 + lane) * 16;
        const uint4* q = reinterpret_cast<const uint4*>(base + size_t(2 * warp + h) * row_bytes + off);
        if (off < row_bytes && (u * 32 + lane) * 16 < PIECE)
          asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[h][u].x), "=r"(v[h][u].y), "=r"(v[h][u].z), "=r"(v[h][u].w) : "l"(q));
        else v[h][u] = make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int u = 0; u < per_lane; ++u) acc ^= v[h][u].x ^ v[h][u].y ^ v[h][u].z ^ v[h][u].w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

// The register-loading skinny kernel's (v2, b8e9663) load pattern: CTA of 8 warps owns 32
// rows; lane (g, c) loads 16 bytes of rows g, g + 8 of each 16-row stripe at column 32 s +
// 8 c; U consecutive steps per batch, warps interleave batches: each load instruction
// touches 8 rows x 64 bytes (two sectors of 8 lines) instead of 512 contiguous bytes.
template <int U>
__global__ void __launch_bounds__(256) read_v2_pattern(const uint16_t* __restrict__ w, unsigned* out) {
  constexpr int K = 3584, steps = K / 32, batches = steps / U;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const uint16_t* rows[2][2];
  for (int r = 0; r < 2; ++r)
    for (int h = 0; h < 2; ++h) rows[r][h] = w + size_t(blockIdx.x * 32 + 16 * r + g + 8 * h) * K + 8 * c;
  unsigned acc = 0;
  for (int b = warp; b < batches; b += 8) {
    uint4 v[2][2][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v[r][h][u].x), "=r"(v[r][h][u].y), "=r"(v[r][h][u].z), "=r"(v[r][h][u].w) : "l"(rows[r][h] + (b * U + u) * 32));
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h) acc ^= v[r][h][u].x ^ v[r][h][u].y ^ v[r][h][u].z ^ v[r][h][u].w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

// Generalised tile pattern: CTA owns 16 S rows; batch b is bytes [b E, (b + 1) E) of all its
// rows; warps take batches w, w + warps, ...; each load instruction covers RW rows x 512 / RW
// bytes. HINT: 0 plain ld.global, 1 .nc.L1::no_allocate, 2 .cs (evict-first at L2 too).
// (RW = 8, E = 128, S = 2, HINT 2) is the v2 pattern above.
template <int HINT>
__device__ __forceinline__ uint4 load16(const void* q) {
  uint4 v;
  if constexpr (HINT == 0) asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
  else if constexpr (HINT == 1) asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
  else asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q));
  return v;
}
template <int RW, int E, int S, int HINT>
__global__ void __launch_bounds__(256) read_tiles(const char* __restrict__ w, unsigned* out) {
  constexpr int row_bytes = 7168, P = 512 / RW, per_row = E / P, loads = 16 * S / RW * per_row;
  static_assert(E % P == 0, "a batch holds whole pieces");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const char* base = w + size_t(blockIdx.x) * 16 * S * row_bytes + size_t(lane / (32 / RW)) * row_bytes + (lane % (32 / RW)) * 16;
  unsigned acc = 0;
  for (int b = warp; b < row_bytes / E; b += warps) {
    uint4 v[loads];
#pragma unroll
    for (int j = 0; j < loads; ++j) v[j] = load16<HINT>(base + size_t(j / per_row) * RW * row_bytes + b * E + (j % per_row) * P);
#pragma unroll
    for (int j = 0; j < loads; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  if (acc == 0x12345678) out[0] = acc;
}

// The GEMV's pattern (issue 4, M = 1): every warp streams its own contiguous range of
// 1 KB units (lane l reads 8-byte words l, l + 32, l + 64, l + 96 of each unit: LOADS
// loads of WIDTH bytes), with a register ring of D + 1 units, D requested ahead (the
// GEMV: D = 3 at k = 4, 6 at k = 2; one CTA of 16 warps per SM). Unlike the grid-stride
// kernels above, no thread waits for a whole batch before requesting the next.
// ORDER: which unit a warp's i-th step reads. kOwnRange: warp w's own contiguous range
// (the GEMV); kGridInterleaved: step i of warp w reads unit i * warps + w (the whole grid
// sweeps the buffer in address order); kCtaInterleaved: each CTA owns a contiguous range
// and its warps take its units in turn (unit c0 + i * warps_per_cta + w).
constexpr int kOwnRange = 0, kGridInterleaved = 1, kCtaInterleaved = 2;
// A warp's steps [begin, end) in ORDER and the unit of each (read_warp_ranges, read_warp_batches).
template <int ORDER>
struct UnitWalk {
  int64_t begin, end, first, stride;
  __device__ explicit UnitWalk(int64_t units) {
    const int64_t wpc = blockDim.x / 32, warps = int64_t(gridDim.x) * wpc;
    const int64_t wg = int64_t(blockIdx.x) * wpc + threadIdx.x / 32;
    begin = wg * units / warps, end = (wg + 1) * units / warps, first = begin, stride = 1;
    if (ORDER == kGridInterleaved) {
      begin = 0, end = (units - wg + warps - 1) / warps, first = wg, stride = warps;
    } else if (ORDER == kCtaInterleaved) {
      const int64_t c0 = blockIdx.x * units / gridDim.x, c1 = (blockIdx.x + 1) * units / gridDim.x;
      const int64_t w = threadIdx.x / 32;
      begin = 0, end = c1 - c0 > w ? (c1 - c0 - w + wpc - 1) / wpc : 0, first = c0 + w, stride = wpc;
    }
  }
  // Own range: the steps are the units themselves.
  __device__ int64_t unit(int64_t step) const { return ORDER == kOwnRange ? step : first + step * stride; }
};
template <int D, int WIDTH, int ORDER = kOwnRange>
__global__ void __launch_bounds__(512) read_warp_ranges(const char* __restrict__ p, int64_t units, unsigned* out) {
  constexpr int kLoads = 1024 / 32 / WIDTH;  // per lane per 1 KB unit
  using Word = typename std::conditional<WIDTH == 8, uint2, uint4>::type;
  const int lane = threadIdx.x % 32;
  const UnitWalk<ORDER> walk(units);
  const int64_t u0 = walk.begin, u1 = walk.end;  // steps of this warp
  if (u0 >= u1) return;
  Word ring[D + 1][kLoads];
  auto load = [&](Word (&st)[kLoads], int64_t step) {
    const int64_t u = walk.unit(step);
    const Word* q = reinterpret_cast<const Word*>(p + u * 1024) + lane;
#pragma unroll
    for (int j = 0; j < kLoads; ++j) {
      if constexpr (WIDTH == 8)
        asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(st[j].x), "=r"(st[j].y) : "l"(q + 32 * j));
      else
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(st[j].x), "=r"(st[j].y), "=r"(st[j].z), "=r"(st[j].w) : "l"(q + 32 * j));
    }
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load(ring[d], min(u0 + d, u1 - 1));
  unsigned acc = 0;
  for (int64_t base = u0; base < u1; base += D + 1) {
#pragma unroll
    for (int d = 0; d <= D; ++d) {
      const int64_t u = base + d;
      if (u >= u1) break;
      load(ring[(d + D) % (D + 1)], min(u + D, u1 - 1));
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        acc ^= ring[d][j].x ^ ring[d][j].y;
        if constexpr (WIDTH == 16) acc ^= ring[d][j].z ^ ring[d][j].w;
      }
    }
  }
  if (acc == 0x12345678) out[0] = acc;
}

// The same units and orders as read_warp_ranges, but in batches (thirty-third session): a warp
// requests U units, then consumes all U before requesting the next U, as the grid-stride
// kernels do. Against the ring at the same bytes in flight it says whether the GEMV's rolling
// refill (one unit requested per unit consumed) or its per-warp 1 KB units cost the 0.7 us
// between the ring (9.8 us on 33.4 MB) and a grid-stride read with 16 warps per SM (9.1).
// PLAIN: ld.global without .nc / L1::no_allocate.
template <int U, int ORDER = kOwnRange, bool PLAIN = false>
__global__ void __launch_bounds__(512) read_warp_batches(const char* __restrict__ p, int64_t units, unsigned* out) {
  constexpr int kLoads = 1024 / 32 / 8;  // 8-byte loads per lane per 1 KB unit
  const int lane = threadIdx.x % 32;
  const UnitWalk<ORDER> walk(units);
  unsigned acc = 0;
  for (int64_t i = walk.begin; i < walk.end; i += U) {
    uint2 v[U][kLoads];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const uint2* q = reinterpret_cast<const uint2*>(p + walk.unit(min(i + b, walk.end - 1)) * 1024) + lane;
#pragma unroll
      for (int j = 0; j < kLoads; ++j) {
        if constexpr (PLAIN)
          asm volatile("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(v[b][j].x), "=r"(v[b][j].y) : "l"(q + 32 * j));
        else
          asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v[b][j].x), "=r"(v[b][j].y) : "l"(q + 32 * j));
      }
    }
#pragma unroll
    for (int b = 0; b < U; ++b)
#pragma unroll
      for (int j = 0; j < kLoads; ++j) acc ^= v[b][j].x ^ v[b][j].y;
  }
  if (acc == 0x12345678) out[0] = acc;
}

// The skinny GEMM stream kernel's async loader without its MMAs (twenty-eighth session):
// CTA i owns rows [16 i, 16 i + 16); warp w takes batches w, w + WARPS, ... of BC columns;
// each batch goes by cp.async (16 bytes per lane, 4 rows x 128 bytes per instruction,
// L2 evict-first) into the warp's ring of STAGES tiles, STAGES - 1 batches requested ahead;
// the landed tile is read back from shared memory (16 bytes per lane per load). The other
// parameters add one piece of the stream kernel at a time (thirtieth session: where do its
// isolated calls' ~1.1 us over this ring go?; all off: the plain ring). PARAMS: the addresses
// come from a 400-byte __grid_constant__ struct whose fields sit past two 128-byte tensor-map
// slots, as in SkinnyArgs. A_ROWS: each batch also copies A_ROWS rows of a small activation
// buffer (L2-resident) into the tile with cp.async.ca, as the kernel's A in the ring. EPI: a
// CTA barrier, a shared-memory reduction of the four warps' 16 x 8 floats and a 16 x 8 bf16
// store, as reduce_and_store.
struct RingArgs {
  alignas(64) unsigned char maps[256];
  const char* w;
  int64_t ldw;
  const char* x;
  int64_t ldx;
  unsigned short* y;
  int M, N, K;
  int stages, kslice;
  unsigned* out;
  unsigned char tail[64];
};
template <int WARPS, int BC, int STAGES, bool PARAMS, int A_ROWS, bool EPI>
__global__ void __launch_bounds__(WARPS * 32) read_async_ring_parts(const __grid_constant__ RingArgs a,
                                                                    const char* __restrict__ w_plain) {
  constexpr int K = 3584, batches = K / BC, kRowBytes = BC * 2, kTileRows = 16 + A_ROWS, kTile = kTileRows * kRowBytes;
  constexpr int kLoads = 16 * kRowBytes / 512;
  extern __shared__ __align__(128) unsigned char smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned char* tile = smem + warp * STAGES * kTile;
  const uint32_t ring = uint32_t(__cvta_generic_to_shared(tile));
  const char* wsrc = PARAMS ? a.w : w_plain;
  const int64_t ldw = PARAMS ? a.ldw * 2 : 7168;
  const int row0 = blockIdx.x * 16;
  const char* base = wsrc + size_t(row0) * ldw;
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  const int nb = PARAMS ? (a.K + BC - 1) / BC : batches;
  const int mine = nb > warp ? (nb - warp + WARPS - 1) / WARPS : 0;
  auto issue = [&](int i) {
    const int col0 = (warp + i * WARPS) * BC;
    const uint32_t dst = ring + uint32_t((i % STAGES) * kTile);
#pragma unroll
    for (int l = 0; l < kLoads; ++l) {
      const int row = 4 * (l % 4) + (lane >> 3), col = 64 * (l / 4) + 8 * (lane & 7);
      const int r = PARAMS ? min(row0 + row, a.N - 1) - row0 : row;
      const char* src = base + size_t(r) * ldw + size_t(col0 + col) * 2;
      asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;" ::"r"(dst + uint32_t(row * kRowBytes + col * 2)),
                   "l"(src), "l"(policy) : "memory");
    }
    if constexpr (A_ROWS > 0) {
      constexpr int chunks = A_ROWS * BC / 8;
      for (int q = lane; q < chunks; q += 32) {
        const int t = q / (BC / 8), cc = q % (BC / 8);
        const char* src = a.x + size_t(t) * a.ldx * 2 + size_t(col0 + 8 * cc) * 2;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst + uint32_t((16 + t) * kRowBytes + cc * 16)), "l"(src)
                     : "memory");
      }
    }
  };
  for (int i = 0; i + 1 < STAGES; ++i) {
    if (i < mine) issue(i);
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
  unsigned acc = 0;
  for (int i = 0; i < mine; ++i) {
    if (i + STAGES - 1 < mine) issue(i + STAGES - 1);
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group %0;" ::"n"(STAGES - 1) : "memory");
    __syncwarp();
    const unsigned char* t = tile + (i % STAGES) * kTile;
#pragma unroll
    for (int l = 0; l < kLoads + (A_ROWS * kRowBytes) / 512; ++l) {
      const uint4 v = *reinterpret_cast<const uint4*>(t + (l * 32 + lane) * 16);
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncwarp();
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  if constexpr (EPI) {
    __syncthreads();
    float* red = reinterpret_cast<float*>(smem);
    red[warp * 128 + (threadIdx.x & 31) * 4 + 0] = float(acc & 7);
    red[warp * 128 + (threadIdx.x & 31) * 4 + 1] = float(acc & 3);
    red[warp * 128 + (threadIdx.x & 31) * 4 + 2] = float(acc & 1);
    red[warp * 128 + (threadIdx.x & 31) * 4 + 3] = 0.0f;
    __syncthreads();
    if (warp == 0) {
      float v[4] = {0, 0, 0, 0};
      for (int w2 = 0; w2 < WARPS; ++w2)
        for (int e = 0; e < 4; ++e) v[e] += red[w2 * 128 + lane * 4 + e];
      for (int e = 0; e < 4; ++e) a.y[size_t(row0 + lane / 2) * 8 + (lane % 2) * 4 + e] = (unsigned short)(v[e]);
    }
  } else {
    if (acc == 0x12345678) a.out[0] = acc;
  }
}

// Usage: read_floor [BYTES] (default: the Kimi-K3 latent projection, 51.4 MB; glm47 q's
// packed bytes are 17.7 MB at k = 2 and 33.4 MB at k = 4). The row-shaped kernels need
// the default size.
int main(int argc, char** argv) {
  const size_t default_bytes = size_t(7168) * 3584 * 2;
  const size_t bytes = argc > 1 ? size_t(std::strtoull(argv[1], nullptr, 10)) / 1024 * 1024 : default_bytes;
  if (bytes == 0) { printf("usage: read_floor [BYTES] (at least 1024)\n"); return 1; }
  const size_t n = bytes / 16;
  // Buffers rotated past 3x the 60 MB L2, at least 6.
  const int bufs = std::max<int>(6, int((size_t(180) << 20) / bytes) + 2), calls = 4 * bufs;
  printf("read floor: %.1f MB per call, %d buffers, %d calls per graph\n", bytes / 1e6, bufs, calls);
  std::vector<uint4*> b(bufs);
  for (auto& x : b) { CK(cudaMalloc(&x, bytes)); CK(cudaMemset(x, 1, bytes)); }
  unsigned* out; CK(cudaMalloc(&out, 4));
  cudaStream_t s; CK(cudaStreamCreate(&s));
  float last_median_us = 0;
  auto bench = [&](const char* name, auto launch) -> int {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int c = 0; c < calls; ++c) launch(b[c % bufs]);
    CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    std::vector<float> t;
    for (int r = 0; r < 15; ++r) {
      cudaEventRecord(e0, s); CK(cudaGraphLaunch(ge, s)); cudaEventRecord(e1, s); CK(cudaEventSynchronize(e1));
      float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms * 1000 / calls);
    }
    std::sort(t.begin(), t.end());
    last_median_us = t[t.size() / 2];
    printf("%-36s %8.2f us  %5.2f TB/s\n", name, last_median_us, bytes / (last_median_us * 1e6));
    return 0;
  };
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  char name[64];
  const int64_t units = int64_t(bytes / 1024);
  auto ranges = [&](auto d, auto width, int ctas_per_sm, int warps, auto order) {
    constexpr int D = decltype(d)::value, W = decltype(width)::value, O = decltype(order)::value;
    const char* order_name[] = {"warp ranges", "grid-interleaved", "cta-interleaved"};
    snprintf(name, 64, "%s D=%d %dB loads %dx%dw", order_name[O], D, W, ctas_per_sm, warps);
    bench(name, [&](uint4* p) {
      read_warp_ranges<D, W, O><<<sms * ctas_per_sm, 32 * warps, 0, s>>>(reinterpret_cast<const char*>(p), units, out);
    });
  };
  using std::integral_constant;
  #define IC(v) integral_constant<int, v>{}
  const char* hint_names[3] = {"plain", "nc", "cs"};
  auto tiles = [&](auto rw, auto e, auto st, auto hint, int warps) {
    constexpr int RW = decltype(rw)::value, E = decltype(e)::value, S = decltype(st)::value, H = decltype(hint)::value;
    snprintf(name, 64, "tiles %dx%dB E=%d S=%d %s %dw", RW, 512 / RW, E, S, hint_names[H], warps);
    bench(name, [&](uint4* p) { read_tiles<RW, E, S, H><<<448 / S, 32 * warps, 0, s>>>(reinterpret_cast<const char*>(p), out); });
  };
  // The skinny stream kernel's async loader, MMAs left out: 448 CTAs (WARPS warps, a ring of
  // STAGES tiles of BC columns per warp), against its register-loading counterpart.
  auto async_ring = [&](auto warps, auto bc, auto stages) {
    constexpr int W = decltype(warps)::value, BC = decltype(bc)::value, ST = decltype(stages)::value;
    const int smem = W * ST * 16 * BC * 2;
    auto kern = read_async_ring_parts<W, BC, ST, false, 0, false>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    snprintf(name, 64, "async ring %dw BC=%d stages=%d", W, BC, ST);
    return bench(name, [&](uint4* p) {
      RingArgs ra{};
      ra.out = out;
      kern<<<448, 32 * W, smem, s>>>(ra, reinterpret_cast<const char*>(p));
    });
  };
  // READ_FLOOR_BEST=1 ./read_floor BYTES: the fastest plain read of BYTES we have, as the ceiling
  // for any kernel that must read them once per call (issue 4's M = 1 bandwidth target, its small
  // projections): grid-stride and contiguous-chunk reads over a sweep of grids and loads in
  // flight, then the best of them and the empty kernel in the same graph form.
  if (std::getenv("READ_FLOOR_BEST")) {
    float best = 1e30f;
    char best_name[64] = "";
    auto keep = [&] {
      if (last_median_us < best) best = last_median_us, snprintf(best_name, 64, "%s", name);
    };
    auto grid_stride = [&](auto u, int ctas) {
      constexpr int U = decltype(u)::value;
      snprintf(name, 64, "grid-stride U=%d grid=%d", U, ctas);
      bench(name, [&](uint4* p) { read_kernel<U><<<ctas, 256, 0, s>>>(p, n, out); });
      keep();
    };
    auto chunks = [&](auto u, int ctas) {
      constexpr int U = decltype(u)::value;
      snprintf(name, 64, "chunks U=%d ctas=%d", U, ctas);
      bench(name, [&](uint4* p) { read_chunks<U><<<ctas, 256, 0, s>>>(p, n, out); });
      keep();
    };
    for (int per_sm : {1, 2, 3, 4, 6, 8}) {
      grid_stride(IC(2), sms * per_sm);
      grid_stride(IC(4), sms * per_sm);
      grid_stride(IC(8), sms * per_sm);
    }
    for (int per_sm : {2, 4, 8}) {
      chunks(IC(4), sms * per_sm);
      chunks(IC(8), sms * per_sm);
    }
    bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
    printf("best plain read: %.0f bytes in %.2f us, %.2f TB/s (%s); empty kernel %.2f us\n", double(bytes), best,
           bytes / (best * 1e6), best_name, last_median_us);
    return 0;
  }
  // READ_FLOOR_PDL=1 ./read_floor BYTES: the chained ceiling (issue 4's M = 1 bar in PDL chains):
  // grid-stride reads launched with programmatic stream serialization, each call's first U loads
  // per thread before griddepcontrol.wait ("first before wait"; "all before wait": every load), at
  // the GEMV's residency (one CTA of 16 warps per SM, held there by shared memory) and at 2 and 4
  // CTAs per SM; "isolated" is the same kernel waiting at entry without the attribute; "all before,
  // x after" adds one dependent L2 load per thread after the wait (a GEMV reads x there), printed
  // as its own best. The empty kernel chained the same way is the chained launch floor.
  if (std::getenv("READ_FLOOR_PDL")) {
    float best = 1e30f, best_dep = 1e30f;
    char best_name[64] = "", best_dep_name[64] = "";
    int smem_per_sm = 0;
    uint4* dep;
    CK(cudaMalloc(&dep, 4096));
    CK(cudaMemset(dep, 2, 4096));
    cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
    // One launch, with programmatic stream serialization when chained.
    auto launch_ex = [&](auto kern, int grid, int block, int smem, bool chained, uint4* p, size_t count) {
      cudaLaunchConfig_t cfg{};
      cfg.gridDim = dim3(unsigned(grid));
      cfg.blockDim = dim3(unsigned(block));
      cfg.dynamicSmemBytes = size_t(smem);
      cfg.stream = s;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = chained ? 1 : 0;
      cudaLaunchKernelEx(&cfg, kern, static_cast<const uint4*>(p), count, out, static_cast<const uint4*>(dep));
    };
    auto pdl_read = [&](auto u, auto wait, auto threads, int per_sm, bool chained) {
      constexpr int U = decltype(u)::value, WAIT = decltype(wait)::value, TH = decltype(threads)::value;
      auto kern = read_kernel_pdl<U, WAIT, TH>;
      // Shared memory that leaves room for exactly per_sm CTAs: the driver reserves 1 KB per CTA, and
      // one more KB keeps the request below the SM's share whatever its rounding.
      const int smem = smem_per_sm / per_sm - 1024 - 1024;
      if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess) return;
      const char* wait_name[4] = {"isolated", "first before wait", "all before wait", "all before, x after"};
      snprintf(name, 64, "%s U=%d %dx%dw%s", chained ? wait_name[WAIT] : "isolated", U, per_sm, TH / 32,
               chained ? " pdl" : "");
      bench(name, [&](uint4* p) { launch_ex(kern, sms * per_sm, TH, smem, chained, p, n); });
      if (chained && WAIT != 3 && last_median_us < best) best = last_median_us, snprintf(best_name, 64, "%s", name);
      if (chained && WAIT == 3 && last_median_us < best_dep) best_dep = last_median_us, snprintf(best_dep_name, 64, "%s", name);
    };
    for (int rep = 0; rep < 2; ++rep) {
      pdl_read(IC(4), IC(0), IC(512), 1, false);
      pdl_read(IC(4), IC(1), IC(512), 1, true);
      pdl_read(IC(8), IC(1), IC(512), 1, true);
      pdl_read(IC(4), IC(2), IC(512), 1, true);
      pdl_read(IC(4), IC(0), IC(256), 2, false);
      pdl_read(IC(4), IC(1), IC(256), 2, true);
      pdl_read(IC(8), IC(1), IC(256), 2, true);
      pdl_read(IC(4), IC(1), IC(256), 4, true);
      pdl_read(IC(8), IC(1), IC(256), 4, true);
      pdl_read(IC(4), IC(2), IC(256), 4, true);
      pdl_read(IC(4), IC(3), IC(512), 1, true);
      pdl_read(IC(4), IC(3), IC(256), 2, true);
      pdl_read(IC(4), IC(3), IC(256), 4, true);
    }
    auto empty = [&](bool chained) {
      bench(chained ? "empty kernel pdl" : "empty kernel",
            [&](uint4* p) { launch_ex(read_kernel_pdl<4, 1, 512>, 1, 32, 0, chained, p, size_t(0)); });
    };
    empty(false);
    const float empty_us = last_median_us;
    empty(true);
    printf("best chained read: %.0f bytes in %.2f us, %.2f TB/s (%s); empty kernel %.2f us, chained %.2f us\n",
           double(bytes), best, bytes / (best * 1e6), best_name, empty_us, last_median_us);
    printf("best chained read with x after the wait: %.0f bytes in %.2f us, %.2f TB/s (%s)\n", double(bytes), best_dep,
           bytes / (best_dep * 1e6), best_dep_name);
    return 0;
  }
  if (std::getenv("READ_FLOOR_GEMV_GAP")) {  // READ_FLOOR_GEMV_GAP=1 ./read_floor 33400000
    auto batches = [&](auto u, auto order, auto plain, int ctas_per_sm, int warps) {
      constexpr int U = decltype(u)::value, O = decltype(order)::value;
      constexpr bool P = decltype(plain)::value != 0;
      snprintf(name, 64, "%s batches U=%d %s %dx%dw", O == kOwnRange ? "warp-range" : "grid-interleaved", U,
               P ? "plain" : "nc", ctas_per_sm, warps);
      bench(name, [&](uint4* p) {
        read_warp_batches<U, O, P><<<sms * ctas_per_sm, 32 * warps, 0, s>>>(reinterpret_cast<const char*>(p), units, out);
      });
    };
    for (int rep = 0; rep < 2; ++rep) {
      ranges(IC(3), IC(8), 1, 16, IC(kOwnRange));  // the GEMV at k = 4
      batches(IC(2), IC(kOwnRange), IC(0), 1, 16);  // 2 KB per warp in flight, as grid-stride U=4 x 264
      batches(IC(3), IC(kOwnRange), IC(0), 1, 16);
      batches(IC(4), IC(kOwnRange), IC(0), 1, 16);
      batches(IC(2), IC(kGridInterleaved), IC(0), 1, 16);
      batches(IC(3), IC(kGridInterleaved), IC(0), 1, 16);
      batches(IC(3), IC(kOwnRange), IC(1), 1, 16);
      batches(IC(2), IC(kOwnRange), IC(0), 2, 16);  // 32 warps per SM, as grid-stride U=4 x 528
      for (int k : {2, 4}) {
        snprintf(name, 64, "grid-stride U=4 grid=%d", sms * k);
        bench(name, [&](uint4* p) { read_kernel<4><<<sms * k, 256, 0, s>>>(p, n, out); });
      }
    }
    bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
    return 0;
  }
  if (std::getenv("READ_FLOOR_PARTS")) {  // READ_FLOOR_PARTS=1 ./read_floor: the skinny kernel's pieces
    RingArgs ra{};
    unsigned short* y; CK(cudaMalloc(&y, size_t(7168) * 8 * 2));
    char* xa; CK(cudaMalloc(&xa, size_t(16) * 3584 * 2)); CK(cudaMemset(xa, 0, size_t(16) * 3584 * 2));
    ra.ldw = 3584, ra.x = xa, ra.ldx = 3584, ra.y = y, ra.M = 1, ra.N = 7168, ra.K = 3584, ra.out = out;
    auto parts = [&](auto warps, auto bc, auto stages, auto params, auto arows, auto epi, int carveout) {
      constexpr int W = decltype(warps)::value, BC = decltype(bc)::value, ST = decltype(stages)::value;
      constexpr bool P = decltype(params)::value != 0, E = decltype(epi)::value != 0;
      constexpr int AR = decltype(arows)::value;
      auto kern = read_async_ring_parts<W, BC, ST, P, AR, E>;
      const int smem = W * ST * (16 + AR) * BC * 2;
      CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      snprintf(name, 64, "parts %dw BC=%d st=%d P%d A%d E%d cv%s", W, BC, ST, int(P), AR, int(E), carveout == -2 ? "4cta" : "-");
      return bench(name, [&](uint4* p) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(448), cfg.blockDim = dim3(32 * W), cfg.dynamicSmemBytes = size_t(smem), cfg.stream = s;
        cudaLaunchAttribute at[1]{};
        // -2: room for 4 CTAs and no more, as the skinny kernel's carveout_for (common.cuh)
        const int cv = carveout == -2 ? int((4 * (size_t(smem) + 1024) * 100 + 228 * 1024 - 1) / (228 * 1024)) : carveout;
        at[0].id = cudaLaunchAttributePreferredSharedMemoryCarveout, at[0].val.sharedMemCarveout = unsigned(cv);
        cfg.attrs = at, cfg.numAttrs = cv >= 0 ? 1 : 0;
        RingArgs r = ra;
        r.w = reinterpret_cast<const char*>(p);
        cudaLaunchKernelEx(&cfg, kern, r, reinterpret_cast<const char*>(p));
      });
    };
    for (int rep = 0; rep < 2; ++rep) {
      // the M = 1 plain plan: 4 warps, 64 columns, 3 stages (A: 8 rows of the tile, 1 used)
      parts(IC(4), IC(64), IC(3), IC(0), IC(0), IC(0), -1);
      parts(IC(4), IC(64), IC(3), IC(0), IC(0), IC(0), -2);
      parts(IC(4), IC(64), IC(3), IC(1), IC(0), IC(0), -1);
      parts(IC(4), IC(64), IC(3), IC(0), IC(8), IC(0), -1);
      parts(IC(4), IC(64), IC(3), IC(0), IC(0), IC(1), -1);
      parts(IC(4), IC(64), IC(3), IC(1), IC(8), IC(1), -2);
      // the M = 1-8 PDL plan's shape (plain launch here): 128 columns, 2 stages
      parts(IC(4), IC(128), IC(2), IC(0), IC(0), IC(0), -1);
      parts(IC(4), IC(128), IC(2), IC(1), IC(8), IC(1), -2);
    }
    bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
    return 0;
  }
  if (std::getenv("READ_FLOOR_ASYNC_ONLY")) {  // READ_FLOOR_ASYNC_ONLY=1 ./read_floor
    for (int rep = 0; rep < 2; ++rep) {
      async_ring(IC(4), IC(128), IC(2));  // the Kimi M <= 8 shape
      async_ring(IC(4), IC(64), IC(2));   // M = 9-16 (without A's rows)
      async_ring(IC(4), IC(128), IC(3));
      async_ring(IC(4), IC(64), IC(4));
      async_ring(IC(4), IC(64), IC(6));
      async_ring(IC(8), IC(128), IC(2));
      async_ring(IC(8), IC(64), IC(3));
      async_ring(IC(2), IC(128), IC(4));
      tiles(IC(4), IC(256), IC(1), IC(1), 4);
      tiles(IC(4), IC(256), IC(1), IC(1), 7);
    }
    bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
    return 0;
  }
  for (int rep = 0; rep < 2; ++rep) {  // the unit orders side by side, twice
    ranges(IC(3), IC(8), 1, 16, IC(kOwnRange));
    ranges(IC(3), IC(8), 1, 16, IC(kGridInterleaved));
    ranges(IC(3), IC(8), 1, 16, IC(kCtaInterleaved));
    ranges(IC(6), IC(8), 1, 16, IC(kGridInterleaved));
    ranges(IC(6), IC(8), 1, 16, IC(kCtaInterleaved));
  }
  if (std::getenv("READ_FLOOR_ORDERS_ONLY")) return 0;
  ranges(IC(3), IC(8), 1, 16, IC(kOwnRange));   // the GEMV at k = 4
  ranges(IC(6), IC(8), 1, 16, IC(kOwnRange));   // the GEMV's D at k = 2
  ranges(IC(3), IC(16), 1, 16, IC(kOwnRange));
  ranges(IC(6), IC(16), 1, 16, IC(kOwnRange));
  ranges(IC(12), IC(8), 1, 16, IC(kOwnRange));
  ranges(IC(3), IC(8), 2, 16, IC(kOwnRange));   // 32 warps per SM
  ranges(IC(6), IC(8), 2, 16, IC(kOwnRange));
  ranges(IC(3), IC(8), 1, 8, IC(kOwnRange));
  ranges(IC(6), IC(8), 2, 8, IC(kOwnRange));
  if (bytes != default_bytes) {
    for (int k : {2, 4}) {
      snprintf(name, 64, "grid-stride U=4 grid=%d", sms * k);
      bench(name, [&](uint4* p) { read_kernel<4><<<sms * k, 256, 0, s>>>(p, n, out); });
    }
    bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
    return 0;
  }
  for (int k : {1, 2, 4, 8}) {
    snprintf(name, 64, "grid-stride U=4 grid=%d", sms * k);
    bench(name, [&](uint4* p) { read_kernel<4><<<sms * k, 256, 0, s>>>(p, n, out); });
    snprintf(name, 64, "grid-stride U=8 grid=%d", sms * k);
    bench(name, [&](uint4* p) { read_kernel<8><<<sms * k, 256, 0, s>>>(p, n, out); });
  }
  for (int ctas : {224, 448, 896, 1792}) {
    snprintf(name, 64, "chunks U=4 ctas=%d", ctas);
    bench(name, [&](uint4* p) { read_chunks<4><<<ctas, 256, 0, s>>>(p, n, out); });
    snprintf(name, 64, "chunks U=8 ctas=%d", ctas);
    bench(name, [&](uint4* p) { read_chunks<8><<<ctas, 256, 0, s>>>(p, n, out); });
  }
  bench("rowpieces 512 B (8 KB/CTA/step)", [&](uint4* p) { read_rowpieces<512><<<448, 256, 0, s>>>(p, out); });
  bench("rowpieces 1 KB", [&](uint4* p) { read_rowpieces<1024><<<448, 256, 0, s>>>(p, out); });
  bench("rowpieces 2 KB", [&](uint4* p) { read_rowpieces<2048><<<448, 256, 0, s>>>(p, out); });
  bench("rowpieces 4 KB", [&](uint4* p) { read_rowpieces<4096><<<448, 256, 0, s>>>(p, out); });
  bench("rowpieces 8 KB (whole rows)", [&](uint4* p) { read_rowpieces<8192><<<448, 256, 0, s>>>(p, out); });
  bench("v2 pattern U=2 (224 CTAs x 8 warps)", [&](uint4* p) { read_v2_pattern<2><<<224, 256, 0, s>>>(reinterpret_cast<const uint16_t*>(p), out); });
  bench("v2 pattern U=4", [&](uint4* p) { read_v2_pattern<4><<<224, 256, 0, s>>>(reinterpret_cast<const uint16_t*>(p), out); });
  tiles(IC(8), IC(128), IC(2), IC(2), 8);  // v2
  tiles(IC(8), IC(128), IC(2), IC(1), 8);
  tiles(IC(8), IC(128), IC(2), IC(0), 8);
  tiles(IC(8), IC(128), IC(1), IC(1), 8);
  tiles(IC(8), IC(128), IC(1), IC(2), 8);
  tiles(IC(4), IC(256), IC(1), IC(1), 7);
  tiles(IC(4), IC(256), IC(1), IC(2), 7);
  tiles(IC(2), IC(256), IC(1), IC(1), 7);
  tiles(IC(2), IC(256), IC(1), IC(2), 7);
  tiles(IC(1), IC(512), IC(1), IC(1), 7);
  tiles(IC(1), IC(512), IC(1), IC(2), 7);
  tiles(IC(8), IC(256), IC(1), IC(1), 7);
  tiles(IC(8), IC(512), IC(1), IC(1), 7);
  tiles(IC(4), IC(512), IC(1), IC(1), 7);
  async_ring(IC(4), IC(128), IC(2));
  async_ring(IC(4), IC(64), IC(2));
  bench("empty kernel", [&](uint4* p) { read_chunks<4><<<1, 32, 0, s>>>(p, 0, out); });
  return 0;
}
