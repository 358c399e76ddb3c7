#include "kbit/weight_streamer.h"

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "kbit/error.h"
#include "streaming/gds_file.h"
#include "streaming/parallel_copy.h"

namespace kbit {
namespace {

constexpr size_t kAlign = 256;
size_t round_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void check(cudaError_t e, std::string_view what) {
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw Error(detail::concat("WeightStreamer: ", what, ": ", cudaGetErrorString(e)));
  }
}

}  // namespace

struct WeightStreamer::Slot {
  void* device = nullptr;
  void* staging = nullptr;  // mapped-file source: pinned staging buffer
  cudaEvent_t ready = nullptr, free = nullptr, uploaded = nullptr;
  int occupant = -1;   // layer whose copy was requested last (caller's thread)
  bool held = false;   // acquired and not yet released (caller's thread)
  bool staging_busy = false;  // an upload from the staging buffer was issued (stager thread)
  int issued = -1;     // layer whose copy and ready event are issued (guarded by Impl::mutex)
};

struct WeightStreamer::Impl {
  cudaStream_t copy = nullptr;
  std::vector<void*> resident;  // device buffers of the resident layers
  std::vector<Slot> slots;
  void* pinned = nullptr;       // pinned source: every streamed layer, device layout
  std::vector<size_t> pinned_offset;
  // Mapped-file source: a stager thread copies each requested layer into its slot's
  // staging buffer (with the copy pool) and uploads the finished parts as it goes, so
  // prefetch() returns at once and the host copy overlaps the caller's launches.
  std::unique_ptr<detail::ParallelCopy> pool;
  std::unique_ptr<detail::GdsFile> gds;
  std::thread stager;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<int> requests;
  bool stop = false;
  std::exception_ptr failure;

  // Frees whatever was created, also when the constructor stopped half-way (the
  // stager, started last, is joined by ~WeightStreamer before this runs).
  ~Impl() {
    if (copy) cudaStreamSynchronize(copy);
    gds.reset();  // deregisters the slots from cuFile while they still exist
    for (auto& s : slots) {
      if (s.device) cudaFree(s.device);
      if (s.staging) cudaFreeHost(s.staging);
      if (s.ready) cudaEventDestroy(s.ready);
      if (s.free) cudaEventDestroy(s.free);
      if (s.uploaded) cudaEventDestroy(s.uploaded);
    }
    for (void* d : resident) cudaFree(d);
    if (pinned) cudaFreeHost(pinned);
    if (copy) cudaStreamDestroy(copy);
  }
};

std::vector<int64_t> WeightStreamer::layer_device_bytes(const std::vector<HostLayer>& layers) {
  std::vector<int64_t> out;
  for (const auto& l : layers) {
    size_t b = 0;
    for (const auto& [p, n] : l.pieces) b += round_up(n);
    out.push_back(int64_t(b));
  }
  return out;
}

bool WeightStreamer::gds_available(std::string* why) { return detail::GdsFile::probe(why); }

WeightStreamer::CheckpointLayers WeightStreamer::layers_from_checkpoint(
    const io::SafetensorsFile& file, const std::vector<std::vector<std::string>>& layer_tensors) {
  KBIT_REQUIRE(!layer_tensors.empty(), "WeightStreamer: no layers given for ", file.path());
  CheckpointLayers out;
  out.backing = {file.path(), file.mapping(), size_t(file.file_size())};
  for (size_t l = 0; l < layer_tensors.size(); ++l) {
    KBIT_REQUIRE(!layer_tensors[l].empty(), "WeightStreamer: layer ", l, " names no tensors");
    HostLayer h;
    for (const auto& name : layer_tensors[l]) {
      const io::TensorInfo* t = file.find(name);
      KBIT_REQUIRE(t != nullptr, "WeightStreamer: layer ", l, " needs tensor '", name, "', which ", file.path(),
                   " does not have");
      const auto bytes = file.bytes(*t);
      h.pieces.push_back({bytes.data(), bytes.size()});
    }
    out.layers.push_back(std::move(h));
  }
  return out;
}

