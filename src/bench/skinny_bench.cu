#include "bench/skinny_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <functional>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/clock_json.h"
#include "bench/inputs.h"
#include "core/build_info.h"
#include "bench/timing.h"
#include "cpu/parallel.h"
#include "cuda/common.cuh"
#include "cuda/skinny/skinny_args.h"
#include "dispatch/cublas_gemm.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/skinny.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

// The floor the skinny kernel is measured against: a kernel that only reads W (grid-stride,
// 16-byte non-caching loads, four in flight per thread), timed on the same rotating buffers.
__global__ void __launch_bounds__(256) read_floor_kernel(const uint4* __restrict__ w, size_t n, unsigned* sink) {
  constexpr int kInFlight = 4;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + (kInFlight - 1) * stride < n; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                   : "l"(w + i + u * stride));
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) acc ^= w[i].x ^ w[i].y ^ w[i].z ^ w[i].w;
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never taken
}

}  // namespace

SkinnyOptions skinny_options_of(const detail::LinearConfig& c) {
  SkinnyOptions o;
  o.loader = c.loader;
  o.warps = c.warps, o.stripes = c.stripes, o.stages = c.stages, o.kslice = c.kslice, o.splits = c.splits;
  return o;
}

// The swept kernel shapes for M: the ring's consumer warps x stripes x ring (stages,
// kslice) x cluster splits; the streaming kernel's loaders x warps x batches (or ring
// tiles) x splits. Only shapes that are instantiated (check_skinny_shape, which knows
// the ones that would spill or stop at M = 16) and fit in shared memory at this M.
std::vector<detail::LinearConfig> skinny_sweep_candidates(int64_t m) {
  std::vector<detail::LinearConfig> out;
  const int nt = plan_skinny(m, 1, 8).n_tiles;
  auto add = [&](SkinnyLoader l, int w, int r, int p, int ks, int s) {
    const cuda::detail::SkinnyShape shape{nt, w, r, p, ks, s, l};
    try {
      cuda::detail::check_skinny_shape(shape);
    } catch (const Error&) {
      return;
    }
    if (cuda::detail::skinny_shared_bytes(shape, int(m)) > cuda::detail::kMaxSkinnySharedBytes) return;
    detail::LinearConfig c;
    c.bits = 16, c.n_tiles = nt, c.loader = l, c.warps = w, c.stripes = r, c.stages = p, c.kslice = ks, c.splits = s;
    out.push_back(c);
  };
  for (int w : {2, 4, 8})
    for (int r : {1, 2, 4})
      for (auto [p, ks] : {std::pair{4, 128}, std::pair{8, 128}, std::pair{3, 256}, std::pair{4, 256},
                           std::pair{6, 256}, std::pair{3, 512}, std::pair{4, 512}})
        for (int s : {1, 2, 4}) add(SkinnyLoader::tma, w, r, p, ks, s);
  for (SkinnyLoader l : {SkinnyLoader::registers, SkinnyLoader::staged})
    for (int w : {4, 8})
      for (auto [p, ks] : {std::pair{2, 64}, std::pair{3, 64}, std::pair{2, 128}})
        for (int s : {1, 2, 4}) add(l, w, 1, p, ks, s);
  // async: 4 warps x stages x 16 rows x kslice columns fit 4 CTAs per SM up to 48 KB; two
  // stripes (32 rows sharing each A fragment) with 8 warps keep 224 CTAs x 8 warps busy.
  for (int r : {1, 2})
    for (int w : {4, 8})
      for (auto [p, ks] : {std::pair{2, 64}, std::pair{3, 64}, std::pair{4, 64}, std::pair{6, 64}, std::pair{2, 128},
                           std::pair{3, 128}, std::pair{4, 128}})
        for (int s : {1, 2}) add(SkinnyLoader::async, w, r, p, ks, s);
  return out;
}

detail::LinearConfig parse_skinny_config(const std::string& text) {
  detail::LinearConfig c;
  c.bits = 16;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    const auto eq = part.find('=');
    KBIT_REQUIRE(eq != std::string::npos, "skinny config '", text, "': expected key=value pairs, got '", part, "'");
    const std::string key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "l") {
      c.loader = parse_skinny_loader(value);
      continue;
    }
    int v = 0;
    try {
      v = std::stoi(value);
    } catch (const std::exception&) {
      throw Error("skinny config '" + text + "': '" + value + "' is not a number");
    }
    if (key == "w") c.warps = v;
    else if (key == "r") c.stripes = v;
    else if (key == "p") c.stages = v;
    else if (key == "c") c.kslice = v;
    else if (key == "s") c.splits = v;
    else throw Error("skinny config '" + text + "': unknown key '" + key + "' (l, w, r, p, c, s)");
  }
  return c;
}

