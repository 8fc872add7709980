#include "ops/compact.h"

#include "cpu/isa.h"

namespace headscope::ops {

namespace {

// The portable path: every value is written, the position advances for the kept ones only.
template <bool kGreater>
int keep_portable(const float* src, float* dst, int n, float pivot) {
  int m = 0;
  for (int i = 0; i < n; ++i) {
    const float w = src[i];
    dst[m] = w;
    m += (kGreater ? w > pivot : w < pivot) ? 1 : 0;
  }
  return m;
}

const kernels::CompactKernels& kernels_for(cpu::Isa isa) {
  static const kernels::CompactKernels portable{keep_portable<true>, keep_portable<false>, 1};
#if defined(__x86_64__)
  static const kernels::CompactKernels avx2 = kernels::compact_kernels_avx2();
  static const kernels::CompactKernels avx512 = kernels::compact_kernels_avx512();
  if (isa == cpu::Isa::avx512) return avx512;
  if (isa == cpu::Isa::avx2) return avx2;
#endif
  return portable;
}

// The path's kernel on the whole vectors, the portable loop on the tail (in place, m <= whole).
template <bool kGreater>
int keep(const float* src, float* dst, int n, float pivot) {
  const kernels::CompactKernels& k = kernels_for(cpu::active_isa());
  const int whole = n / k.lanes * k.lanes;
  const int m = (kGreater ? k.greater : k.less)(src, dst, whole, pivot);
  return m + keep_portable<kGreater>(src + whole, dst + m, n - whole, pivot);
}

}  // namespace

int keep_greater(const float* src, float* dst, int n, float pivot) { return keep<true>(src, dst, n, pivot); }
int keep_less(const float* src, float* dst, int n, float pivot) { return keep<false>(src, dst, n, pivot); }

}  // namespace headscope::ops
