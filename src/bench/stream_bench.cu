#include "bench/stream_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <span>

#include "bench/inputs.h"
#include "bench/timing.h"
#include "cuda/common.cuh"
#include "kbit/cuda.h"
#include "kbit/error.h"
#include "kbit/linear.h"
#include "kbit/safetensors.h"
#include "kbit/shapes.h"
#include "kbit/weight_streamer.h"

namespace kbit::bench {
namespace {

using cuda::detail::check_cuda;

struct HostProjection {
  std::string name;
  QuantizedMatrix q;  // host, mma16
  DeviceMeta meta{};
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Host-to-device speed of a pinned 512 MiB buffer, GB/s (median of 5).
double measure_link_gbps(cudaStream_t s) {
  const size_t bytes = size_t(512) << 20;
  void* host = nullptr;
  check_cuda(cudaHostAlloc(&host, bytes, cudaHostAllocDefault), "stream-bench: pinned buffer");
  Buffer dev = Buffer::allocate(Memory::device, bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  std::vector<double> gbps;
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(a, s);
    cudaMemcpyAsync(dev.data(), host, bytes, cudaMemcpyHostToDevice, s);
    cudaEventRecord(b, s);
    check_cuda(cudaEventSynchronize(b), "stream-bench: link measurement");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (i) gbps.push_back(double(bytes) / (double(ms) * 1e6));
  }
  cudaEventDestroy(a), cudaEventDestroy(b);
  cudaFreeHost(host);
  return median(gbps);
}

// The synthetic checkpoint: one layer's tensors (words, scales, metadata of every
// projection) written once as a safetensors file and mapped read-only (just written,
// so its pages are in the page cache); every layer names the same tensors, as the
// in-memory layers share their bytes. The memory-mapped and gds sources read it.
class SyntheticCheckpoint {
 public:
  SyntheticCheckpoint(const std::vector<HostProjection>& projections, const std::string& path) : path_(path) {
    {
      io::SafetensorsWriter w(path);
      for (const auto& p : projections) {
        w.declare(p.name + ".words", DType::u32, {p.q.word_count()});
        w.declare(p.name + ".scales", DType::u8, {p.q.scale_count()});
        w.declare(p.name + ".meta", DType::u8, {int64_t(sizeof(DeviceMeta))});
        layer_.insert(layer_.end(), {p.name + ".words", p.name + ".scales", p.name + ".meta"});
      }
      w.begin();
      for (const auto& p : projections) {
        w.write(std::as_bytes(std::span(p.q.words(), size_t(p.q.word_count()))));
        w.write(std::as_bytes(std::span(p.q.scales(), size_t(p.q.scale_count()))));
        w.write(std::as_bytes(std::span(&p.meta, 1)));
      }
      w.finish();
    }
    file_ = std::make_unique<io::SafetensorsFile>(io::SafetensorsFile::open(path));
  }
  ~SyntheticCheckpoint() {
    file_.reset();
    std::remove(path_.c_str());
  }
  SyntheticCheckpoint(const SyntheticCheckpoint&) = delete;
  SyntheticCheckpoint& operator=(const SyntheticCheckpoint&) = delete;
  WeightStreamer::CheckpointLayers layers(int n) const {
    return WeightStreamer::layers_from_checkpoint(*file_, std::vector<std::vector<std::string>>(size_t(n), layer_));
  }