WeightStreamer::WeightStreamer(std::vector<HostLayer> layers, const ResidencyPlan& plan, const FileBacking* file)
    : layers_(std::move(layers)), plan_(plan), impl_(std::make_unique<Impl>()) {
  if (file) file_ = *file;
  const int n = int(layers_.size());
  KBIT_REQUIRE(n > 0, "WeightStreamer: no layers");
  KBIT_REQUIRE(plan_.resident_layers >= 0 && plan_.resident_layers <= n, "WeightStreamer: the plan keeps ",
               plan_.resident_layers, " layers resident but there are ", n);
  const auto bytes = layer_device_bytes(layers_);
  offsets_.resize(size_t(n));
  for (int l = 0; l < n; ++l) {
    KBIT_REQUIRE(bytes[size_t(l)] > 0, "WeightStreamer: layer ", l, " is empty");
    size_t off = 0;
    for (const auto& [p, sz] : layers_[size_t(l)].pieces) {
      KBIT_REQUIRE(p != nullptr || sz == 0, "WeightStreamer: layer ", l, " has a null piece");
      offsets_[size_t(l)].push_back(off);
      off += round_up(sz);
    }
    if (l >= plan_.resident_layers)
      KBIT_REQUIRE(bytes[size_t(l)] <= plan_.slot_bytes, "WeightStreamer: layer ", l, " (", bytes[size_t(l)],
                   " bytes) does not fit a slot of ", plan_.slot_bytes, " bytes; plan with layer_device_bytes()");
  }
  const bool streams = plan_.resident_layers < n;
  if (streams) {
    KBIT_REQUIRE(plan_.slots >= 2, "WeightStreamer: the plan streams layers but has ", plan_.slots, " slots");
    KBIT_REQUIRE(plan_.source == StreamSource::pinned_host || plan_.source == StreamSource::mapped_file ||
                     plan_.source == StreamSource::gds,
                 "WeightStreamer: the plan has no source (", stream_source_name(plan_.source), ")");
    if (plan_.source == StreamSource::gds) {
      KBIT_REQUIRE(file != nullptr && file->base != nullptr, "WeightStreamer: the gds source needs the file the pieces ",
                   "were mapped from (FileBacking)");
      const auto* lo = static_cast<const char*>(file->base);
      for (int l = plan_.resident_layers; l < n; ++l)
        for (const auto& [p, sz] : layers_[size_t(l)].pieces)
          KBIT_REQUIRE(static_cast<const char*>(p) >= lo && static_cast<const char*>(p) + sz <= lo + file->bytes,
                       "WeightStreamer: a piece of layer ", l, " lies outside the mapping of ", file->path);
      // Run-time detection: the driver, then this file (cuFile may refuse its file system).
      std::string why;
      if (gds_available(&why)) {
        try {
          impl_->gds = std::make_unique<detail::GdsFile>(file->path);
        } catch (const Error& e) {
          why = e.what();
        }
      }
      if (!impl_->gds) {
        std::fprintf(stderr, "kbit: GPUDirect Storage is unavailable (%s); streaming from the memory-mapped file instead\n",
                     why.c_str());
        plan_.source = StreamSource::mapped_file;
        plan_.reason += "; GPUDirect Storage unavailable (" + why + "), memory-mapped file instead";
      }
    }
  }
  auto& im = *impl_;
  check(cudaStreamCreateWithFlags(&im.copy, cudaStreamNonBlocking), "creating the copy stream");
  // resident layers: copied now (synchronously; construction is load time)
  for (int l = 0; l < plan_.resident_layers; ++l) {
    void* d = nullptr;
    check(cudaMalloc(&d, size_t(bytes[size_t(l)])), "allocating a resident layer");
    im.resident.push_back(d);
    for (size_t i = 0; i < layers_[size_t(l)].pieces.size(); ++i) {
      const auto& [p, sz] = layers_[size_t(l)].pieces[i];
      check(cudaMemcpyAsync(static_cast<char*>(d) + offsets_[size_t(l)][i], p, sz, cudaMemcpyHostToDevice, im.copy),
            "copying a resident layer");
    }
  }
  if (streams) {
    if (plan_.source == StreamSource::pinned_host) {
      size_t total = 0;
      for (int l = plan_.resident_layers; l < n; ++l) im.pinned_offset.push_back(total), total += size_t(bytes[size_t(l)]);
      check(cudaHostAlloc(&im.pinned, total, cudaHostAllocDefault), "pinning the streamed layers");
      for (int l = plan_.resident_layers; l < n; ++l) {
        char* base = static_cast<char*>(im.pinned) + im.pinned_offset[size_t(l - plan_.resident_layers)];
        for (size_t i = 0; i < layers_[size_t(l)].pieces.size(); ++i) {
          const auto& [p, sz] = layers_[size_t(l)].pieces[i];
          std::memcpy(base + offsets_[size_t(l)][i], p, sz);
        }
      }
    }
    im.slots.resize(size_t(plan_.slots));
    for (auto& s : im.slots) {
      check(cudaMalloc(&s.device, size_t(plan_.slot_bytes)), "allocating a ring slot");
      if (plan_.source == StreamSource::mapped_file)
        check(cudaHostAlloc(&s.staging, size_t(plan_.slot_bytes), cudaHostAllocDefault), "pinning a staging buffer");
      check(cudaEventCreateWithFlags(&s.ready, cudaEventDisableTiming), "creating an event");
      check(cudaEventCreateWithFlags(&s.free, cudaEventDisableTiming), "creating an event");
      check(cudaEventCreateWithFlags(&s.uploaded, cudaEventDisableTiming), "creating an event");
    }
  }
  check(cudaStreamSynchronize(im.copy), "loading the resident layers");
  if (im.gds)
    for (auto& s : im.slots) im.gds->register_buffer(s.device, size_t(plan_.slot_bytes));
  if (streams && plan_.source == StreamSource::mapped_file)
    im.pool = std::make_unique<detail::ParallelCopy>(detail::ParallelCopy::default_workers());
  if (streams && plan_.source != StreamSource::pinned_host) im.stager = std::thread([this] { stage_loop(); });
}

