#include "ops/packed_linear.h"

#include <dnnl.hpp>

namespace headscope::ops {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

struct PackedLinear::Impl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  Tensor weights;  // [out, in] as loaded: the source of every packed copy
  Tensor bias;     // [out] or empty
  struct Plan {
    dnnl::matmul primitive;
    memory packed_weights;
  };
  mutable std::mutex mutex;
  mutable std::map<int64_t, Plan> plans;                   // by T
  mutable std::vector<memory> packed;                      // one per distinct weights layout

  const Plan& plan(int64_t T, int64_t in, int64_t out) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = plans.find(T);
    if (it != plans.end()) return it->second;
    const memory::desc src({T, in}, dt::f32, tag::ab);
    const memory::desc wei_any({in, out}, dt::f32, tag::any);
    const memory::desc dst({T, out}, dt::f32, tag::ab);
    const memory::desc bias_md({1, out}, dt::f32, tag::ab);
    const dnnl::matmul::desc desc = bias.empty() ? dnnl::matmul::desc(src, wei_any, dst)
                                                 : dnnl::matmul::desc(src, wei_any, bias_md, dst);
    const dnnl::matmul::primitive_desc pd(desc, engine);
    memory weights_mem;
    for (const memory& m : packed)
      if (m.get_desc() == pd.weights_desc()) weights_mem = m;
    if (!weights_mem) {
      // W [out, in] row-major is the [in, out] matrix in column-major order: format "ba".
      memory user(memory::desc({in, out}, dt::f32, tag::ba), engine, const_cast<float*>(weights.ptr()));
      weights_mem = memory(pd.weights_desc(), engine);
      dnnl::stream stream(engine);
      dnnl::reorder(user, weights_mem).execute(stream, user, weights_mem);
      stream.wait();
      packed.push_back(weights_mem);
    }
    return plans.emplace(T, Plan{dnnl::matmul(pd), weights_mem}).first->second;
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

void PackedLinear::forward(const float* x, int64_t T, float* y) const {
  if (T == 0) return;
  const Impl::Plan& p = impl_->plan(T, in_, out_);
  dnnl::stream stream(impl_->engine);
  memory src(memory::desc({T, in_}, dt::f32, tag::ab), impl_->engine, const_cast<float*>(x));
  memory dst(memory::desc({T, out_}, dt::f32, tag::ab), impl_->engine, y);
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, p.packed_weights}, {DNNL_ARG_DST, dst}};
  if (!impl_->bias.empty())
    args.emplace(DNNL_ARG_BIAS, memory(memory::desc({1, out_}, dt::f32, tag::ab), impl_->engine,
                                       const_cast<float*>(impl_->bias.ptr())));
  p.primitive.execute(stream, args);
  stream.wait();
}

}  // namespace headscope::ops
