// headscope — head ablation inside the pass (Ablation in headscope/model.h; docs/causal.md).
// Recorder::project_heads calls Ablation::apply on the concatenation of the head outputs just
// before W_O, so every family ablates at the same point without a branch in its forward pass.
#include <algorithm>
#include <string>

#include "headscope/error.h"
#include "headscope/model.h"

namespace headscope {
namespace {

// SplitMix64 (Steele, Lea & Flood 2014): a fixed, portable mix, so the donor position of a
// position depends on the seed and the position only — not on the order rows are computed in
// (a KV-cache step after the prompt draws what a whole run draws).
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

int64_t Ablation::donor_position(int64_t t) const {
  const int64_t n = donor->dim(2);
  if (t < n) return t;
  return int64_t(splitmix64(seed ^ splitmix64(uint64_t(t))) % uint64_t(n));
}

void Ablation::apply(int layer, int64_t first, int64_t T, int n_head, int d_head, float* concat) const {
  const int64_t C = int64_t(n_head) * d_head;
  for (const HeadRef& ref : heads) {
    if (ref.layer != layer) continue;
    if (ref.head < 0 || ref.head >= n_head)
      throw Error("ablation: layer " + std::to_string(layer) + " has no head " + std::to_string(ref.head));
    float* o = concat + int64_t(ref.head) * d_head;  // row t at o + t·C: [T, d_head]
    switch (mode) {
      case Mode::kZero:
        for (int64_t t = 0; t < T; ++t) std::fill_n(o + t * C, d_head, 0.0f);
        break;
      case Mode::kMean: {
        if (mean == nullptr || mean->rank() != 3 || mean->dim(1) != n_head || mean->dim(2) != d_head ||
            layer >= mean->dim(0))
          throw Error("mean ablation: the mean outputs are not [n_layer, " + std::to_string(n_head) + ", " +
                      std::to_string(d_head) + "]");
        const float* m = mean->ptr() + (int64_t(layer) * n_head + ref.head) * d_head;
        for (int64_t t = 0; t < T; ++t) std::copy_n(m, d_head, o + t * C);
        break;
      }
      case Mode::kResample: {
        if (donor == nullptr || donor->rank() != 4 || donor->dim(1) != n_head || donor->dim(3) != d_head ||
            layer >= donor->dim(0) || donor->dim(2) == 0)
          throw Error("resample ablation: the donor's head outputs are not [n_layer, " + std::to_string(n_head) +
                      ", T_donor > 0, " + std::to_string(d_head) + "]");
        const float* d = donor->ptr() + (int64_t(layer) * n_head + ref.head) * donor->dim(2) * d_head;
        for (int64_t t = 0; t < T; ++t) std::copy_n(d + donor_position(first + t) * d_head, d_head, o + t * C);
        break;
      }
    }
  }
}

}  // namespace headscope
