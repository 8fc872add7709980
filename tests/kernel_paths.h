// headscope tests — run a kernel test once per instruction-set path (src/cpu/isa.h) in one
// process: a fixture derived from KernelPathTest, its TEST_Ps, and INSTANTIATE_KERNEL_PATHS(Fixture). A path this CPU
// cannot run is skipped, saying so, so that the same test runs it on a machine that can.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "cpu/isa.h"

namespace headscope::testing {

class KernelPathTest : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (GetParam() > cpu::best_isa())
      GTEST_SKIP() << "this CPU cannot run the " << cpu::isa_name(GetParam()) << " kernels (its best path is "
                   << cpu::isa_name(cpu::best_isa()) << ")";
    previous_ = cpu::set_isa_for_testing(GetParam());
    switched_ = true;
  }
  void TearDown() override {
    if (switched_) cpu::set_isa_for_testing(previous_);
  }

 private:
  cpu::Isa previous_ = cpu::Isa::portable;
  bool switched_ = false;
};

inline std::string kernel_path_name(const ::testing::TestParamInfo<cpu::Isa>& info) {
  return cpu::isa_name(info.param);
}

}  // namespace headscope::testing

#define INSTANTIATE_KERNEL_PATHS(fixture)                                                                             \
  INSTANTIATE_TEST_SUITE_P(                                                                                           \
      Path, fixture,                                                                                                  \
      ::testing::Values(::headscope::cpu::Isa::portable, ::headscope::cpu::Isa::avx2, ::headscope::cpu::Isa::avx512), \
      ::headscope::testing::kernel_path_name)
