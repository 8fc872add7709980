#include "ops/packed_linear.h"

#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "ops/panel_linear.h"

namespace headscope::ops {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// A linear layer is a 1×1 convolution over a 1 × T image with `in` channels: x [T, in] row-major
// is that image in NHWC order, y [T, out] likewise, and W [out, in] is the OIHW filter. oneDNN's
// 1×1 convolution kernels keep their weights in a blocked layout (8 output × 8 input channels on
// AVX2) that we reorder into once, and run a JIT kernel made for it — unlike its matmul on AVX2,
// which is a plain sgemm that repacks the weights on every call.
struct PackedLinear::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  Tensor weights;  // [out, in] as loaded: the source of every packed copy
  Tensor bias;     // [out] or empty
  struct Plan {
    dnnl::convolution_forward primitive;
    memory packed_weights;
  };
  mutable std::mutex mutex;
  // By T and by the thread that runs it: oneDNN runs a primitive on the thread it was made on and
  // never one primitive on two threads at once, and passes of one model run side by side on the
  // OpenMP threads (ablation over a corpus, activation patching), so each thread has its own.
  // The packed weights below are shared: they are only read.
  mutable std::map<std::pair<int64_t, std::thread::id>, Plan> plans;
  mutable std::vector<memory> packed;  // one per distinct weights layout
  mutable Tensor panels;               // ops::pack_panels(weights), made on first use

  const Tensor& panel_weights() const {
    std::lock_guard<std::mutex> lock(mutex);
    if (panels.empty()) panels = pack_panels(weights);
    return panels;
  }

  static memory::desc image(int64_t T, int64_t channels) { return {{1, channels, T, 1}, dt::f32, tag::nhwc}; }

  const Plan& plan(int64_t T, int64_t in, int64_t out) const {
    std::lock_guard<std::mutex> lock(mutex);
    const auto key = std::make_pair(T, std::this_thread::get_id());
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    const memory::desc wei_any({out, in, 1, 1}, dt::f32, tag::any);
    const memory::desc bias_md({out}, dt::f32, tag::a);
    const dnnl::convolution_forward::desc desc =
        bias.empty()
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              image(T, in), wei_any, image(T, out), {1, 1}, {0, 0}, {0, 0})
            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              image(T, in), wei_any, bias_md, image(T, out), {1, 1}, {0, 0}, {0, 0});
    const dnnl::convolution_forward::primitive_desc pd(desc, engine);
    memory weights_mem;
    for (const memory& m : packed)
      if (m.get_desc() == pd.weights_desc()) weights_mem = m;
    if (!weights_mem) {
      memory user(memory::desc({out, in, 1, 1}, dt::f32, tag::oihw), engine, const_cast<float*>(weights.ptr()));
      weights_mem = memory(pd.weights_desc(), engine);
      dnnl::stream stream(engine);
      dnnl::reorder(user, weights_mem).execute(stream, user, weights_mem);
      stream.wait();
      packed.push_back(weights_mem);
    }
    return plans.emplace(key, Plan{dnnl::convolution_forward(pd), weights_mem}).first->second;
  }
};

PackedLinear::PackedLinear(Tensor W, Tensor bias) : in_(W.dim(1)), out_(W.dim(0)), impl_(new Impl) {
  W.expect_shape({out_, in_}, "PackedLinear weights");
  if (!bias.empty()) bias.expect_shape({out_}, "PackedLinear bias");
  impl_->weights = std::move(W);
  impl_->bias = std::move(bias);
}
const Tensor& PackedLinear::weights() const { return impl_->weights; }
const Tensor& PackedLinear::bias() const { return impl_->bias; }
PackedLinear::PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;
PackedLinear::~PackedLinear() = default;

void PackedLinear::forward(const float* x, int64_t T, float* y, Kernel kernel) const {
  if (T == 0) return;
  if (kernel == Kernel::automatic)
    kernel = T >= kPanelMinRows && T <= kPanelMaxRows && panel_linear_available() ? Kernel::panels : Kernel::blocked;
  if (kernel == Kernel::panels) {
    panel_linear(impl_->panel_weights(), impl_->bias.empty() ? nullptr : impl_->bias.ptr(), in_, out_, x, T, y);
    return;
  }
  const Impl::Plan& p = impl_->plan(T, in_, out_);
  dnnl::stream stream(impl_->engine);
  memory src(Impl::image(T, in_), impl_->engine, const_cast<float*>(x));
  memory dst(Impl::image(T, out_), impl_->engine, y);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.packed_weights}, {DNNL_ARG_DST, dst}};
  if (!impl_->bias.empty())
    args.emplace(DNNL_ARG_BIAS,
                 memory(memory::desc({out_}, dt::f32, tag::a), impl_->engine, const_cast<float*>(impl_->bias.ptr())));
  p.primitive.execute(stream, args);
  stream.wait();
}

}  // namespace headscope::ops
