// The backends of `kbit bench` and the loop that times and validates them.
// Each case: random inputs (hash-generated bf16, never zeros), weights and
// activations copied into enough buffer sets that one graph's calls exceed 3x
// L2, outputs poisoned (NaN) before the run, then the sampled output rows
// compared with an fp64 reference computed from the exact operands the
// backend multiplies (for kbit: the dequantized weights).
#include "bench/linear_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>

#include "bench/inputs.h"
#include "bench/moe_bench.h"
#include "core/build_info.h"
#include "dispatch/cublas_gemm.h"
#include "dispatch/linear_configs.h"
#include "kbit/linear.h"
#include "kbit/skinny.h"
#include "cpu/parallel.h"
#include "cuda/common.cuh"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/shapes.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;
using kbit::detail::LtGemm;

// Everything a backend needs for one case, on the host.
struct CaseInputs {
  LinearCase c;
  const std::vector<uint16_t>* w = nullptr;  // bf16 [N, K]
  std::vector<uint16_t> x, r;                // bf16 [M, K], [M, N]
  const QuantizedMatrix* q = nullptr;        // device, flat (kbit backends)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual bool is_kbit() const { return false; }
  virtual DType dtype() const { return DType::bf16; }
  virtual double weight_bytes(const CaseInputs& in) const { return double(in.c.n * in.c.k) * 2; }
  virtual void prepare(const CaseInputs& in, int sets) = 0;
  virtual void launch(cudaStream_t s, int set) = 0;
  virtual std::string config() const = 0;
  const void* y(int set) const { return y_[size_t(set)].data(); }

 protected:
  // x, r and y sets in the backend's dtype.
  void prepare_activations(const CaseInputs& in, int sets) {
    std::vector<uint16_t> x = in.x, r = in.r;
    if (dtype() == DType::f16)
      for (auto* v : {&x, &r})
        for (auto& e : *v) e = float_to_half_bits(bf16_bits_to_float(e));
    x_.clear(), r_.clear(), y_.clear();
    for (int i = 0; i < sets; ++i) {
      x_.push_back(upload(x.data(), x.size() * 2));
      if (in.c.residual) r_.push_back(upload(r.data(), r.size() * 2));
      y_.push_back(Buffer::allocate(Memory::device, size_t(in.c.m * in.c.n) * 2));
      check_cuda(cudaMemset(y_.back().data(), 0xff, y_.back().size()), "bench: poison");  // NaN in fp16 and bf16
    }
  }
  const void* r_or_null(int set) const { return r_.empty() ? nullptr : r_[size_t(set)].data(); }
  std::vector<Buffer> x_, r_, y_;
};

class CublasBackend : public Backend {
 public:
  CublasBackend(DType t, bool wrong = false, bool best = false) : dtype_(t), wrong_(wrong), best_(best) {}
  std::string name() const override {
    return wrong_ ? "fixture_wrong" : std::string(dtype_ == DType::bf16 ? "cublas_bf16" : "cublas_fp16") + (best_ ? "_best" : "");
  }
  DType dtype() const override { return dtype_; }
  void prepare(const CaseInputs& in, int sets) override {
    prepare_activations(in, sets);
    std::vector<uint16_t> w = *in.w;
    if (dtype_ == DType::f16)
      for (auto& e : w) e = float_to_half_bits(bf16_bits_to_float(e));
    w_.clear();
    w_.push_back(upload(w.data(), w.size() * 2));
    for (int i = 1; i < sets; ++i) w_.push_back(copy_of(w_[0]));
    // The fixture multiplies only the first half of K: plausible-looking and wrong.
    gemm_ = std::make_unique<LtGemm>(in.c.m, in.c.n, wrong_ ? in.c.k / 2 : in.c.k, dtype_, in.c.residual);
    if (lt_ws_.size() == 0) lt_ws_ = Buffer::allocate(Memory::device, kbit::detail::kLtWorkspaceBytes);
    if (best_) pick_fastest_candidate(in, sets);
  }
  void launch(cudaStream_t s, int set) override {
    gemm_->run(x_[size_t(set)].data(), w_[size_t(set)].data(), r_or_null(set), nullptr, y_[size_t(set)].data(),
               lt_ws_.data(), lt_ws_.size(), s);
  }
  std::string config() const override {
    return gemm_ ? gemm_->config() + (wrong_ ? ", K/2 (test fixture)" : "") + picked_ : "";
  }