void WeightStreamer::stage_loop() {
  auto& im = *impl_;
  for (;;) {
    int layer;
    {
      std::unique_lock lock(im.mutex);
      im.changed.wait(lock, [&] { return im.stop || !im.requests.empty(); });
      if (im.stop) return;
      layer = im.requests.front();
      im.requests.pop_front();
    }
    try {
      stage(layer);
      // the copy and its ready event are issued: acquire() may make a stream wait on it
      std::lock_guard lock(im.mutex);
      im.slots[size_t((layer - plan_.resident_layers) % plan_.slots)].issued = layer;
      im.changed.notify_all();
    } catch (...) {
      std::lock_guard lock(im.mutex);
      im.failure = std::current_exception();
      im.stop = true;
      im.changed.notify_all();
      return;
    }
  }
}

// Stager thread: host copy into the staging buffer, uploads of each finished prefix
// (mapped file); or reads from the file into the slot (gds).
void WeightStreamer::stage(int layer) {
  auto& im = *impl_;
  Slot& s = im.slots[size_t((layer - plan_.resident_layers) % plan_.slots)];
  if (im.gds) {
    // cuFileRead is not stream-ordered: the slot's last reader must be done before it starts
    check(cudaEventSynchronize(s.free), "waiting for a slot");
    const auto& pieces = layers_[size_t(layer)].pieces;
    for (size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i].second)
        im.gds->read(s.device, pieces[i].second,
                     static_cast<const char*>(pieces[i].first) - static_cast<const char*>(file_.base),
                     int64_t(offsets_[size_t(layer)][i]));
    check(cudaEventRecord(s.ready, im.copy), "recording a copy");  // the data is already there
    return;
  }
  // the host may not overwrite the staging buffer before its previous upload is done
  if (s.staging_busy) check(cudaEventSynchronize(s.uploaded), "waiting for a staging buffer");
  // nor the copy overwrite the slot before the last reader of its previous layer is done
  check(cudaStreamWaitEvent(im.copy, s.free, 0), "waiting for a slot");
  const auto& pieces = layers_[size_t(layer)].pieces;
  std::vector<detail::CopyRange> ranges;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].second)
      ranges.push_back({static_cast<char*>(s.staging) + offsets_[size_t(layer)][i], pieces[i].first, pieces[i].second});
  size_t uploaded = 0;
  im.pool->copy(ranges, [&](size_t complete) {
    check(cudaMemcpyAsync(static_cast<char*>(s.device) + uploaded, static_cast<char*>(s.staging) + uploaded,
                          complete - uploaded, cudaMemcpyHostToDevice, im.copy),
          "copying a layer");
    uploaded = complete;
  });
  check(cudaEventRecord(s.uploaded, im.copy), "recording an upload");
  s.staging_busy = true;
  check(cudaEventRecord(s.ready, im.copy), "recording a copy");
}

