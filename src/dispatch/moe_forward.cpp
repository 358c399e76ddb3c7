// kbit::moe_forward and its workspace: route, gather, grouped gate+up, SwiGLU,
// grouped down and the weighted combine (plus the shared expert), all on the
// caller's stream. At decode sizes the gather and SwiGLU fold into the GEMVs' x staging.
#include <algorithm>

#include "core/checks.h"
#include "cuda/device_checks.h"
#include "kbit/cuda.h"
#include "kbit/moe.h"
#include "dispatch/linear_internal.h"

namespace kbit {

struct MoeWorkspace::Impl {
  Buffer expert, weight, offsets, sorted_pair, pair_row;
  Buffer x_sorted, gate_up, hidden, expert_out, shared_gate_up, shared_hidden;
  std::unique_ptr<LinearWorkspace> linear;
};

MoeWorkspace::MoeWorkspace(const Limits& l) : limits_(l), impl_(std::make_unique<Impl>()) {
  KBIT_REQUIRE(l.max_tokens > 0 && l.hidden > 0 && l.intermediate > 0, "MoeWorkspace: max_tokens, hidden and "
               "intermediate must be positive, got ", l.max_tokens, ", ", l.hidden, ", ", l.intermediate);
  check_routing_shape(l.max_tokens, l.experts, l.top_k);
  KBIT_REQUIRE(l.shared_intermediate >= 0, "MoeWorkspace: shared_intermediate must be >= 0");
  const int64_t pairs = l.max_tokens * l.top_k;
  auto dev = [](int64_t bytes) { return Buffer::allocate(Memory::device, size_t(std::max<int64_t>(bytes, 4))); };
  impl_->expert = dev(pairs * 4), impl_->weight = dev(pairs * 4), impl_->sorted_pair = dev(pairs * 4);
  impl_->pair_row = dev(pairs * 4), impl_->offsets = dev((l.experts + 1) * 4);
  impl_->x_sorted = dev(pairs * l.hidden * 2);
  impl_->gate_up = dev(pairs * 2 * l.intermediate * 2);
  impl_->hidden = dev(pairs * l.intermediate * 2);
  impl_->expert_out = dev(pairs * l.hidden * 2);
  if (l.shared_intermediate) {
    impl_->shared_gate_up = dev(l.max_tokens * 2 * l.shared_intermediate * 2);
    impl_->shared_hidden = dev(l.max_tokens * l.shared_intermediate * 2);
  }
  const int64_t max_n = std::max({2 * l.intermediate, l.hidden, 2 * l.shared_intermediate});
  const int64_t max_k = std::max({l.hidden, l.intermediate, l.shared_intermediate});
  impl_->linear = std::make_unique<LinearWorkspace>(LinearWorkspace::Limits{pairs, max_n, max_k, false});
}

MoeWorkspace::~MoeWorkspace() = default;

DeviceRouting MoeWorkspace::routing() {
  return {static_cast<int32_t*>(impl_->expert.data()), static_cast<float*>(impl_->weight.data()),
          static_cast<int32_t*>(impl_->offsets.data()), static_cast<int32_t*>(impl_->sorted_pair.data()),
          static_cast<int32_t*>(impl_->pair_row.data())};
}

void moe_forward(const TensorView& x, const float* router_logits, const MoeWeights& w, const MutableTensorView& y,
                 MoeWorkspace& ws, cudaStream_t stream, const MoeOptions& o) {
  const auto& l = ws.limits();
  KBIT_REQUIRE(w.gate_up && w.down, "moe_forward: gate_up and down weights are required");
  KBIT_REQUIRE(!w.shared_gate_up == !w.shared_down, "moe_forward: the shared expert needs both gate_up and down");
  KBIT_REQUIRE(x.dtype == DType::f16 || x.dtype == DType::bf16, "moe_forward: x must be F16 or BF16, got ",
               dtype_name(x.dtype));
  KBIT_REQUIRE(y.dtype == x.dtype, "moe_forward: y is ", dtype_name(y.dtype), " but x is ", dtype_name(x.dtype));
  const int64_t t = x.rows, h = l.hidden, inter = l.intermediate, e = l.experts;
  KBIT_REQUIRE(t <= l.max_tokens, "moe_forward: ", t, " tokens exceed the workspace's ", l.max_tokens);
  KBIT_REQUIRE(x.cols == h && y.rows == t && y.cols == h, "moe_forward: x [", x.rows, ", ", x.cols, "] and y [",
               y.rows, ", ", y.cols, "] must be [T, ", h, "]");
  KBIT_REQUIRE(w.experts == e && o.top_k == l.top_k, "moe_forward: ", w.experts, " experts, top_k ", o.top_k,
               " differ from the workspace's ", e, ", ", l.top_k);
  KBIT_REQUIRE(w.gate_up->rows() == e * 2 * inter && w.gate_up->cols() == h, "moe_forward: gate_up is [",
               w.gate_up->rows(), ", ", w.gate_up->cols(), "], expected [", e * 2 * inter, ", ", h, "]");
  KBIT_REQUIRE(w.down->rows() == e * h && w.down->cols() == inter, "moe_forward: down is [", w.down->rows(), ", ",
               w.down->cols(), "], expected [", e * h, ", ", inter, "]");
  if (w.shared_gate_up) {
    const int64_t si = l.shared_intermediate;
    KBIT_REQUIRE(si > 0, "moe_forward: the workspace has no room for a shared expert (shared_intermediate = 0)");
    KBIT_REQUIRE(w.shared_gate_up->rows() == 2 * si && w.shared_gate_up->cols() == h && w.shared_down->rows() == h &&
                     w.shared_down->cols() == si,
                 "moe_forward: the shared expert must be [", 2 * si, ", ", h, "] and [", h, ", ", si, "]");
  }
  for (const QuantizedMatrix* m : {w.gate_up, w.down, w.shared_gate_up, w.shared_down})
    if (m) detail::check_matrix(*m, "moe_forward weight", Memory::device);
  detail::check_activation(x, "moe_forward x");
  detail::check_activation(y, "moe_forward y");
  if (t == 0) return;
  auto& im = ws.impl();
  const int64_t pairs = t * o.top_k;
  const DeviceRouting r = ws.routing();
  cuda::route(router_logits, t, e, o.top_k, o.routing, r, stream);
  // Decode-sized calls fold the gather of x into the gate+up GEMV's x staging and
  // SwiGLU into the down GEMV's (two launches fewer); W with a rotation, or rows past
  // the grouped GEMV's bound, take the separate kernels. The folded GEMVs launch with
  // PDL: they wait for the previous kernel before reading anything it wrote.
  const bool fold = pairs <= kGroupedGemvMaxRows;
  const MutableTensorView gu{im.gate_up.data(), x.dtype, pairs, 2 * inter};
  if (!(fold && detail::try_grouped_gemv(x, {r.sorted_pair, o.top_k, false}, *w.gate_up, e, r.offsets, gu,
                                         *im.linear, stream, 0, true))) {
    const MutableTensorView xs{im.x_sorted.data(), x.dtype, pairs, h};
    cuda::gather_rows(x, r.sorted_pair, o.top_k, xs, stream);
    expert_linear(xs, *w.gate_up, e, r.offsets, gu, *im.linear, stream);
  }
  const MutableTensorView out{im.expert_out.data(), x.dtype, pairs, h};
  if (!(fold &&
        detail::try_grouped_gemv(gu, {nullptr, 1, true}, *w.down, e, r.offsets, out, *im.linear, stream, 0, true))) {
    const MutableTensorView hid{im.hidden.data(), x.dtype, pairs, inter};
    cuda::swiglu(gu, hid, stream);
    expert_linear(hid, *w.down, e, r.offsets, out, *im.linear, stream);
  }
  bool accumulate = false;
  if (w.shared_gate_up) {
    const int64_t si = l.shared_intermediate;
    const MutableTensorView sgu{im.shared_gate_up.data(), x.dtype, t, 2 * si};
    linear(x, *w.shared_gate_up, sgu, *im.linear, stream);
    if (!detail::try_dense_gemv(sgu, {nullptr, 1, true}, *w.shared_down, y, *im.linear, stream)) {
      const MutableTensorView sh{im.shared_hidden.data(), x.dtype, t, si};
      cuda::swiglu(sgu, sh, stream);
      linear(sh, *w.shared_down, y, *im.linear, stream);
    }
    accumulate = true;
  }
  cuda::combine(out, r, o.top_k, y, accumulate, stream);
}

}  // namespace kbit
