#include "bench/gemv_probe.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "bench/inputs.h"
#include "bench/timing.h"
#include "cuda/common.cuh"
#include "dispatch/linear_internal.h"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/moe.h"
#include "kbit/shapes.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

}  // namespace

void run_gemv_probe(const GemvProbeOptions& o) {
  const size_t dot = o.shape.find('.');
  KBIT_REQUIRE(dot != std::string::npos, "--shape must be model.projection (e.g. glm47.q), got ", o.shape);
  const ModelShapes& model = model_shapes(o.shape.substr(0, dot));
  const std::string name = o.shape.substr(dot + 1);
  const Projection* proj = model.find(name);
  KBIT_REQUIRE(proj, "no projection ", name, " in model ", model.key);
  require_supported_bits(o.bits);
  if (proj->experts > 1)
    KBIT_REQUIRE(o.m >= 1 && o.m * proj->active <= kGroupedGemvMaxRows, "--m (tokens) must be 1..",
                 kGroupedGemvMaxRows / proj->active, " for ", o.shape, " (the grouped GEMV's rows)");
  else
    KBIT_REQUIRE(o.m >= 1 && o.m <= cuda::detail::kGemvMaxM, "--m must be 1..", cuda::detail::kGemvMaxM);
  KBIT_REQUIRE(o.iterations >= 1, "--iterations must be positive");
  const int64_t n = proj->N, k = proj->K, m = o.m;
  if (proj->experts <= 1)
    KBIT_REQUIRE(detail::gemv_supports(m, k, o.bits), "the GEMV does not take M = ", m, ", K = ", k, " at k = ", o.bits);
  KBIT_REQUIRE(cuda::device_available(), "kbit bench gemv-probe needs a CUDA GPU: ", cuda::device_description());

  // One wave of GEMV CTAs at most (the launcher's bound).
  const int64_t warps = int64_t(detail::linear_sm_count()) * cuda::detail::kGemvMaxCtasPerSm * cuda::detail::kGemvWarps;
  const size_t slots = size_t(warps) * cuda::detail::kGemvProbeSlots;
  Buffer probe = Buffer::allocate(Memory::device, slots * sizeof(unsigned long long));
  Buffer flush = Buffer::allocate(Memory::device, size_t(256) << 20);  // > 3x the 60 MB L2
  std::function<void()> call;       // one GEMV call with the probe set
  std::function<void()> warm_call;  // the same kernel on other weights (warm_code)
  double packed_bytes = 0.0;   // weights the call reads
  // Dense: the GEMV straight from its arguments. Experts: kbit::expert_linear on T tokens
  // routed top-`active` by seeded random logits (its grouped GEMV, when it takes them).
  const bool grouped = proj->experts > 1;
  const int64_t e = grouped ? proj->experts : 1;
  const Buffer wd = stacked_bf16(e, n, k, 11);
  const QuantizedMatrix w = quantize_stack(wd, e, n, k, o.bits);
  const int64_t rows = grouped ? m * proj->active : m;
  const Buffer xd = upload(random_bf16(size_t(rows * k), 12, 1.0f));
  Buffer yd = Buffer::allocate(Memory::device, size_t(rows * n) * 2);
  LinearWorkspace ws({rows, n, k, false});
  Buffer offsets, warm_offsets;
  std::optional<QuantizedMatrix> w_other;  // dense warm_code: a second copy of the weights
  ExpertLinearOptions expert_options;
  expert_options.path = LinearPath::gemv;
  expert_options.tile_rows = o.tile_rows;
  if (grouped) {
    std::mt19937 rng{uint32_t(m)};
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> logits(size_t(m * e));
    for (auto& v : logits) v = nd(rng);
    const Routing r = cpu::route(logits.data(), m, e, proj->active, RoutingMode::topk_softmax);
    int touched = 0;
    for (int64_t i = 0; i < e; ++i) touched += r.offsets[size_t(i) + 1] > r.offsets[size_t(i)];
    packed_bytes = double(w.storage_bytes()) / double(e) * touched;
    offsets = upload(r.offsets.data(), r.offsets.size() * 4);
    call = [&] {
      expert_linear(TensorView{xd.data(), DType::bf16, rows, k}, w, e, static_cast<const int32_t*>(offsets.data()),
                    MutableTensorView{yd.data(), DType::bf16, rows, n}, ws, nullptr, expert_options);
    };
    // Another routing: (mostly) other experts' weights.
    std::mt19937 rng2{uint32_t(m + 1000)};
    for (auto& v : logits) v = nd(rng2);
    const Routing r2 = cpu::route(logits.data(), m, e, proj->active, RoutingMode::topk_softmax);
    warm_offsets = upload(r2.offsets.data(), r2.offsets.size() * 4);
    warm_call = [&] {
      expert_linear(TensorView{xd.data(), DType::bf16, rows, k}, w, e,
                    static_cast<const int32_t*>(warm_offsets.data()),
                    MutableTensorView{yd.data(), DType::bf16, rows, n}, ws, nullptr, expert_options);
    };
  } else {
    packed_bytes = double(w.storage_bytes());
    call = [&] {
      const cuda::detail::GemvArgs a = detail::gemv_args(w, TensorView{xd.data(), DType::bf16, m, k},
                                                         MutableTensorView{yd.data(), DType::bf16, m, n}, ws);
      detail::launch_gemv(o.bits, a, DType::bf16, nullptr);
    };
    if (o.warm_code) w_other.emplace(quantize_stack(wd, e, n, k, o.bits));
    warm_call = [&] {
      const cuda::detail::GemvArgs a = detail::gemv_args(*w_other, TensorView{xd.data(), DType::bf16, m, k},
                                                         MutableTensorView{yd.data(), DType::bf16, m, n}, ws);
      detail::launch_gemv(o.bits, a, DType::bf16, nullptr);
    };
  }

  std::printf("gemv-probe %s: N = %lld, K = %lld, %s = %lld, k = %d, %.1f MB packed%s; %s, %d calls\n",
              o.shape.c_str(), (long long)n, (long long)k, grouped ? "T" : "M", (long long)m, o.bits, packed_bytes / 1e6,
              grouped ? " (experts touched)" : "",
              o.warm_code ? "cold weights, code and x warm (a call on other weights first)"
              : o.hot_x   ? "cold weights, x in L2"
                          : "cold L2",
              o.iterations);
  // hot_x: x copied once after each flush, which leaves its lines in L2.
  Buffer x_touch = o.hot_x ? Buffer::allocate(Memory::device, size_t(rows * k) * 2) : Buffer();
  // Phases in time order; "offsets read" and "x arrived" only with -DKBIT_GEMV_PROBE_PHASES.
  namespace d = cuda::detail;
  const char* phase_names[] = {"entry",    "offsets read", "loads issued", "table built", "x arrived",
                               "x staged", "first piece",  "last unit",    "exit"};
  const int phase_slot[] = {d::kProbeEntry,   d::kProbeOffsetsRead, d::kProbeLoadsIssued,
                            d::kProbeTableBuilt, d::kProbeXArrived, d::kProbeXStaged,
                            d::kProbeFirstPiece, d::kProbeLastUnit,  d::kProbeExit};
  constexpr int kPhases = 9;
  std::vector<std::vector<double>> med(kPhases), p90(kPhases), mx(kPhases);
  std::vector<double> per_unit, kernel_us;
  // Per CTA, medians over the calls of each call's median, p90 and CTA-ending-last figure.
  constexpr int kCtaStats = 6;
  const char* cta_names[] = {"CTA last exit", "CTA median exit", "CTA tail", "CTA x staged", "CTA loop", "CTA units"};
  std::vector<std::vector<double>> cta_med(kCtaStats), cta_p90(kCtaStats), cta_last(kCtaStats);
  std::vector<double> balanced_end;
  // per_cta: by blockIdx.x over the calls: last exit, x staged, units, SM.
  std::map<int, std::array<std::vector<double>, 4>> by_cta;
  // Per warp index in the CTA, over all calls (is the slow warp always the same one?).
  std::vector<std::vector<double>> by_index(cuda::detail::kGemvWarps);
  std::vector<int> last_count(cuda::detail::kGemvWarps, 0);
  std::vector<unsigned long long> host(slots);
  for (int it = 0; it < o.iterations; ++it) {
    check_cuda(cudaMemset(flush.data(), it, flush.size()), "gemv-probe: flush");
    if (o.hot_x)
      check_cuda(cudaMemcpy(x_touch.data(), xd.data(), x_touch.size(), cudaMemcpyDeviceToDevice), "gemv-probe: x to L2");
    if (o.warm_code) warm_call();
    check_cuda(cudaMemset(probe.data(), 0, probe.size()), "gemv-probe: clear");
    detail::set_gemv_probe(static_cast<unsigned long long*>(probe.data()));
    try {
      call();
    } catch (...) {
      detail::set_gemv_probe(nullptr);
      throw;
    }
    detail::set_gemv_probe(nullptr);
    check_cuda(cudaDeviceSynchronize(), "gemv-probe: run");
    check_cuda(cudaMemcpy(host.data(), probe.data(), probe.size(), cudaMemcpyDeviceToHost), "gemv-probe: read");
    unsigned long long t0 = ~0ull, t_end = 0;
    for (int64_t wi = 0; wi < warps; ++wi) {
      const unsigned long long* s = host.data() + wi * cuda::detail::kGemvProbeSlots;
      if (s[cuda::detail::kProbeEntry]) t0 = std::min(t0, s[cuda::detail::kProbeEntry]);
    }
    std::vector<std::vector<double>> at(kPhases);
    for (int64_t wi = 0; wi < warps; ++wi) {
      const unsigned long long* s = host.data() + wi * cuda::detail::kGemvProbeSlots;
      if (!s[cuda::detail::kProbeEntry] || !s[cuda::detail::kProbeUnits]) continue;  // not launched, or no units
      for (int ph = 0; ph < kPhases; ++ph)
        if (s[phase_slot[ph]]) at[size_t(ph)].push_back(double(s[phase_slot[ph]] - t0) * 1e-3);
      t_end = std::max(t_end, s[cuda::detail::kProbeExit]);
      if (s[cuda::detail::kProbeLastUnit] > s[cuda::detail::kProbeXStaged])
        per_unit.push_back(double(s[cuda::detail::kProbeLastUnit] - s[cuda::detail::kProbeXStaged]) * 1e-3 /
                           double(s[cuda::detail::kProbeUnits]));
    }
    const GemvCtaSummary cs = summarize_gemv_ctas(host.data(), warps, t0);
    if (cs.latest >= 0) {
      const std::vector<double>* cta[kCtaStats] = {&cs.last_exit, &cs.median_exit, &cs.tail,
                                                   &cs.x_staged,  &cs.loop,        &cs.units};
      for (int i = 0; i < kCtaStats; ++i) {
        cta_med[size_t(i)].push_back(quantile(*cta[i], 0.5));
        cta_p90[size_t(i)].push_back(quantile(*cta[i], 0.9));
        cta_last[size_t(i)].push_back((*cta[i])[size_t(cs.latest)]);
      }
      balanced_end.push_back(quantile(cs.median_exit, 1.0));
      for (size_t i = 0; i < cs.cta.size(); ++i) {
        auto& v = by_cta[cs.cta[i]];
        v[0].push_back(cs.last_exit[i]), v[1].push_back(cs.x_staged[i]), v[2].push_back(cs.units[i]);
        v[3].push_back(cs.smid[i]);
      }
      for (int w = 0; w < cuda::detail::kGemvWarps; ++w) {
        by_index[size_t(w)].insert(by_index[size_t(w)].end(), cs.exit_vs_median[size_t(w)].begin(),
                                   cs.exit_vs_median[size_t(w)].end());
        last_count[size_t(w)] += cs.last_count[size_t(w)];
      }
    }
    for (int ph = 0; ph < kPhases; ++ph) {
      med[size_t(ph)].push_back(quantile(at[size_t(ph)], 0.5));
      p90[size_t(ph)].push_back(quantile(at[size_t(ph)], 0.9));
      mx[size_t(ph)].push_back(quantile(at[size_t(ph)], 1.0));
    }
    KBIT_REQUIRE(t0 != ~0ull, "gemv-probe: no GEMV warp stamped its phases (the call took another path)");
    kernel_us.push_back(double(t_end - t0) * 1e-3);
  }
  std::printf("\n%-14s %12s %12s %12s   (us from the first warp's entry; medians over the calls)\n", "phase",
              "warp median", "warp p90", "last warp");
  for (int ph = 0; ph < kPhases; ++ph)
    if (quantile(med[size_t(ph)], 0.5) > 0.0)  // phases this build does not stamp are left out
      std::printf("%-14s %12.2f %12.2f %12.2f\n", phase_names[ph], quantile(med[size_t(ph)], 0.5),
                  quantile(p90[size_t(ph)], 0.5), quantile(mx[size_t(ph)], 0.5));
  const double bytes = packed_bytes;
  const double span = quantile(kernel_us, 0.5);
  std::printf("\nfirst entry to last exit: %.2f us (%.2f TB/s over the packed weights)\n", span, bytes / (span * 1e6));
  std::printf("per unit (x staged to last unit, per warp): median %.3f us, p90 %.3f us\n", quantile(per_unit, 0.5),
              quantile(per_unit, 0.9));
  if (!balanced_end.empty()) {
    std::printf("\n%-16s %10s %10s %16s   (us; tail = last - median warp exit; loop = last exit - x staged)\n",
                "per CTA", "median", "p90", "CTA ending last");
    for (int i = 0; i < kCtaStats; ++i)
      std::printf("%-16s %10.2f %10.2f %16.2f\n", cta_names[i], quantile(cta_med[size_t(i)], 0.5),
                  quantile(cta_p90[size_t(i)], 0.5), quantile(cta_last[size_t(i)], 0.5));
    std::printf("latest CTA median exit (every CTA balanced inside): %.2f us\n", quantile(balanced_end, 0.5));
  }
  if (o.per_cta && !by_cta.empty()) {
    std::printf("\n%5s %9s %9s %7s %12s %5s   (medians over the calls; us; SM of the first call)\n", "CTA",
                "x staged", "exit", "units", "us per unit", "SM");
    for (const auto& [cta, v] : by_cta) {
      const double exit = quantile(v[0], 0.5), staged = quantile(v[1], 0.5), units = quantile(v[2], 0.5);
      std::printf("%5d %9.2f %9.2f %7.0f %12.4f %5.0f\n", cta, staged, exit, units,
                  units > 0 ? (exit - staged) / (units / cuda::detail::kGemvWarps) : 0.0, v[3].front());
    }
  }
  std::printf("\nwarp index in the CTA:     ");
  for (int w = 0; w < cuda::detail::kGemvWarps; ++w) std::printf(" %5d", w);
  std::printf("\nexit - CTA median (us):    ");
  for (int w = 0; w < cuda::detail::kGemvWarps; ++w)
    std::printf(" %5.2f", by_index[size_t(w)].empty() ? 0.0 : quantile(by_index[size_t(w)], 0.5));
  std::printf("\np90 of that (us):          ");
  for (int w = 0; w < cuda::detail::kGemvWarps; ++w)
    std::printf(" %5.2f", by_index[size_t(w)].empty() ? 0.0 : quantile(by_index[size_t(w)], 0.9));
  std::printf("\nCTA's last warp (count):   ");
  for (int w = 0; w < cuda::detail::kGemvWarps; ++w) std::printf(" %5d", last_count[size_t(w)]);
  std::printf("\n");
}