 private:
  // cublas_bf16_best: every candidate cuBLASLt's heuristic offers, timed briefly on this case's
  // buffers (3 samples, no settling), the fastest kept: the baseline as a user who tunes cuBLAS
  // would run it, beside kbit's dequant_cublas plans, whose GEMM kbit tune picks the same way.
  void pick_fastest_candidate(const CaseInputs& in, int sets) {
    const int count = gemm_->candidates();
    double best_us = 1e300;
    std::unique_ptr<LtGemm> best;
    for (int a = 0; a < count; ++a) {
      auto g = std::make_unique<LtGemm>(in.c.m, in.c.n, in.c.k, dtype_, in.c.residual, false, a);
      TimingOptions t;
      t.calls_per_graph = std::max(sets, 8);
      t.replays = 2, t.repeats = 3, t.warmup_replays = 1, t.settle_ms = 0;
      double us = 1e300;
      try {
        us = time_graph([&](cudaStream_t s, int call) {
               const size_t i = size_t(call % sets);
               g->run(x_[i].data(), w_[i].data(), r_or_null(int(i)), nullptr, y_[i].data(), lt_ws_.data(), lt_ws_.size(), s);
             }, t).median_us;
      } catch (const std::exception&) {  // a candidate that fails to run is not a candidate
        cudaGetLastError();
      }
      if (us < best_us) best_us = us, best = std::move(g);
    }
    KBIT_REQUIRE(best, "cublas_bf16_best: no cuBLASLt candidate ran");
    gemm_ = std::move(best);
    picked_ = detail::concat(", fastest of ", count, " candidates");
  }

  DType dtype_;
  bool wrong_;
  bool best_ = false;
  std::string picked_;
  std::vector<Buffer> w_;
  Buffer lt_ws_;
  std::unique_ptr<LtGemm> gemm_;
};

// kbit::skinny_gemm on the bf16 weights (unquantized layers; issue 6); with `pdl` every
// call launches with programmatic dependent launch (as kbit_linear_pdl).
class SkinnyBackend : public Backend {
 public:
  explicit SkinnyBackend(bool pdl = false) : pdl_(pdl) {}
  std::string name() const override { return pdl_ ? "kbit_skinny_pdl" : "kbit_skinny"; }
  void prepare(const CaseInputs& in, int sets) override {
    KBIT_REQUIRE(in.c.m <= kMaxSkinnyM, "kbit_skinny covers M <= ", kMaxSkinnyM);
    prepare_activations(in, sets);
    w_.clear();
    w_.push_back(upload(in.w->data(), in.w->size() * 2));
    for (int i = 1; i < sets; ++i) w_.push_back(copy_of(w_[0]));
    m_ = in.c.m, n_ = in.c.n, k_ = in.c.k, residual_ = in.c.residual;
    SkinnyOptions o;
    o.pdl = pdl_;  // the plan a PDL launch takes (the table's PDL entries first)
    plan_ = plan_skinny(m_, n_, k_, o);
  }
  void launch(cudaStream_t s, int set) override {
    SkinnyOptions o;
    o.pdl = pdl_;
    if (residual_) o.residual = TensorView{r_[size_t(set)].data(), DType::bf16, m_, n_};
    skinny_gemm(TensorView{x_[size_t(set)].data(), DType::bf16, m_, k_}, TensorView{w_[size_t(set)].data(), DType::bf16, n_, k_},
                MutableTensorView{y_[size_t(set)].data(), DType::bf16, m_, n_}, s, o);
  }
  std::string config() const override { return std::string("skinny ") + plan_.describe() + " (" + plan_.source + ")"; }

