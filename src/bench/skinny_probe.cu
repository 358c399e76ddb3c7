#include "bench/skinny_probe.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "bench/inputs.h"
#include "bench/skinny_bench.h"
#include "bench/timing.h"
#include "cuda/common.cuh"
#include "cuda/skinny/skinny_args.h"
#include "dispatch/linear_internal.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/skinny.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;
namespace d = cuda::detail;

// Medians over the iterations of per-call statistics, by name, in insertion order.
struct Table {
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> values;
  void add(const std::string& name, double v) {
    if (!values.count(name)) order.push_back(name);
    values[name].push_back(v);
  }
};

}  // namespace

void run_skinny_probe(const SkinnyProbeOptions& o) {
  KBIT_REQUIRE(o.m >= 1 && o.m <= kMaxSkinnyM, "--m must be 1..", kMaxSkinnyM);
  KBIT_REQUIRE(o.n >= 1 && o.k >= 8 && o.k % 8 == 0, "--n must be positive and --k a positive multiple of 8");
  KBIT_REQUIRE(o.iterations >= 1 && o.chain >= 1 && o.chain <= 64, "--iterations must be positive, --chain 1..64");
  KBIT_REQUIRE(detail::skinny_probe_built(), "kbit bench skinny-probe: this build has no probe stamps in the skinny kernel "
               "(configure with -DKBIT_SKINNY_PROBE=ON)");
  KBIT_REQUIRE(cuda::device_available(), "kbit bench skinny-probe needs a CUDA GPU: ", cuda::device_description());
  const int64_t n = o.n, k = o.k, m = o.m;
  SkinnyOptions so = o.config.empty() ? SkinnyOptions{} : skinny_options_of(parse_skinny_config(o.config));
  so.pdl = o.pdl;
  const SkinnyPlan plan = plan_skinny(m, n, k, so);
  KBIT_REQUIRE(plan.loader != SkinnyLoader::tma, "skinny-probe: the plan (", plan.describe(),
               ") takes the ring kernel, which has no probe; pass --config with a stream loader");
  // Stamps for the largest grid a plan can have: 16-row groups x 8 splits x 8 warps.
  const int64_t max_warps = (n + 15) / 16 * 8 * 8;
  const size_t per_call = size_t(max_warps) * d::kSkinnyProbeSlots;
  Buffer probe = Buffer::allocate(Memory::device, per_call * size_t(o.chain) * sizeof(unsigned long long));
  Buffer flush = Buffer::allocate(Memory::device, size_t(256) << 20);  // > 3x the 60 MB L2
  std::vector<Buffer> wd;
  for (int c = 0; c < o.chain; ++c) wd.push_back(upload(random_bf16(size_t(n * k), 11 + uint32_t(c), 0.05f)));
  const Buffer xd = upload(random_bf16(size_t(m * k), 3, 1.0f));
  const Buffer rd = upload(random_bf16(size_t(m * n), 4, 1.0f));
  Buffer yd = Buffer::allocate(Memory::device, size_t(m * n) * 2);
  if (o.residual) so.residual = TensorView{rd.data(), DType::bf16, m, n};
  std::printf("skinny-probe: N = %lld, K = %lld, M = %lld, %s (%s), %s, %d call%s back to back%s, %d iterations, %.1f MB "
              "per call\n",
              (long long)n, (long long)k, (long long)m, plan.describe().c_str(), plan.source,
              o.residual ? "residual" : "no residual", o.chain, o.chain > 1 ? "s" : "", o.pdl ? " with PDL" : "",
              o.iterations, double(n * k * 2) / 1e6);

  Table calls, sms;
  std::vector<unsigned long long> host(per_call * size_t(o.chain));
  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "skinny-probe: stream");
  for (int it = 0; it < o.iterations; ++it) {
    check_cuda(cudaMemsetAsync(flush.data(), it, flush.size(), stream), "skinny-probe: flush");
    check_cuda(cudaMemsetAsync(probe.data(), 0, probe.size(), stream), "skinny-probe: clear");
    try {
      for (int c = 0; c < o.chain; ++c) {
        detail::set_skinny_probe(static_cast<unsigned long long*>(probe.data()) + per_call * size_t(c));
        skinny_gemm(TensorView{xd.data(), DType::bf16, m, k}, TensorView{wd[size_t(c)].data(), DType::bf16, n, k},
                    MutableTensorView{yd.data(), DType::bf16, m, n}, stream, so);
      }
    } catch (...) {
      detail::set_skinny_probe(nullptr);
      throw;
    }
    detail::set_skinny_probe(nullptr);
    check_cuda(cudaStreamSynchronize(stream), "skinny-probe: run");
    check_cuda(cudaMemcpy(host.data(), probe.data(), probe.size(), cudaMemcpyDeviceToHost), "skinny-probe: read");
    unsigned long long prev_end = 0;
    for (int c = 0; c < o.chain; ++c) {
      const unsigned long long* s0 = host.data() + per_call * size_t(c);
      unsigned long long t0 = ~0ull, t_end = 0;
      int64_t warps_seen = 0;
      for (int64_t w = 0; w < max_warps; ++w) {
        const unsigned long long* s = s0 + w * d::kSkinnyProbeSlots;
        if (!s[d::kSkinnyProbeEntry]) continue;
        ++warps_seen;
        t0 = std::min(t0, s[d::kSkinnyProbeEntry]);
        t_end = std::max(t_end, s[d::kSkinnyProbeStored]);
      }
      KBIT_REQUIRE(warps_seen > 0, "skinny-probe: call ", c, " stamped nothing (did it take the ring kernel?)");
      auto us = [&](unsigned long long t) { return t ? double(t - t0) * 1e-3 : 0.0; };
      std::vector<double> entry, first, loop, stored_cta, rate;
      std::map<unsigned, std::pair<int, double>> per_sm;  // SM -> (CTAs, last store)
      for (int64_t w = 0; w < max_warps; ++w) {
        const unsigned long long* s = s0 + w * d::kSkinnyProbeSlots;
        if (!s[d::kSkinnyProbeEntry]) continue;
        const int warps = int(s[d::kSkinnyProbeWarps]);
        const bool first_warp = warps > 0 && w % warps == 0;
        entry.push_back(us(s[d::kSkinnyProbeEntry]));
        if (s[d::kSkinnyProbeFirstBatch]) first.push_back(us(s[d::kSkinnyProbeFirstBatch]));
        loop.push_back(us(s[d::kSkinnyProbeLoopDone]));
        const unsigned long long batches = s[d::kSkinnyProbeBatches];
        if (batches > 1 && s[d::kSkinnyProbeFirstBatch])
          rate.push_back(double(s[d::kSkinnyProbeLoopDone] - s[d::kSkinnyProbeFirstBatch]) * 1e-3 / double(batches - 1));
        if (first_warp) {
          stored_cta.push_back(us(s[d::kSkinnyProbeStored]));
          auto& sm = per_sm[unsigned(s[d::kSkinnyProbeSm])];
          sm.first += 1;
          sm.second = std::max(sm.second, us(s[d::kSkinnyProbeStored]));
        }
      }
      const std::string p = "call " + std::to_string(c) + ": ";
      for (auto [name, v] : {std::pair{"entry", &entry}, {"first batch", &first}, {"loop done", &loop},
                             {"CTA stored", &stored_cta}}) {
        if (v->empty()) continue;  // a phase the kernel does not stamp
        calls.add(p + name + " median", quantile(*v, 0.5));
        calls.add(p + name + " p90", quantile(*v, 0.9));
        calls.add(p + name + " last", quantile(*v, 1.0));
      }
      if (!rate.empty()) calls.add(p + "us per batch after the first (median warp)", quantile(rate, 0.5));
      calls.add(p + "first entry to last store (us)", double(t_end - t0) * 1e-3);
      calls.add(p + "TB/s over that span", double(n * k * 2) / (double(t_end - t0) * 1e3));
      if (c > 0) calls.add(p + "gap from the previous call's last store to this entry", double(int64_t(t0 - prev_end)) * 1e-3);
      prev_end = t_end;
      std::map<int, std::vector<double>> by_count;
      for (const auto& [sm, v] : per_sm) by_count[v.first].push_back(v.second);
      for (const auto& [count, ends] : by_count) {
        const std::string q = p + std::to_string(count) + " CTAs/SM: ";
        sms.add(q + "SMs", double(ends.size()));
        sms.add(q + "last store median", quantile(ends, 0.5));
        sms.add(q + "last store max", quantile(ends, 1.0));
      }
    }
  }
  check_cuda(cudaStreamDestroy(stream), "skinny-probe: stream");
  std::printf("\n%-62s %9s %9s %9s   (us from the call's first entry; over %d iterations)\n", "", "median", "min", "max",
              o.iterations);
  for (const Table* t : {&calls, &sms})
    for (const auto& name : t->order) {
      const auto& v = t->values.at(name);
      std::printf("%-62s %9.2f %9.2f %9.2f\n", name.c_str(), quantile(v, 0.5), quantile(v, 0.0), quantile(v, 1.0));
    }
}

}  // namespace kbit::bench