GemvCtaSummary summarize_gemv_ctas(const unsigned long long* stamps, int64_t warps, unsigned long long t0) {
  namespace d = cuda::detail;
  GemvCtaSummary out;
  out.exit_vs_median.resize(d::kGemvWarps);
  out.last_count.assign(d::kGemvWarps, 0);
  auto us = [&](unsigned long long t) { return double(t - t0) * 1e-3; };
  for (int64_t c0 = 0; c0 < warps; c0 += d::kGemvWarps) {
    std::vector<std::pair<int, double>> exits;  // (warp index in the CTA, exit)
    double staged = 0.0, units = 0.0;
    for (int64_t wi = c0; wi < std::min(warps, c0 + d::kGemvWarps); ++wi) {
      const unsigned long long* s = stamps + wi * d::kGemvProbeSlots;
      if (!s[d::kProbeEntry] || !s[d::kProbeUnits] || !s[d::kProbeExit]) continue;
      exits.emplace_back(int(wi - c0), us(s[d::kProbeExit]));
      staged = std::max(staged, us(s[d::kProbeXStaged]));
      units += double(s[d::kProbeUnits]);
    }
    if (exits.empty()) continue;
    std::vector<double> times;
    for (const auto& e : exits) times.push_back(e.second);
    const double last = quantile(times, 1.0), median = quantile(times, 0.5);
    int last_index = -1;
    for (const auto& [index, exit] : exits) {
      out.exit_vs_median[size_t(index)].push_back(exit - median);
      if (exit == last && last_index < 0) last_index = index;
    }
    ++out.last_count[size_t(last_index)];
    if (out.latest < 0 || last > out.last_exit[size_t(out.latest)]) out.latest = int(out.last_exit.size());
    out.last_exit.push_back(last), out.median_exit.push_back(median), out.tail.push_back(last - median);
    out.x_staged.push_back(staged), out.loop.push_back(last - staged), out.units.push_back(units);
    out.cta.push_back(int(c0 / d::kGemvWarps));
    out.smid.push_back(int(stamps[c0 * d::kGemvProbeSlots + d::kProbeSmid]));
  }
  return out;
}

}  // namespace kbit::bench