 private:
  bool pdl_ = false;
  std::vector<Buffer> w_;
  SkinnyPlan plan_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  bool residual_ = false;
};

// kbit::linear on the mma16 layout: the automatic plan, or one path forced; with `pdl`
// every call launches with programmatic dependent launch, as in a decode step's chain of
// PDL launches (each call's weight loads and table build overlap the previous call's tail).
class KbitLinearBackend : public Backend {
 public:
  explicit KbitLinearBackend(LinearPath path, bool pdl = false, LinearItems items = LinearItems::automatic,
                             bool tuned = true)
      : path_(path), pdl_(pdl), items_(items), tuned_(tuned) {}
  std::string name() const override {
    if (!tuned_) return "kbit_linear_untuned";
    if (items_ == LinearItems::wgmma) return "kbit_wgmma";
    if (items_ == LinearItems::wgmma_tile) return "kbit_wgmma_tile";
    if (items_ == LinearItems::wgmma_stream) return "kbit_wgmma_stream";
    return path_ == LinearPath::automatic ? (pdl_ ? "kbit_linear_pdl" : "kbit_linear")
                                          : "kbit_" + std::string(linear_path_name(path_));
  }
  bool is_kbit() const override { return true; }
  double weight_bytes(const CaseInputs& in) const override { return double(in.q->storage_bytes()); }
  void prepare(const CaseInputs& in, int sets) override {
    prepare_activations(in, sets);
    q_.clear();
    for (int i = 0; i < sets; ++i) q_.push_back(cuda::repack(*in.q, Layout::mma16, nullptr));
    if (!ws_ || ws_->limits().max_m < in.c.m || ws_->limits().max_n < in.c.n || ws_->limits().max_k < in.c.k) {
      ws_.reset();
      ws_ = std::make_unique<LinearWorkspace>(LinearWorkspace::Limits{in.c.m, in.c.n, in.c.k, true});
    }
    opts_ = LinearOptions{};
    opts_.path = path_;
    opts_.pdl = pdl_;
    opts_.items = items_;
    opts_.tuned = tuned_;
    m_ = in.c.m, n_ = in.c.n, k_ = in.c.k, residual_ = in.c.residual;
    plan_ = plan_linear(m_, n_, k_, in.c.bits, opts_);
  }
  void launch(cudaStream_t s, int set) override {
    LinearOptions o = opts_;
    if (residual_) o.residual = TensorView{r_[size_t(set)].data(), DType::bf16, m_, n_};
    linear(TensorView{x_[size_t(set)].data(), DType::bf16, m_, k_}, q_[size_t(set)],
           MutableTensorView{y_[size_t(set)].data(), DType::bf16, m_, n_}, *ws_, s, o);
  }
  std::string config() const override { return plan_.describe(); }

 private:
  LinearPath path_;
  bool pdl_ = false;
  LinearItems items_ = LinearItems::automatic;
  bool tuned_ = true;
  std::vector<QuantizedMatrix> q_;
  std::unique_ptr<LinearWorkspace> ws_;
  LinearOptions opts_;
  LinearPlan plan_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  bool residual_ = false;
};

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "kbit_linear") return std::make_unique<KbitLinearBackend>(LinearPath::automatic);
  if (name == "kbit_linear_pdl") return std::make_unique<KbitLinearBackend>(LinearPath::automatic, true);
  if (name == "kbit_linear_untuned")
    return std::make_unique<KbitLinearBackend>(LinearPath::automatic, false, LinearItems::automatic, false);
  if (name == "kbit_skinny") return std::make_unique<SkinnyBackend>();
  if (name == "kbit_skinny_pdl") return std::make_unique<SkinnyBackend>(true);
  if (name == "kbit_fused_mma") return std::make_unique<KbitLinearBackend>(LinearPath::fused_mma);
  if (name == "kbit_wgmma")
    return std::make_unique<KbitLinearBackend>(LinearPath::fused_mma, false, LinearItems::wgmma);
  if (name == "kbit_wgmma_tile")
    return std::make_unique<KbitLinearBackend>(LinearPath::fused_mma, false, LinearItems::wgmma_tile);
  if (name == "kbit_wgmma_stream")
    return std::make_unique<KbitLinearBackend>(LinearPath::fused_mma, false, LinearItems::wgmma_stream);
  if (name == "kbit_gemv") return std::make_unique<KbitLinearBackend>(LinearPath::gemv);
  if (name == "cublas_bf16") return std::make_unique<CublasBackend>(DType::bf16);
  if (name == "cublas_fp16") return std::make_unique<CublasBackend>(DType::f16);
  if (name == "cublas_bf16_best") return std::make_unique<CublasBackend>(DType::bf16, false, true);
  if (name == "kbit_dequant_cublas") return std::make_unique<KbitLinearBackend>(LinearPath::dequant_cublas);
  if (name == "fixture_wrong") return std::make_unique<CublasBackend>(DType::bf16, true);
  std::string known;
  for (const auto& n : backend_names()) known += " " + n;
  throw Error("unknown backend '" + name + "' (known:" + known + ")");
}

