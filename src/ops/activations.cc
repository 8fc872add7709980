#include "ops/activations.h"

#include <cmath>
#include <map>
#include <mutex>

#include <dnnl.hpp>

#include "ops/exp.h"

namespace headscope::ops {

namespace {
// Elements from which the activations are shared between threads: ~16 K transcendental calls take
// tens of microseconds, many times what waking the second thread costs, and a prompt's gated
// feed-forward (T · d_ff: 20 × 1,536 on SmolLM2) is of that size.
constexpr int64_t kElementwiseParallelMin = int64_t(1) << 14;
}  // namespace

void gelu_erf(float* x, int64_t n) {
  // oneDNN's JIT-vectorised eltwise kernel (algorithm eltwise_gelu_erf computes the exact erf
  // form); a scalar std::erf loop costs as much as a quarter of the BERT forward pass. One
  // primitive per length, kept: making the primitive descriptor each call showed as ~2 % of a
  // 16-token pass. Executing a primitive from several threads at once is allowed.
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);  // stateless handle, created once
  static std::mutex mutex;
  static std::map<int64_t, dnnl::eltwise_forward> primitives;
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  dnnl::eltwise_forward primitive;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = primitives.find(n);
    if (it == primitives.end()) {
      if (primitives.size() >= 64) primitives.clear();  // many lengths seen: start again
      const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_gelu_erf, md);
      it = primitives.emplace(n, dnnl::eltwise_forward(dnnl::eltwise_forward::primitive_desc(desc, engine))).first;
    }
    primitive = it->second;
  }
  dnnl::stream stream(engine);
  dnnl::memory mem(md, engine, x);
  primitive.execute(stream, {{DNNL_ARG_SRC, mem}, {DNNL_ARG_DST, mem}});
  stream.wait();
}

void gelu_tanh(float* x, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
#pragma omp parallel for schedule(static) if (n > kElementwiseParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    x[i] = 0.5f * v * (1.0f + std::tanh(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  // exp_approx (within 2 ulp of std::exp) so that the loop vectorises: with std::exp, a scalar
  // libm call per element, this loop was 3 % of a SmolLM2 forward pass at T = 512. For z < −88,
  // e^−z is held at e^88 and the result, z / (1 + e^88) · up, is as near 0 as the exact one.
#pragma omp parallel for simd schedule(static) if (n > kElementwiseParallelMin)
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + exp_approx(-gate[i])) * up[i];
}

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  gelu_tanh(gate, n);
#pragma omp parallel for schedule(static) if (n > kElementwiseParallelMin)
  for (int64_t i = 0; i < n; ++i) gate[i] *= up[i];
}

void soft_cap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace headscope::ops
