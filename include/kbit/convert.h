// Checkpoint conversion behind `kbit quantize`: safetensors file or sharded
// folder in, kbit container out, one tensor at a time (bounded memory), on the
// GPU when there is one.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "kbit/cpu.h"
#include "kbit/hadamard.h"
#include "kbit/shapes.h"

namespace kbit {

enum class DevicePolicy { automatic, cpu, gpu };

struct ConvertOptions {
  int bits = 4;
  std::string codebook = "bnf";                                  // bnf | nf
  std::vector<std::pair<std::string, int>> bits_for;             // regex -> k; the last match wins
  std::vector<std::string> include;                              // regexes: also quantize these (2-D float)
  std::vector<std::string> exclude;                              // regexes: never quantize these
  DevicePolicy device = DevicePolicy::automatic;
  bool overwrite = false;
  bool measure_error = true;                                     // SQNR per tensor for the summary
  std::string hadamard;                                          // "", "block:32|64|128|256" or "row"
  uint64_t hadamard_seed = 0;                                    // seeds the rotation's sign vector
};

struct TensorReport {
  std::string name;
  std::vector<int64_t> shape;
  int bits = 0;                 // 0: copied unchanged
  uint64_t original_bytes = 0;
  uint64_t stored_bytes = 0;    // packed + absmax + codebook, or the copy
  cpu::ErrorStats error;
};

struct ConvertReport {
  std::vector<TensorReport> tensors;
  bool used_gpu = false;
  double seconds = 0;
  uint64_t input_bytes = 0, output_bytes = 0;
};

// The default rule: 2-D projection weights of transformer layers
// ("...layers.3.self_attn.q_proj.weight"), not norms, embeddings or routers.
bool is_default_quantized(const std::string& name);
// Which tensors get quantized, at which bit width: the options' patterns
// compiled once (an invalid pattern or bit width is an Error naming it).
class TensorSelector {
 public:
  explicit TensorSelector(const ConvertOptions& o);
  // The bit width for `name`, or nullopt to copy it unchanged.
  std::optional<int> bits_for(const std::string& name, int rank, bool is_float) const;

 private:
  int default_bits_;
  std::vector<std::pair<std::regex, int>> bits_for_;
  std::vector<std::regex> include_, exclude_;
};

// progress(done, total, name) is called before each tensor.
using Progress = std::function<void(size_t, size_t, const std::string&)>;
ConvertReport convert_checkpoint(const std::string& in, const std::string& out, const ConvertOptions& o,
                                 const Progress& progress = {});

// Human-readable summary (per bit width: tensors, params, sizes, compression, error).
std::string format_summary(const ConvertReport& r);

// The projection shapes of a checkpoint's transformer layers, as a shape set for
// `kbit bench --shapes` / `kbit tune --shapes` (kbit/shapes.h): every 2-D weight that
// `kbit quantize` quantizes by default (is_default_quantized), plain (16/32-bit float) or already
// quantized, named by its path inside the layer (model.layers.3.self_attn.q_proj.weight ->
// self_attn.q_proj; with several layer stacks, such as a vision tower beside the language model,
// the stack's prefix stays in the name). A layer's experts (...mlp.experts.E.down_proj) become
// one grouped projection (mlp.experts.down_proj, experts = their count) whose `active` is the
// top-k of config.json beside the checkpoint (num_experts_per_tok and the like), or
// `options.active` when given, else 1. The experts' and the shared expert's gate_proj and up_proj
// (of one shape) are listed as one gate_up_proj of twice the rows, the stack that io::load_moe_layer
// builds and kbit::moe_forward runs. A projection is listed once for all the layers that have
// it with one shape; a name with another shape in other layers is listed again as NAME@L<its
// first layer>.
struct CheckpointShapesOptions {
  std::string key;  // the model's key in the shape set; empty: from the checkpoint's file or folder name
  int active = 0;   // experts per token; 0: from config.json
};
struct CheckpointShapes {
  ModelShapes model;
  int layers = 0;              // distinct layer indices seen
  int64_t weights = 0;         // tensors behind the projections (every layer, every expert)
  int64_t skipped = 0;         // layer tensors named like weights but not 2-D floats (e.g. 3-D stacked experts)
  std::string active_source;   // where `active` came from ("from config.json (num_experts_per_tok)", "from --active",
                               // "1, by default (...)"); empty without experts
};
CheckpointShapes checkpoint_shapes(const std::string& path, const CheckpointShapesOptions& options = {});

}  // namespace kbit