// fp64 y rows for the sampled rows, from the exact operands.
std::vector<double> reference_rows(const CaseInputs& in, const std::vector<float>& w, const std::vector<int64_t>& rows) {
  const int64_t n = in.c.n, k = in.c.k;
  std::vector<double> ref(rows.size() * size_t(n));
  cpu::detail::parallel_for(n, 64, [&](int64_t n0, int64_t n1) {
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const uint16_t* x = in.x.data() + rows[ri] * k;
      for (int64_t j = n0; j < n1; ++j) {
        const float* wr = w.data() + j * k;
        double acc = 0;
        for (int64_t c = 0; c < k; ++c) acc += double(bf16_bits_to_float(x[c])) * double(wr[c]);
        if (in.c.residual) acc += double(bf16_bits_to_float(in.r[size_t(rows[ri] * n + j)]));
        ref[ri * size_t(n) + size_t(j)] = acc;
      }
    }
  });
  return ref;
}

void validate(Row& row, const Backend& b, const CaseInputs& in, const std::vector<int64_t>& rows,
              const std::vector<double>& ref) {
  const int64_t n = in.c.n;
  std::vector<uint16_t> got(static_cast<size_t>(n));
  double dot = 0, na = 0, nb = 0, max_abs = 0, max_scaled = 0;
  bool finite = true;
  for (size_t ri = 0; ri < rows.size(); ++ri) {
    check_cuda(cudaMemcpy(got.data(), static_cast<const uint16_t*>(b.y(0)) + rows[ri] * n, size_t(n) * 2,
                          cudaMemcpyDeviceToHost), "bench: reading y");
    for (int64_t j = 0; j < n; ++j) {
      const double y = b.dtype() == DType::f16 ? half_bits_to_float(got[size_t(j)]) : bf16_bits_to_float(got[size_t(j)]);
      const double r = ref[ri * size_t(n) + size_t(j)];
      if (!std::isfinite(y)) finite = false;
      dot += y * r, na += y * y, nb += r * r;
      max_abs = std::max(max_abs, std::fabs(y - r));
      max_scaled = std::max(max_scaled, std::fabs(y - r) / (std::fabs(r) + 1));
    }
  }
  row.cosine = (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : 0;
  row.max_abs_error = max_abs;
  row.max_scaled_error = max_scaled;
  row.valid = finite && row.cosine > 0.999;
}

}  // namespace

std::vector<std::string> backend_names() {
  return {"cublas_bf16", "cublas_bf16_best", "cublas_fp16", "kbit_linear", "kbit_linear_pdl", "kbit_linear_untuned", "kbit_gemv", "kbit_fused_mma", "kbit_wgmma",
          "kbit_wgmma_tile", "kbit_wgmma_stream", "kbit_dequant_cublas", "kbit_skinny", "kbit_skinny_pdl", "fixture_wrong"};
}