WeightStreamer::~WeightStreamer() {
  auto& im = *impl_;
  if (im.stager.joinable()) {
    {
      std::lock_guard lock(im.mutex);
      im.stop = true;
    }
    im.changed.notify_all();
    im.stager.join();
  }
  // impl_'s destructor frees the GPU and pinned memory
}

size_t WeightStreamer::piece_offset(int layer, int piece) const {
  KBIT_REQUIRE(layer >= 0 && layer < layers(), "WeightStreamer: layer ", layer, " is out of range 0..", layers() - 1);
  KBIT_REQUIRE(piece >= 0 && size_t(piece) < offsets_[size_t(layer)].size(), "WeightStreamer: layer ", layer,
               " has no piece ", piece);
  return offsets_[size_t(layer)][size_t(piece)];
}

void WeightStreamer::prefetch(int layer) {
  KBIT_REQUIRE(layer >= 0 && layer < layers(), "WeightStreamer: layer ", layer, " is out of range 0..", layers() - 1);
  if (resident(layer)) return;
  auto& im = *impl_;
  const int streamed = layer - plan_.resident_layers;
  Slot& s = im.slots[size_t(streamed % plan_.slots)];
  if (s.occupant == layer) return;  // already issued
  KBIT_REQUIRE(!s.held, "WeightStreamer: layer ", layer, " needs slot ", streamed % plan_.slots, " but layer ",
               s.occupant, " still holds it (release it first, or plan more slots)");
  if (plan_.source == StreamSource::pinned_host) {
    // the copy may not overwrite the slot before the last reader of its previous layer is done
    check(cudaStreamWaitEvent(im.copy, s.free, 0), "waiting for a slot");
    const auto& pieces = layers_[size_t(layer)].pieces;
    const char* src = static_cast<const char*>(im.pinned) + im.pinned_offset[size_t(streamed)];
    const size_t total = offsets_[size_t(layer)].back() + round_up(pieces.back().second);
    check(cudaMemcpyAsync(s.device, src, total, cudaMemcpyHostToDevice, im.copy), "copying a layer");
    check(cudaEventRecord(s.ready, im.copy), "recording a copy");
  } else {
    std::lock_guard lock(im.mutex);
    if (im.failure) std::rethrow_exception(im.failure);
    im.requests.push_back(layer);
    im.changed.notify_all();
  }
  s.occupant = layer;
}

const void* WeightStreamer::acquire(int layer, cudaStream_t compute) {
  KBIT_REQUIRE(layer >= 0 && layer < layers(), "WeightStreamer: layer ", layer, " is out of range 0..", layers() - 1);
  auto& im = *impl_;
  if (resident(layer)) return im.resident[size_t(layer)];
  prefetch(layer);
  Slot& s = im.slots[size_t((layer - plan_.resident_layers) % plan_.slots)];
  if (plan_.source != StreamSource::pinned_host) {
    // the stager must have issued the copy (and its event) before the compute stream can wait on it
    std::unique_lock lock(im.mutex);
    im.changed.wait(lock, [&] { return s.issued == layer || im.failure; });
    if (im.failure) std::rethrow_exception(im.failure);
  }
  check(cudaStreamWaitEvent(compute, s.ready, 0), "waiting for a copy");
  s.held = true;
  return s.device;
}

void WeightStreamer::release(int layer, cudaStream_t compute) {
  KBIT_REQUIRE(layer >= 0 && layer < layers(), "WeightStreamer: layer ", layer, " is out of range 0..", layers() - 1);
  if (resident(layer)) return;
  auto& im = *impl_;
  Slot& s = im.slots[size_t((layer - plan_.resident_layers) % plan_.slots)];
  KBIT_REQUIRE(s.occupant == layer && s.held, "WeightStreamer: release of layer ", layer, ", which is not acquired");
  check(cudaEventRecord(s.free, compute), "recording a release");
  s.held = false;
}

}  // namespace kbit