std::string skinny_config_name(const detail::LinearConfig& c) {
  SkinnyPlan p;
  p.loader = c.loader, p.warps = c.warps, p.stripes = c.stripes, p.stages = c.stages, p.kslice = c.kslice;
  p.splits = c.splits;
  return p.describe();
}

std::vector<SkinnyBenchRow> run_skinny_bench(const SkinnyBenchOptions& o) {
  KBIT_REQUIRE(cuda::device_available(), "kbit tune skinny needs a CUDA GPU: ", cuda::device_description());
  KBIT_REQUIRE(o.mode == "baseline" || o.mode == "sweep" || o.mode == "selected",
               "--mode must be baseline, sweep or selected, got ", o.mode);
  KBIT_REQUIRE(o.shards >= 1 && o.shard >= 0 && o.shard < o.shards, "--shard must be i/n with 0 <= i < n");
  KBIT_REQUIRE(o.k % 8 == 0 && o.n > 0 && o.k > 0, "skinny: N > 0 and K a positive multiple of 8, got N=", o.n,
               " K=", o.k);
  for (int64_t m : o.ms) KBIT_REQUIRE(m >= 1 && m <= kMaxSkinnyM, "skinny: M must be 1..", kMaxSkinnyM, ", got ", m);
  const DeviceInfo dev = device_info();
  const int64_t n = o.n, k = o.k;
  const int64_t max_m = *std::max_element(o.ms.begin(), o.ms.end());
  const size_t bytes_per_call = size_t(n * k * 2 + (o.residual ? max_m * n * 2 : 0));
  const int sets = int(std::clamp<double>(std::ceil(o.cache_multiplier * double(dev.l2_bytes) / double(bytes_per_call)),
                                          1.0, double(o.max_buffers)));
  const std::vector<uint16_t> w = random_bf16(size_t(n * k), 11, 0.05f);
  std::vector<Buffer> wd, rd;
  wd.push_back(upload(w));
  for (int i = 1; i < sets; ++i) wd.push_back(copy_of(wd[0]));
  const std::vector<uint16_t> x = random_bf16(size_t(max_m * k), 12, 1.0f);
  const std::vector<uint16_t> r = random_bf16(size_t(max_m * n), 13, 1.0f);
  for (int i = 0; i < sets && o.residual; ++i) rd.push_back(upload(r));
  Buffer xd = upload(x), yd = Buffer::allocate(Memory::device, size_t(max_m * n) * 2);
  // fp64 reference of every output row
  std::vector<double> ref(size_t(max_m * n));
  cpu::detail::parallel_for(n, 16, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j)
      for (int64_t i = 0; i < max_m; ++i) {
        double acc = o.residual ? double(bf16_bits_to_float(r[size_t(i * n + j)])) : 0.0;
        for (int64_t c = 0; c < k; ++c)
          acc += double(bf16_bits_to_float(x[size_t(i * k + c)])) * double(bf16_bits_to_float(w[size_t(j * k + c)]));
        ref[size_t(i * n + j)] = acc;
      }
  });
  Buffer lt_ws = Buffer::allocate(Memory::device, detail::kLtWorkspaceBytes);

  std::vector<SkinnyBenchRow> rows;
  for (int64_t m : o.ms) {
    auto validate = [&](SkinnyBenchRow& row) {
      std::vector<uint16_t> got(size_t(m * n));
      check_cuda(cudaMemcpy(got.data(), yd.data(), got.size() * 2, cudaMemcpyDeviceToHost), "skinny: reading C");
      double dot = 0, na = 0, nb = 0;
      bool finite = true;
      for (size_t i = 0; i < got.size(); ++i) {
        const double y = bf16_bits_to_float(got[i]), t = ref[i];
        finite = finite && std::isfinite(y);
        dot += y * t, na += y * y, nb += t * t;
        row.max_abs_error = std::max(row.max_abs_error, std::fabs(y - t));
        row.max_scaled_error = std::max(row.max_scaled_error, std::fabs(y - t) / (std::fabs(t) + 1));
      }
      row.cosine = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
      row.valid = finite && row.cosine > 0.999;
    };
    auto time_it = [&](SkinnyBenchRow& row, const std::function<void(cudaStream_t, int)>& launch) {
      TimingOptions t;
      t.calls_per_graph = std::max(sets, 8);
      const double est_us = std::max(double(bytes_per_call) / 3.5e6, 3.0);
      t.replays = o.replays > 0 ? o.replays : int(std::clamp(2000.0 / (t.calls_per_graph * est_us), 1.0, 100.0));
      t.repeats = o.repeats;
      check_cuda(cudaMemset(yd.data(), 0xff, yd.size()), "skinny: poison");
      const Timing tm = time_graph(launch, t);
      row.median_us = tm.median_us, row.p10_us = tm.p10_us, row.p90_us = tm.p90_us, row.mean_us = tm.mean_us;
      row.cv_pct = tm.cv_pct, row.samples_us = tm.samples_us, row.clocks = tm.clocks;
      validate(row);
    };
    auto base_row = [&](const std::string& backend) {
      SkinnyBenchRow row;
      row.m = m, row.n = n, row.k = k, row.backend = backend, row.mode = o.mode, row.num_buffers = sets;
      row.cache_multiplier = o.cache_multiplier;
      return row;
    };
    if (o.include_cublas && o.shard == 0) {
      SkinnyBenchRow row = base_row("cublas_addmm");
      try {
        detail::LtGemm gemm(m, n, k, DType::bf16, o.residual);
        row.config = gemm.config();
        time_it(row, [&](cudaStream_t s, int call) {
          gemm.run(xd.data(), wd[size_t(call % sets)].data(), o.residual ? rd[size_t(call % sets)].data() : nullptr,
                   nullptr, yd.data(), lt_ws.data(), lt_ws.size(), s);
        });
      } catch (const std::exception& e) {
        row.error = e.what();
      }
      rows.push_back(row);
    }
    if (o.include_cublas && o.shard == 0) {
      // Reads W only: what the memory system gives this harness for the same bytes.
      SkinnyBenchRow row = base_row("read_floor");
      try {
        const int ctas = 4 * dev.sms;
        Buffer sink = Buffer::allocate(Memory::device, 4);
        row.config = "read W, " + std::to_string(ctas) + " CTAs x 256";
        TimingOptions t;
        t.calls_per_graph = std::max(sets, 8);
        t.replays = o.replays > 0 ? o.replays : 20;
        t.repeats = o.repeats;
        const Timing tm = time_graph(
            [&](cudaStream_t s, int call) {
              read_floor_kernel<<<ctas, 256, 0, s>>>(static_cast<const uint4*>(wd[size_t(call % sets)].data()),
                                                     size_t(n * k * 2 / 16), static_cast<unsigned*>(sink.data()));
            },
            t);
        row.median_us = tm.median_us, row.p10_us = tm.p10_us, row.p90_us = tm.p90_us, row.mean_us = tm.mean_us;
        row.cv_pct = tm.cv_pct, row.samples_us = tm.samples_us, row.clocks = tm.clocks;
        row.valid = true;  // nothing to validate: no output
      } catch (const std::exception& e) {
        row.error = e.what();
      }
      rows.push_back(row);
    }
    // Each candidate runs as a plain launch and, with --pdl, chained with PDL: a shape per
    // launch kind (the same in sweep mode; selected mode plans each kind, since the table
    // may hold a PDL entry).
    struct Candidate {
      detail::LinearConfig plain, chained;
    };
    std::vector<Candidate> candidates;
    if (o.mode == "sweep") {
      const SkinnyLoader only = parse_skinny_loader(o.loader);
      std::vector<detail::LinearConfig> all;
      for (const auto& c : skinny_sweep_candidates(m))
        if (only == SkinnyLoader::automatic || c.loader == only) all.push_back(c);
      for (size_t i = 0; i < all.size(); ++i)
        if (int(i % size_t(o.shards)) == o.shard) candidates.push_back({all[i], all[i]});
    } else {
      SkinnyOptions fixed;  // baseline: one fixed shape, no cluster split
      if (o.mode == "baseline") fixed.loader = SkinnyLoader::tma, fixed.warps = 4, fixed.stripes = 2, fixed.stages = 4, fixed.kslice = 256, fixed.splits = 1;
      if (o.mode == "selected" && !o.config.empty()) fixed = skinny_options_of(parse_skinny_config(o.config));
      auto config_of = [&](bool pdl) {
        SkinnyOptions so = fixed;
        so.pdl = pdl;
        const SkinnyPlan p = plan_skinny(m, n, k, so);
        detail::LinearConfig c;
        c.bits = 16, c.n_tiles = p.n_tiles, c.loader = p.loader, c.warps = p.warps, c.stripes = p.stripes;
        c.stages = p.stages, c.kslice = p.kslice;
        c.splits = p.splits;
        return c;
      };
      candidates.push_back({config_of(false), config_of(true)});
    }
    for (const Candidate& candidate : candidates)
      for (const bool pdl : {false, true}) {
        if (pdl && !o.pdl) continue;
        detail::LinearConfig c = pdl ? candidate.chained : candidate.plain;
        c.pdl = pdl;
        SkinnyBenchRow row = base_row(pdl ? "kbit_skinny_pdl" : "kbit_skinny");
        c.device = dev.name, c.n = n, c.k = k, c.m = m;
        row.config = skinny_config_name(c);
        try {
          const SkinnyOptions so = skinny_options_of(c);
          const SkinnyPlan p = plan_skinny(m, n, k, so);  // normalised (no empty split)
          c.splits = p.splits;
          row.config = skinny_config_name(c);
          const auto info = cuda::detail::skinny_kernel_info(cuda::detail::skinny_shape_of(p), DType::bf16, int(m), n, pdl);
          row.registers_per_thread = info.registers, row.spill_bytes = info.local_bytes;
          time_it(row, [&](cudaStream_t s, int call) {
            SkinnyOptions lo = so;
            lo.pdl = pdl;
            if (o.residual) lo.residual = TensorView{rd[size_t(call % sets)].data(), DType::bf16, m, n};
            skinny_gemm(TensorView{xd.data(), DType::bf16, m, k}, TensorView{wd[size_t(call % sets)].data(), DType::bf16, n, k},
                        MutableTensorView{yd.data(), DType::bf16, m, n}, s, lo);
          });
        } catch (const std::exception& e) {
          row.error = e.what();
        }
        c.us = row.median_us;
        row.plan = c;
        std::fprintf(stderr, "M=%-3lld %-14s %-28s %9.2f us %s\n", (long long)m, row.backend.c_str(), row.config.c_str(),
                     row.median_us, row.error.empty() ? (row.valid ? "" : "INVALID") : row.error.c_str());
        rows.push_back(row);
      }
  }
  return rows;
}