namespace {

// A MoE projection as its routed grouped GEMM at every M and bit width: one cublas_bf16
// row (cuBLAS grouped bf16) per M and one kbit_linear row (kbit::expert_linear) per
// (M, bits), as projection `<name>@routed` run once per block. Timing rows: the kernels'
// results are checked by the GPU tests (GpuExpertLinear), not here.
void add_routed_moe_rows(const LinearBenchOptions& o, const LinearCase& base, const Projection& p, const RunInfo& info,
                         std::vector<Row>& rows) {
  RoutedMoeBench bench(p, 1);
  LinearCase c = base;
  c.projection = p.name + kRoutedSuffix;
  c.experts = 1;  // the row is the whole routed GEMM: per_block calls per block
  for (int64_t m : o.ms) {
    c.m = m;
    bool baseline_done = false;
    for (int bits : o.bits) {
      Row row;
      row.c = c, row.c.bits = bits, row.backend = "kbit_linear", row.is_kbit = true;
      row.config = "kbit::expert_linear, routed (timing only)";
      try {
        const RoutedMoeTiming t = bench.time(m, bits, o.repeats);
        row.num_buffers = int(t.routings);
        if (!baseline_done) {
          Row b;
          b.c = c, b.c.bits = 0, b.backend = "cublas_bf16", b.config = "cublasGemmGroupedBatchedEx, routed (timing only)";
          b.num_buffers = int(t.routings), b.t = t.cublas, b.valid = true;
          b.bytes = t.touched * double(p.N) * double(p.K) * 2;
          b.roofline_us = std::max(b.bytes / (info.read_tbps * 1e6), info.launch_floor_us);
          rows.push_back(b);
          baseline_done = true;
        }
        row.t = t.kbit, row.valid = true;
        row.bytes = t.kbit_tbps * t.kbit.median_us * 1e6;
        row.roofline_us = std::max(row.bytes / (info.read_tbps * 1e6), info.launch_floor_us);
      } catch (const std::exception& e) {
        row.error = e.what();
      }
      std::fprintf(stderr, "%-28s m=%-5lld k=%d %-20s %10.2f us %s\n", row.c.shape().c_str(), (long long)m, bits,
                   row.backend.c_str(), row.error.empty() ? row.t.median_us : 0.0, row.error.c_str());
      rows.push_back(std::move(row));
    }
  }
}

}  // namespace