 private:
  std::string path_;
  std::vector<std::string> layer_;
  std::unique_ptr<io::SafetensorsFile> file_;
};

}  // namespace

void run_stream_bench(const StreamBenchOptions& o) {
  KBIT_REQUIRE(cuda::device_available(), "kbit stream-bench needs a CUDA GPU: ", cuda::device_description());
  KBIT_REQUIRE(o.layers >= 2 && o.passes >= 2 && o.slots >= 2, "stream-bench: --layers, --passes and --slots must be >= 2");
  const ModelShapes& shapes = model_shapes(o.model);
  std::vector<HostProjection> projections;
  int64_t max_n = 0, max_k = 0;
  for (const auto& p : shapes.projections) {
    if (p.experts > 1) continue;  // grouped expert layers need expert_linear (issue 5)
    Buffer wd = upload(random_bf16(size_t(p.N * p.K), 31, 0.05f));
    const QuantizedMatrix flat = cuda::quantize(TensorView{wd.data(), DType::bf16, p.N, p.K}, Codebook::bnf(4), nullptr);
    HostProjection hp{p.name, cuda::to_host(cuda::repack(flat, Layout::mma16, nullptr)), {}};
    hp.meta.tensor_scale = hp.q.tensor_scale();
    for (int i = 0; i < hp.q.codebook().levels(); ++i) hp.meta.codebook[i] = hp.q.codebook()[i];
    projections.push_back(std::move(hp));
    max_n = std::max(max_n, p.N), max_k = std::max(max_k, p.K);
  }
  KBIT_REQUIRE(!projections.empty(), "stream-bench: model ", o.model, " has no dense projections");
  // every layer: words, scales and metadata of each projection (same bytes in every layer)
  std::vector<WeightStreamer::HostLayer> layers(size_t(o.layers));
  for (auto& l : layers)
    for (const auto& p : projections) {
      l.pieces.push_back({p.q.words(), size_t(p.q.word_count()) * 4});
      l.pieces.push_back({p.q.scales(), size_t(p.q.scale_count())});
      l.pieces.push_back({&p.meta, sizeof(DeviceMeta)});
    }
  // The same layers from the synthetic checkpoint file (memory-mapped and gds sources).
  const char* tmp = std::getenv("TMPDIR");
  const SyntheticCheckpoint checkpoint(projections, std::string(tmp ? tmp : "/tmp") + "/kbit-stream-bench.safetensors");
  const WeightStreamer::CheckpointLayers from_file_layers = checkpoint.layers(o.layers);
  const std::vector<WeightStreamer::HostLayer>& mapped_layers = from_file_layers.layers;
  const auto layer_bytes = WeightStreamer::layer_device_bytes(layers);
  const int64_t max_layer = *std::max_element(layer_bytes.begin(), layer_bytes.end());
  cudaStream_t s;
  check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream-bench: stream");
  const double link = measure_link_gbps(s);
  const DeviceInfo dev = device_info();
  std::printf("device: %s; model %s, %d layers of %.1f MB at k = 4 (%zu dense projections each); pinned "
              "host-to-device link %.1f GB/s\n\n",
              dev.name.c_str(), o.model.c_str(), o.layers, double(max_layer) / 1e6, projections.size(), link);

  // Runs: resident (the reference), all streamed and half streamed from pinned memory,
  // all streamed from the memory-mapped file.
  struct Run {
    int resident_pct;
    StreamSource source;
  };
  std::string no_gds;
  const bool gds = WeightStreamer::gds_available(&no_gds);
  const Run runs[] = {{100, StreamSource::pinned_host}, {0, StreamSource::pinned_host}, {50, StreamSource::pinned_host},
                      {0, StreamSource::mapped_file}, {0, StreamSource::gds}};
  const int n_runs = gds ? 5 : 4;
  if (gds)
    std::printf("GPUDirect Storage: cuFile available (file in the page cache; without the nvidia-fs driver cuFile "
                "reads through its POSIX path)\n\n");
  else
    std::printf("GPUDirect Storage: not measured (%s)\n\n", no_gds.c_str());
  const WeightStreamer::FileBacking& backing = from_file_layers.backing;
  std::string gds_fallback;
  std::printf("%7s %12s %13s %13s %10s %9s %8s %13s %9s %8s", "tokens", "resident us", "pinned 0% us",
              "pinned 50% us", "overhead", "H2D GB/s", "vs link", "mmap 0% us", "H2D GB/s", "vs link");
  if (gds) std::printf(" %13s %9s %8s", "gds 0% us", "GB/s", "vs link");
  std::printf("\n");
  int64_t free_from = -1;
  for (int64_t t : o.tokens) {
    Buffer x = Buffer::allocate(Memory::device, size_t(t * max_k) * 2), y = Buffer::allocate(Memory::device, size_t(t * max_n) * 2);
    check_cuda(cudaMemset(x.data(), 0x3c, x.size()), "stream-bench: x");
    LinearWorkspace lw({t, max_n, max_k, true});
    double pass_us[5] = {0, 0, 0, 0, 0};
    for (int fi = 0; fi < n_runs; ++fi) {
      ResidencyPlan plan;
      plan.resident_layers = o.layers * runs[fi].resident_pct / 100;
      plan.slots = plan.resident_layers < o.layers ? o.slots : 0;
      plan.slot_bytes = max_layer;
      plan.source = runs[fi].source;
      const bool from_file = runs[fi].source == StreamSource::mapped_file || runs[fi].source == StreamSource::gds;
      WeightStreamer ws(from_file ? mapped_layers : layers, plan, from_file ? &backing : nullptr);
      if (runs[fi].source == StreamSource::gds && ws.plan().source != StreamSource::gds) {
        gds_fallback = ws.plan().reason;  // cuFile refused the file: the column would time the mapped file
        pass_us[fi] = 0;
        continue;
      }
      cudaEvent_t a, b;
      cudaEventCreate(&a), cudaEventCreate(&b);
      std::vector<double> times;
      for (int pass = 0; pass < o.passes; ++pass) {
        check_cuda(cudaEventRecord(a, s), "stream-bench: event");
        for (int l = 0; l < o.layers; ++l) {
          char* base = static_cast<char*>(const_cast<void*>(ws.acquire(l, s)));
          ws.prefetch((l + 1) % o.layers);
          for (size_t p = 0; p < projections.size(); ++p) {
            const auto& hp = projections[p];
            const QuantizedMatrix view = QuantizedMatrix::borrow_device(
                hp.q.rows(), hp.q.cols(), hp.q.codebook(), Layout::mma16, base + ws.piece_offset(l, int(3 * p)),
                base + ws.piece_offset(l, int(3 * p + 1)),
                reinterpret_cast<DeviceMeta*>(base + ws.piece_offset(l, int(3 * p + 2))));
            linear(TensorView{x.data(), DType::bf16, t, hp.q.cols()}, view,
                   MutableTensorView{y.data(), DType::bf16, t, hp.q.rows()}, lw, s);
          }
          ws.release(l, s);
        }
        check_cuda(cudaEventRecord(b, s), "stream-bench: event");
        check_cuda(cudaEventSynchronize(b), "stream-bench: pass");
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        if (pass) times.push_back(double(ms) * 1e3);
      }
      cudaEventDestroy(a), cudaEventDestroy(b);
      pass_us[fi] = median(times);
    }
    const double streamed_bytes = double(max_layer) * o.layers;
    const double overhead = pass_us[1] / pass_us[0] - 1;
    const double h2d = streamed_bytes / (pass_us[1] * 1e3), h2d_mapped = streamed_bytes / (pass_us[3] * 1e3);
    std::printf("%7lld %12.1f %13.1f %13.1f %9.1f%% %9.1f %7.0f%% %13.1f %9.1f %7.0f%%", (long long)t, pass_us[0],
                pass_us[1], pass_us[2], 100 * overhead, h2d, 100 * h2d / link, pass_us[3], h2d_mapped,
                100 * h2d_mapped / link);
    if (gds && pass_us[4] > 0) {
      const double h2d_gds = streamed_bytes / (pass_us[4] * 1e3);
      std::printf(" %13.1f %9.1f %7.0f%%", pass_us[4], h2d_gds, 100 * h2d_gds / link);
    } else if (gds) {
      std::printf(" %13s %9s %8s", "-", "-", "-");
    }
    std::printf("\n");
    if (free_from < 0 && overhead < 0.05) free_from = t;
  }
  if (!gds_fallback.empty()) std::printf("\ngds column not measured: %s\n", gds_fallback.c_str());
  if (free_from >= 0)
    std::printf("\nstreaming every layer costs < 5%% from %lld tokens per step\n", (long long)free_from);
  else
    std::printf("\nstreaming every layer costs >= 5%% at every token count measured\n");
  cudaStreamDestroy(s);
}

}  // namespace kbit::bench
