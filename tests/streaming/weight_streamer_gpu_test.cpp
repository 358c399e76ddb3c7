// WeightStreamer against the resident copy, bit for bit: many more layers than
// slots, uneven sizes and pieces, 2, 3 and 8 slots, pinned and mapped-file
// sources, forward and backward passes, and a slow reader on the compute stream
// (a host callback that sleeps) so that a slot reused too early would be caught.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "kbit/error.h"
#include "kbit/weight_streamer.h"
#include "support/test_support.h"

namespace kbit {
namespace {

void CUDART_CB sleep_a_little(void*) { std::this_thread::sleep_for(std::chrono::microseconds(300)); }

struct Model {
  std::vector<std::vector<std::vector<uint8_t>>> bytes;  // [layer][piece]
  std::vector<WeightStreamer::HostLayer> layers;
};

Model make_model(int n_layers, uint32_t seed) {
  std::mt19937 rng(seed);
  Model m;
  m.bytes.resize(size_t(n_layers));
  for (int l = 0; l < n_layers; ++l) {
    const int pieces = 1 + int(rng() % 4);
    for (int p = 0; p < pieces; ++p) {
      std::vector<uint8_t> b(1 + rng() % 200000);
      for (auto& v : b) v = uint8_t(rng());
      m.bytes[size_t(l)].push_back(std::move(b));
    }
  }
  for (auto& l : m.bytes) {
    WeightStreamer::HostLayer h;
    for (auto& p : l) h.pieces.push_back({p.data(), p.size()});
    m.layers.push_back(h);
  }
  return m;
}

// Runs the layers forward, backward and forward again through ws (prefetching one
// ahead, a slow reader on the stream after every acquire), copies every acquired
// layer back and compares it with the model's bytes.
void stream_and_check(WeightStreamer& ws, const Model& model, const std::string& what) {
  const int n = int(model.bytes.size());
  const auto sizes = WeightStreamer::layer_device_bytes(model.layers);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  std::vector<int> order;
  for (int l = 0; l < n; ++l) order.push_back(l);
  for (int l = n - 1; l >= 0; --l) order.push_back(l);
  for (int l = 0; l < n; ++l) order.push_back(l);
  std::vector<uint8_t*> out(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&out[i]), size_t(sizes[size_t(order[i])])), cudaSuccess);
  for (size_t i = 0; i < order.size(); ++i) {
    const int l = order[i];
    const void* d = ws.acquire(l, s);
    if (i + 1 < order.size() && order[i + 1] != l) ws.prefetch(order[i + 1]);  // one ahead
    ASSERT_EQ(cudaLaunchHostFunc(s, sleep_a_little, nullptr), cudaSuccess);      // a slow reader
    for (size_t p = 0; p < model.bytes[size_t(l)].size(); ++p) {
      const size_t off = ws.piece_offset(l, int(p));
      ASSERT_EQ(cudaMemcpyAsync(out[i] + off, static_cast<const char*>(d) + off, model.bytes[size_t(l)][p].size(),
                                cudaMemcpyDeviceToHost, s),
                cudaSuccess);
    }
    ws.release(l, s);
  }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  for (size_t i = 0; i < order.size(); ++i) {
    const int l = order[i];
    for (size_t p = 0; p < model.bytes[size_t(l)].size(); ++p)
      ASSERT_EQ(0, std::memcmp(out[i] + ws.piece_offset(l, int(p)), model.bytes[size_t(l)][p].data(),
                               model.bytes[size_t(l)][p].size()))
          << what << " step " << i << " layer " << l << " piece " << p;
    cudaFreeHost(out[i]);
  }
  cudaStreamDestroy(s);
}

TEST(GpuWeightStreamer, StreamedLayersEqualTheSourceBitForBit) {
  KBIT_SKIP_WITHOUT_GPU();
  const Model model = make_model(24, 5);
  const auto sizes = WeightStreamer::layer_device_bytes(model.layers);
  int64_t total = 0, largest = 0;
  for (auto s : sizes) total += s, largest = std::max(largest, s);
  for (StreamSource source : {StreamSource::pinned_host, StreamSource::mapped_file})
    for (int slots : {2, 3, 8}) {
      ResidencyRequest req;
      req.layer_bytes = sizes;
      req.slots = slots;
      req.source = source;
      req.host_margin_bytes = 0;
      // room for about a quarter of the model plus the ring
      MemoryFacts f{total / 4 + slots * largest, int64_t(64) << 30, false, 50.0};
      const ResidencyPlan plan = plan_residency(req, f);
      ASSERT_GT(plan.resident_layers, 0);
      ASSERT_LT(plan.resident_layers, 24);
      WeightStreamer ws(model.layers, plan);
      stream_and_check(ws, model, detail::concat(stream_source_name(source), " slots=", slots));
    }
}