std::vector<Row> run_linear_bench(const LinearBenchOptions& o, RunInfo& info) {
  std::vector<std::string> backend_list = o.backends;
  if (backend_list.empty()) backend_list = {"cublas_bf16", "cublas_fp16", "kbit_linear"};
  std::vector<std::unique_ptr<Backend>> backends;
  for (const auto& n : backend_list) backends.push_back(make_backend(n));
  for (int k : o.bits) require_supported_bits(k);
  for (int64_t m : o.ms) KBIT_REQUIRE(m >= 1 && m <= 65536, "--m values must be 1..65536, got ", m);
  const std::vector<ModelShapes> models = select_model_shapes(o.shape_set.empty() ? model_shapes() : o.shape_set, o.models);
  KBIT_REQUIRE(cuda::device_available(), "kbit bench needs a CUDA GPU: ", cuda::device_description());

  info.device = device_info();
  info.read_tbps = measure_read_tbps();
  info.launch_floor_us = measure_launch_floor_us();
  info.commit = kbit::detail::kGitCommit;
  if (const char* tables = std::getenv(detail::kLinearConfigsEnv)) info.user_tables = tables;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  info.date = date;


  std::vector<Row> rows;
  uint32_t seed = 1;
  const auto has_backend = [&](const char* name) {
    return std::any_of(backends.begin(), backends.end(), [&](auto& b) { return b->name() == name; });
  };
  const bool routed_moe = o.routed_moe && has_backend("cublas_bf16") && has_backend("kbit_linear");
  for (const auto& model : models)
    for (const auto& p : model.projections) {
      LinearCase base;
      base.model = model.key, base.projection = p.name, base.n = p.N, base.k = p.K;
      base.experts = p.experts, base.active = p.active, base.per_block = p.per_block, base.residual = p.residual;
      const std::vector<uint16_t> w = random_bf16(size_t(p.N * p.K), seed++, 0.05f);
      std::vector<float> w_exact(w.size());
      for (size_t i = 0; i < w.size(); ++i) w_exact[i] = bf16_bits_to_float(w[i]);
      // quantized weights (GPU quantize, checked bit-exact against the CPU by the tests) and their exact values
      std::map<int, QuantizedMatrix> quantized;
      std::map<int, std::vector<float>> dequantized;
      const bool any_kbit = std::any_of(backends.begin(), backends.end(), [](auto& b) { return b->is_kbit(); });
      if (any_kbit) {
        Buffer wd = upload(w.data(), w.size() * 2);
        Buffer tmp = Buffer::allocate(Memory::device, w.size() * 4);
        for (int k : o.bits) {
          quantized[k] = cuda::quantize(TensorView{wd.data(), DType::bf16, p.N, p.K}, Codebook::bnf(k), nullptr);
          cuda::dequantize(quantized[k], MutableTensorView{tmp.data(), DType::f32, p.N, p.K}, nullptr);
          dequantized[k].resize(w.size());
          check_cuda(cudaMemcpy(dequantized[k].data(), tmp.data(), w.size() * 4, cudaMemcpyDeviceToHost), "bench");
        }
      }
      for (int64_t m : o.ms) {
        CaseInputs in;
        in.c = base;
        in.c.m = m;
        in.w = &w;
        in.x = random_bf16(size_t(m * p.K), seed++, 1.0f);
        if (p.residual) in.r = random_bf16(size_t(m * p.N), seed++, 1.0f);
        std::vector<int64_t> sample;
        if (m <= 4) {
          for (int64_t i = 0; i < m; ++i) sample.push_back(i);
        } else {
          sample = {0, 1, m / 2, m - 1};
        }
        std::map<int, std::vector<double>> refs;  // 0: bf16 weights; k: kbit weights
        for (auto& b : backends) {
          const std::vector<int> bit_list = b->is_kbit() ? o.bits : std::vector<int>{0};
          for (int bits : bit_list) {
            Row row;
            row.c = in.c;
            row.c.bits = bits;
            row.backend = b->name();
            row.is_kbit = b->is_kbit();
            in.c.bits = bits;
            in.q = bits ? &quantized[bits] : nullptr;
            try {
              if (!refs.count(bits)) refs[bits] = reference_rows(in, bits ? dequantized[bits] : w_exact, sample);
              const double act = double(m * p.K + m * p.N * (p.residual ? 2 : 1)) * 2;
              row.bytes = b->weight_bytes(in) + act;
              row.num_buffers = linear_rotation_sets(size_t(row.bytes));
              b->prepare(in, row.num_buffers);
              row.config = b->config();
              TimingOptions t;
              t.calls_per_graph = std::max(row.num_buffers, 8);
              const double flops = 2.0 * double(m) * double(p.N) * double(p.K);
              const double est_us = std::max({row.bytes / 3.5e6, flops / 5e8, 3.0});
              t.replays = int(std::clamp(2000.0 / (t.calls_per_graph * est_us), 1.0, 100.0));
              t.repeats = o.repeats;
              const int sets = row.num_buffers;
              row.t = time_graph([&](cudaStream_t s, int call) { b->launch(s, call % sets); }, t);
              row.roofline_us = std::max(row.bytes / (info.read_tbps * 1e6), info.launch_floor_us);
              validate(row, *b, in, sample, refs[bits]);
            } catch (const std::exception& e) {
              row.error = e.what();
            }
            std::fprintf(stderr, "%-28s m=%-5lld k=%d %-20s %10.2f us %s\n", row.c.shape().c_str(), (long long)m, bits,
                         row.backend.c_str(), row.error.empty() ? row.t.median_us : 0.0,
                         row.error.empty() ? (row.valid ? "" : "INVALID") : row.error.c_str());
            rows.push_back(std::move(row));
          }
        }
      }
      if (routed_moe && p.experts > 1) add_routed_moe_rows(o, base, p, info, rows);
    }
  return rows;
}

}  // namespace kbit::bench
