#include "ops/norm.h"

#include <cmath>
#include <map>
#include <mutex>

#include <dnnl.hpp>

namespace headscope::ops {

namespace {
// Row-wise loops split over threads only when there is enough work to pay for waking one.
constexpr int64_t kMinParallelElements = int64_t(1) << 15;
}  // namespace

void layer_norm(const float* x, int64_t T, int64_t d, const float* gamma, const float* beta, float eps, float* y) {
#pragma omp parallel for schedule(static) if (T * d >= kMinParallelElements)
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * d;
    float* yr = y + t * d;
    // Two passes in double: the mean first, then the centred variance (stable, matches torch to ~1e-7).
    double mean = 0.0;
#pragma omp simd reduction(+ : mean)
    for (int64_t i = 0; i < d; ++i) mean += xr[i];
    mean /= static_cast<double>(d);
    double var = 0.0;
#pragma omp simd reduction(+ : var)
    for (int64_t i = 0; i < d; ++i) {
      const double c = xr[i] - mean;
      var += c * c;
    }
    var /= static_cast<double>(d);
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float m = static_cast<float>(mean);
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] - m) * inv * gamma[i] + beta[i];
  }
}

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

void add_inplace(float* y, const float* x, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n >= kMinParallelElements)
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace headscope::ops
