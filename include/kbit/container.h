// The kbit container: quantized matrices inside an ordinary safetensors file
// (spec: "Container: safetensors"). For a quantized weight NAME:
//   NAME.kbit_packed (I32 [N, K32/32, k]), NAME.kbit_absmax (U8 [N, K32/32]),
//   NAME.kbit_codebook (F32 [2^k]) and header metadata NAME.kbit =
//   {"k":4,"shape":[N,K],"tensor_scale":0.0078125,"hadamard":null,"codebook":"bnf"},
//   "hadamard" being {"mode":"block"|"row","size":B,"signs":[uint32 words]|null} for rotated weights;
// the file carries kbit.format = "1".
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kbit/cpu.h"
#include "kbit/quantized_matrix.h"
#include "kbit/safetensors.h"

namespace kbit::io {

inline constexpr const char* kFormatKey = "kbit.format";

// Declares NAME's three tensors (call before SafetensorsWriter::begin()), with the
// rotation the matrix will carry, if any.
void declare_quantized(SafetensorsWriter& w, const std::string& name, int64_t rows, int64_t cols, int bits,
                       const std::optional<Rotation>& rotation = std::nullopt);
// Writes them, in declaration order, and NAME.kbit; q must be a flat host matrix.
void write_quantized(SafetensorsWriter& w, const std::string& name, const QuantizedMatrix& q);

// Names of the quantized weights in a file (from their NAME.kbit metadata).
std::vector<std::string> quantized_names(const SafetensorsFile& f);
bool is_kbit_tensor_part(const std::string& tensor_name);  // NAME.kbit_packed / _absmax / _codebook
// One quantized weight's shape [rows, cols] and bit width, from its metadata alone (no data read).
struct QuantizedShape {
  int64_t rows = 0, cols = 0;
  int bits = 0;
};
QuantizedShape quantized_shape(const SafetensorsFile& f, const std::string& name);
// Loads and validates one quantized weight as a flat host matrix.
QuantizedMatrix load_quantized(const SafetensorsFile& f, const std::string& name);

// Mixture-of-experts weights from a quantized checkpoint (one tensor per expert, as Hugging Face stores
// them) into the stacks kbit::expert_linear and kbit::moe_forward take:
//   names = expert_weight_names(ck, "model.layers.3.mlp", "down_proj");   // experts 0..E-1 in order
//   QuantizedMatrix down = load_stacked(ck, names);                       // [E H, I], flat, host
// and for gate_up, each expert's gate_proj name followed by its up_proj name. Then repack to mma16 and
// copy to the device as any quantized matrix.
// The quantized weights PREFIX.experts.E.PROJECTION.weight of a checkpoint, by expert index E, which
// must run 0..E-1 without a gap; an error names the prefix and projection when there are none.
std::vector<std::string> expert_weight_names(const Checkpoint& ck, const std::string& prefix,
                                             const std::string& projection);
// The quantized weights `names` (from whichever shard holds each) stacked by rows with
// cpu::stack_rows: bit-identical weights under one tensor scale (see there; `stats` counts the
// blocks it rescaled or quantized again).
QuantizedMatrix load_stacked(const Checkpoint& ck, std::span<const std::string> names, cpu::StackStats* stats = nullptr);

// A whole MoE feed-forward layer of a quantized checkpoint, stacked as kbit::MoeWeights takes it
// (flat, host: repack to mma16 and copy to the device, then point a MoeWeights at the matrices):
//   PREFIX.experts.E.{gate_proj,up_proj,down_proj}.weight for E = 0..experts-1, and, when present,
//   PREFIX.shared_expert.* or PREFIX.shared_experts.* (gate_proj, up_proj, down_proj).
// gate_up is [E 2I, H]: expert e's gate rows, then its up rows; down is [E H, I]. Every expert
// must have all three projections with one shape ([I, H], [I, H], [H, I]); errors name the tensor.
struct MoeLayer {
  QuantizedMatrix gate_up, down;
  int64_t experts = 0, hidden = 0, intermediate = 0;
  bool has_shared = false;
  QuantizedMatrix shared_gate_up, shared_down;  // [2 Is, H] and [H, Is] when has_shared
  int64_t shared_intermediate = 0;
  cpu::StackStats stats;  // summed over the stacks (blocks rescaled or quantized again)
};
MoeLayer load_moe_layer(const Checkpoint& ck, const std::string& prefix);

}  // namespace kbit::io
