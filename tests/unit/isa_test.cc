// The choice of the kernels' instruction-set path (src/cpu/isa.h): HEADSCOPE_ISA lowers it and
// never raises it, an unknown name is refused, and the F16 row conversion (io/float_bits) gives
// the scalar conversion's bits on every path. The other kernels' paths are tested beside their
// slow twins (ops_test: panel_linear; quant_linear_test: the GEMV).
#include "cpu/isa.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <cstring>
#include <vector>

#include "headscope/cpu.h"
#include "io/float_bits.h"
#include "kernel_paths.h"
#include "ops/panel_linear.h"
#include "test_support.h"

namespace headscope::cpu {
namespace {

TEST(Isa, SettingLowersThePathAndNeverRaisesIt) {
  EXPECT_EQ(isa_from_setting(nullptr, Isa::avx2), Isa::avx2);
  EXPECT_EQ(isa_from_setting("", Isa::avx512), Isa::avx512);
  EXPECT_EQ(isa_from_setting("portable", Isa::avx512), Isa::portable);
  EXPECT_EQ(isa_from_setting("avx2", Isa::avx512), Isa::avx2);
  EXPECT_EQ(isa_from_setting("avx512", Isa::avx2), Isa::avx2);  // the CPU has no AVX-512
  EXPECT_EQ(isa_from_setting("avx2", Isa::portable), Isa::portable);
}

TEST(Isa, UnknownSettingIsRefusedNamingTheAllowedOnes) {
  headscope::testing::expect_error([] { isa_from_setting("avx512vnni", Isa::avx512); },
                                   {"HEADSCOPE_ISA", "avx512vnni", "portable, avx2 or avx512"});
  headscope::testing::expect_error([] { isa_from_setting("AVX2", Isa::avx2); }, {"HEADSCOPE_ISA", "AVX2"});
}

// HEADSCOPE_ISA as the process sees it on first use: portable takes the portable path (the
// reported name, and the panel kernel reports no vector variant), and the variable unset gives
// the CPU's best again.
TEST(Isa, EnvironmentPortableTakesThePortablePath) {
  ASSERT_EQ(setenv("HEADSCOPE_ISA", "portable", 1), 0);
  reset_isa_for_testing();
  EXPECT_EQ(active_isa(), Isa::portable);
  EXPECT_STREQ(kernel_isa(), "portable");
  EXPECT_FALSE(ops::panel_linear_available());

  ASSERT_EQ(setenv("HEADSCOPE_ISA", "sse2", 1), 0);
  reset_isa_for_testing();
  headscope::testing::expect_error([] { kernel_isa(); }, {"HEADSCOPE_ISA", "sse2"});

  ASSERT_EQ(unsetenv("HEADSCOPE_ISA"), 0);
  reset_isa_for_testing();
  EXPECT_EQ(active_isa(), best_isa());
  EXPECT_STREQ(kernel_isa(), isa_name(best_isa()));
#if defined(__x86_64__)
  std::printf("this CPU's kernel path: %s\n", kernel_isa());
#endif
}

TEST(Isa, TestsCannotSelectAPathTheCpuLacks) {
  if (best_isa() == Isa::avx512) GTEST_SKIP() << "this CPU runs every path";
  headscope::testing::expect_error([] { set_isa_for_testing(Isa::avx512); }, {"avx512", "lacks"});
}

// Every binary16 bit pattern (and a ragged tail: 65,536 + 5 values, unaligned source) through
// f16_to_f32_row equals the scalar conversion bit for bit, on each path.
class F16RowPath : public headscope::testing::KernelPathTest {};

TEST_P(F16RowPath, EveryBitPatternMatchesTheScalarConversion) {
  const size_t n = 65536 + 5;
  std::vector<uint8_t> bytes(2 * n + 1);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = uint16_t(i * 40503u);  // odd multiplier: a permutation of the 16-bit values
    std::memcpy(bytes.data() + 1 + 2 * i, &h, 2);
  }
  std::vector<float> out(n);
  io::f16_to_f32_row(bytes.data() + 1, out.data(), n);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    const float expected = io::f16_bits_to_f32(uint16_t(i * 40503u));
    wrong += std::bit_cast<uint32_t>(out[i]) != std::bit_cast<uint32_t>(expected);
  }
  EXPECT_EQ(wrong, 0u);
}

INSTANTIATE_KERNEL_PATHS(F16RowPath);

}  // namespace
}  // namespace headscope::cpu
