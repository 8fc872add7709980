#include "ops/packed_linear.h"

#include <omp.h>

#include <algorithm>

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
  struct SlicePlan {
    dnnl::matmul primitive;
    memory packed_weights;
    int64_t first = 0, n = 0;
  };
  mutable std::map<std::pair<int64_t, int>, std::vector<SlicePlan>> slice_plans;  // by (T, parts)
  mutable std::map<std::pair<int, int>, std::vector<memory>> slice_packed;         // by (parts, slice): per layout

  // Column slices of W, one per thread, each with its own single-threaded primitive writing
  // into y's columns [first, first + n) (row stride out).
  const std::vector<SlicePlan>& slices(int64_t T, int64_t in, int64_t out, int parts) const {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = slice_plans.find({T, parts});
    if (it != slice_plans.end()) return it->second;
    std::vector<SlicePlan> v;
    const int64_t blocks = (out + 15) / 16;
    for (int i = 0; i < parts; ++i) {
      SlicePlan sp;
      sp.first = std::min(out, blocks * i / parts * 16);
      sp.n = std::min(out, blocks * (i + 1) / parts * 16) - sp.first;
      const memory::desc src({T, in}, dt::f32, tag::ab);
      const memory::desc wei_any({in, sp.n}, dt::f32, tag::any);
      const memory::desc dst({T, sp.n}, dt::f32, memory::dims{out, 1});
      const memory::desc bias_md({1, sp.n}, dt::f32, tag::ab);
      const dnnl::matmul::desc desc = bias.empty() ? dnnl::matmul::desc(src, wei_any, dst)
                                                   : dnnl::matmul::desc(src, wei_any, bias_md, dst);
      const dnnl::matmul::primitive_desc pd(desc, engine);
      std::vector<memory>& copies = slice_packed[{parts, i}];
      for (const memory& m : copies)
        if (m.get_desc() == pd.weights_desc()) sp.packed_weights = m;
      if (!sp.packed_weights) {
        memory user(memory::desc({in, sp.n}, dt::f32, tag::ba), engine, const_cast<float*>(weights.ptr() + sp.first * in));
        sp.packed_weights = memory(pd.weights_desc(), engine);
        dnnl::stream stream(engine);
        dnnl::reorder(user, sp.packed_weights).execute(stream, user, sp.packed_weights);
        stream.wait();
        copies.push_back(sp.packed_weights);
      }
      sp.primitive = dnnl::matmul(pd);
      v.push_back(std::move(sp));
    }
    return slice_plans.emplace(std::make_pair(T, parts), std::move(v)).first->second;
  }
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
  // Several threads: each multiplies by its own column slice of W with a single-threaded
  // primitive (oneDNN runs sequentially inside a parallel region). Each thread then reads only
  // its share of the weights, which is what bounds short inputs, and there is one fork per GEMM.
  // One thread, up to 256 rows, a widening matrix (out ≥ 4·in, the FFN up-projection): run it as
  // slices of about 384 columns. oneDNN 2.6's AVX2 sgemm takes 128 × 384 × 1536 at 55–67 GFLOP/s
  // whole and 82–88 in slices; MiniLM's pass at T = 16–256 gets 5–10 % faster (interleaved A/B,
  // docs/performance.md). At 512 rows, and per thread with two threads, slicing did not help.
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int per = threads == 1 && T <= 256 && out_ >= 4 * in_ ? int(std::max<int64_t>(1, out_ / 384)) : 1;
  const int nparts = threads * per;
  if ((threads > 1 || per > 1) && out_ >= 32 * nparts) {
    const auto& parts = impl_->slices(T, in_, out_, nparts);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int i = 0; i < nparts; ++i) {
      const Impl::SlicePlan& sp = parts[size_t(i)];
      dnnl::stream stream(impl_->engine);
      memory src(memory::desc({T, in_}, dt::f32, tag::ab), impl_->engine, const_cast<float*>(x));
      memory dst(memory::desc({T, sp.n}, dt::f32, memory::dims{out_, 1}), impl_->engine, y + sp.first);
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, sp.packed_weights}, {DNNL_ARG_DST, dst}};
      if (!impl_->bias.empty())
        args.emplace(DNNL_ARG_BIAS, memory(memory::desc({1, sp.n}, dt::f32, tag::ab), impl_->engine,
                                           const_cast<float*>(impl_->bias.ptr() + sp.first)));
      sp.primitive.execute(stream, args);
      stream.wait();
    }
    return;
  }
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