std::string skinny_row_json(const SkinnyBenchRow& r) {
  static const DeviceInfo dev = device_info();
  nlohmann::json j = {{"m", r.m}, {"n", r.n}, {"k", r.k}, {"backend", r.backend}, {"mode", r.mode},
                      {"config", r.config}, {"num_buffers", r.num_buffers}, {"settle_ms", default_settle_ms()},
                      {"cache_multiplier", r.cache_multiplier},
                      {"device", dev.name},
                      {"compute_capability", dev.cc_major * 10 + dev.cc_minor}, {"cuda_version", dev.cuda_runtime},
                      {"median_us", r.median_us}, {"p10_us", r.p10_us}, {"p90_us", r.p90_us}, {"mean_us", r.mean_us},
                      {"cv_pct", r.cv_pct}, {"samples_us", r.samples_us}, {"valid", r.valid}, {"cosine", r.cosine},
                      {"max_abs_error", r.max_abs_error}, {"max_scaled_error", r.max_scaled_error},
                      {"registers_per_thread", r.registers_per_thread}, {"spill_bytes", r.spill_bytes},
                      {"commit", kbit::detail::kGitCommit}};
  if (!r.error.empty()) j["error"] = r.error;
  add_clock_fields(j, r.clocks);
  return j.dump();
}

std::vector<detail::LinearConfig> best_skinny_configs(const std::vector<SkinnyBenchRow>& rows) {
  std::map<std::pair<bool, int64_t>, detail::LinearConfig> best;  // (PDL entry, M)
  for (const auto& r : rows) {
    const bool pdl = r.backend == "kbit_skinny_pdl";
    if ((pdl || r.backend == "kbit_skinny") && r.valid && r.error.empty() && r.spill_bytes == 0) {
      const auto key = std::pair{pdl, r.m};
      if (!best.count(key) || r.median_us < best[key].us) {
        best[key] = r.plan;
        best[key].pdl = pdl;
      }
    }
  }
  std::vector<detail::LinearConfig> out;
  for (auto& [key, c] : best) out.push_back(c);
  return out;
}

}  // namespace kbit::bench
