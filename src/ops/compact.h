// headscope — stream compaction of a float row: the values on one side of a pivot moved to the
// front, in order. keys_to_cover (analysis/statistics.cc) narrows each attention row around
// pivots with it; it is the costliest step there once the sums are vectorised.
//
//   keep_greater(src, dst, n, p)   dst[0, m) = the values of src[0, n) that are > p, in order
//   keep_less(src, dst, n, p)      the same for < p (NaN is neither, so it is never kept)
//
// Both return m. dst may be src (in place) or a buffer of at least n floats that does not
// overlap src. The path follows cpu::active_isa(): AVX-512 compresses 16 lanes per step
// (vcompressps to a register, then a plain store), AVX2 permutes 8 lanes through a table of the
// 256 masks, and the portable loop below them is the slow twin the tests compare against.
#pragma once

namespace headscope::ops {

int keep_greater(const float* src, float* dst, int n, float pivot);
int keep_less(const float* src, float* dst, int n, float pivot);

namespace kernels {
// A path's kernels compact src[0, n) for n a multiple of `lanes` (the caller passes the whole
// vectors; the portable loop does the rest).
using KeepFn = int (*)(const float* src, float* dst, int n, float pivot);
struct CompactKernels {
  KeepFn greater = nullptr, less = nullptr;
  int lanes = 1;
};
CompactKernels compact_kernels_avx2();
CompactKernels compact_kernels_avx512();
}  // namespace kernels

}  // namespace headscope::ops
