// kbit::WeightStreamer: run layers whose weights live in host memory. The leading
// layers of a ResidencyPlan stay on the GPU; the rest go through a ring of GPU
// slots on the streamer's own copy stream:
//   prefetch(l)        starts layer l's copy (waits, on the copy stream, until the
//                      slot's previous layer has been released);
//   acquire(l, s)      makes stream s wait for the copy (an event; no host wait) and
//                      returns the device address of the layer's bytes;
//   release(l, s)      lets the slot be reused once s has finished with it.
// Layer l of the ring always uses slot (l - resident) % slots, so forward and
// backward passes both keep neighbouring layers in different slots.
// Sources: pinned host memory (every streamed layer copied once into one pinned
// block; the copy engine reads it directly) or a memory-mapped file read through
// one pinned staging buffer per slot: a stager thread and a pool of copy threads fill
// the staging buffer (after its previous upload has finished) and upload each finished
// 8 MB prefix while the rest is copied; prefetch() only queues the request, acquire()
// waits on the host only until the copy is issued). GPUDirect Storage (where cuFile is
// built in and its driver opens): the stager thread waits until the slot is released
// and reads the layer's pieces from the file straight into the slot (cuFileRead).
// Measured on the H200 (commit 7ea7eae, BENCHMARKS.md): the pinned source sustains the
// whole 55 GB/s link, the mapped file (page cache) 80-88% of it; GPU tests (2/3/8
// slots, every source, both directions) pass, racecheck and synccheck clean. There,
// cuFile refuses the disk's files and the gds source falls back to the mapped file.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kbit/safetensors.h"
#include "kbit/streaming.h"
#include "kbit/tensor.h"

namespace kbit {

class WeightStreamer {
 public:
  // One layer: host byte ranges, laid out one after another on the device, each piece
  // starting on a 256-byte boundary (piece_offset()).
  struct HostLayer {
    std::vector<std::pair<const void*, size_t>> pieces;
  };

  // The file the pieces were mapped from (read-only, whole file at `base`): the gds
  // source reads piece p from `path` at offset p - base. Required for StreamSource::gds.
  struct FileBacking {
    std::string path;
    const void* base = nullptr;
    size_t bytes = 0;
  };

  // plan: from plan_residency over these layers' device sizes (layer_device_bytes()).
  // A gds plan falls back to the mapped-file source, with a message on stderr, where
  // GPUDirect Storage is not available (plan() then says so).
  WeightStreamer(std::vector<HostLayer> layers, const ResidencyPlan& plan, const FileBacking* file = nullptr);

  // The layers of a checkpoint (a kbit container or any safetensors file, mapped by
  // `file`, which must outlive the streamer): layer i is the tensors layer_tensors[i]
  // in that order, each tensor one piece pointing into the mapping; `backing` names
  // the file for the gds source. A tensor the file lacks, or an empty layer, is an
  // error naming it (a truncated or corrupt file is already refused by open()).
  struct CheckpointLayers {
    std::vector<HostLayer> layers;
    FileBacking backing;
  };
  static CheckpointLayers layers_from_checkpoint(const io::SafetensorsFile& file,
                                                 const std::vector<std::vector<std::string>>& layer_tensors);

  // Whether the gds source works here (cuFile built in and its driver opens); *why otherwise.
  static bool gds_available(std::string* why);
  ~WeightStreamer();
  WeightStreamer(const WeightStreamer&) = delete;
  WeightStreamer& operator=(const WeightStreamer&) = delete;

  // Device bytes each layer needs (pieces rounded up to 256 bytes), for plan_residency.
  static std::vector<int64_t> layer_device_bytes(const std::vector<HostLayer>& layers);

  const ResidencyPlan& plan() const { return plan_; }
  int layers() const { return int(layers_.size()); }
  bool resident(int layer) const { return layer < plan_.resident_layers; }
  size_t piece_offset(int layer, int piece) const;

  void prefetch(int layer);
  const void* acquire(int layer, cudaStream_t compute);
  void release(int layer, cudaStream_t compute);

 private:
  struct Slot;
  struct Impl;
  void stage_loop();
  void stage(int layer);
  std::vector<HostLayer> layers_;
  FileBacking file_;
  std::vector<std::vector<size_t>> offsets_;
  ResidencyPlan plan_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kbit