TEST(GpuWeightStreamer, ProtocolErrorsAreClear) {
  KBIT_SKIP_WITHOUT_GPU();
  const Model model = make_model(6, 9);
  const auto sizes = WeightStreamer::layer_device_bytes(model.layers);
  int64_t largest = 0;
  for (auto s : sizes) largest = std::max(largest, s);
  ResidencyPlan plan;  // everything streamed through 2 slots
  plan.resident_layers = 0, plan.slots = 2, plan.slot_bytes = largest, plan.source = StreamSource::pinned_host;
  WeightStreamer ws(model.layers, plan);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ws.acquire(0, s);
  ws.acquire(1, s);
  EXPECT_THROW(ws.acquire(2, s), Error);  // slot 0 still held by layer 0
  EXPECT_THROW(ws.release(3, s), Error);  // never acquired
  EXPECT_THROW(ws.prefetch(6), Error);
  ws.release(0, s);
  EXPECT_NO_THROW(ws.acquire(2, s));
  ws.release(1, s);
  ws.release(2, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaStreamDestroy(s);
  ResidencyPlan gds = plan;
  gds.source = StreamSource::gds;
  EXPECT_THROW(WeightStreamer(model.layers, gds), Error);
}

// The gds source (cuFile reads from the file into the slots) where this build and
// machine have it; elsewhere the streamer falls back to the mapped file, which must
// give the same bytes too. Forward, backward, forward through 3 slots, a slow reader.
TEST(GpuWeightStreamer, FileSourcesEqualTheFileBitForBit) {
  KBIT_SKIP_WITHOUT_GPU();
  const Model model = make_model(12, 13);
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/kbit-streamer-gds-test.bin";
  size_t file_bytes = 0;
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(f.good());
    for (const auto& l : model.bytes)
      for (const auto& p : l) f.write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size())), file_bytes += p.size();
  }
  FILE* fp = std::fopen(path.c_str(), "rb");
  ASSERT_NE(fp, nullptr);
  void* base = mmap(nullptr, file_bytes, PROT_READ, MAP_SHARED, fileno(fp), 0);
  std::fclose(fp);
  ASSERT_NE(base, MAP_FAILED);
  std::vector<WeightStreamer::HostLayer> layers;
  size_t off = 0;
  for (const auto& l : model.bytes) {
    WeightStreamer::HostLayer h;
    for (const auto& p : l) h.pieces.push_back({static_cast<const char*>(base) + off, p.size()}), off += p.size();
    layers.push_back(h);
  }
  const auto sizes = WeightStreamer::layer_device_bytes(layers);
  const int64_t largest = *std::max_element(sizes.begin(), sizes.end());
  const WeightStreamer::FileBacking backing{path, base, file_bytes};
  std::string why;
  const bool gds = WeightStreamer::gds_available(&why);
  std::printf("GPUDirect Storage %s%s\n", gds ? "available" : "unavailable: ", gds ? "" : why.c_str());
  for (StreamSource source : {StreamSource::gds, StreamSource::mapped_file}) {
    ResidencyPlan plan;
    plan.resident_layers = 2, plan.slots = 3, plan.slot_bytes = largest, plan.source = source;
    WeightStreamer ws(layers, plan, &backing);
    if (source == StreamSource::mapped_file || !gds) EXPECT_EQ(ws.plan().source, StreamSource::mapped_file);
    if (ws.plan().source != source)  // cuFile may still refuse this file system: a stated fallback
      EXPECT_NE(ws.plan().reason.find("GPUDirect Storage unavailable"), std::string::npos) << ws.plan().reason;
    std::printf("requested %s, streaming from %s\n", stream_source_name(source).data(),
                stream_source_name(ws.plan().source).data());
    stream_and_check(ws, model, std::string(stream_source_name(ws.plan().source)));
  }
  munmap(base, file_bytes);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace kbit
