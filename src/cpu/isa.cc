#include "cpu/isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "headscope/cpu.h"
#include "headscope/error.h"

namespace headscope::cpu {

namespace {

constexpr int kUnresolved = -1;
std::atomic<int> g_active{kUnresolved};  // an Isa, or kUnresolved before the first active_isa()

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::portable:
      return "portable";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

#if defined(__x86_64__) || defined(__i386__)
// F16C from cpuid leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
static bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
#endif

Isa best_isa() {
#if defined(__x86_64__) || defined(__i386__)
  // The AVX2 kernels also use FMA and F16C, and the AVX-512 ones all three besides AVX-512F
  // (every such CPU has them; checked anyway). __builtin_cpu_supports reads cpuid and, for the
  // AVX and AVX-512 register states, whether the OS saves them (XGETBV).
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  if (avx2 && __builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (avx2) return Isa::avx2;
#endif
  return Isa::portable;
}

Isa isa_from_setting(const char* value, Isa best) {
  if (value == nullptr || *value == '\0') return best;
  const std::string_view name(value);
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512})
    if (name == isa_name(isa)) return std::min(isa, best);
  throw Error("HEADSCOPE_ISA='" + std::string(name) +
              "' is not a kernel path: use portable, avx2 or avx512 (or unset it for the CPU's best)");
}

Isa active_isa() {
  int isa = g_active.load(std::memory_order_relaxed);
  if (isa == kUnresolved) {  // racing first calls resolve to the same value
    isa = int(isa_from_setting(std::getenv("HEADSCOPE_ISA"), best_isa()));
    g_active.store(isa, std::memory_order_relaxed);
  }
  return Isa(isa);
}

Isa set_isa_for_testing(Isa isa) {
  if (isa > best_isa())
    throw Error(std::string("kernel path ") + isa_name(isa) +
                " needs an instruction set this CPU lacks (best: " + isa_name(best_isa()) + ")");
  const Isa previous = active_isa();
  g_active.store(int(isa), std::memory_order_relaxed);
  return previous;
}

void reset_isa_for_testing() { g_active.store(kUnresolved, std::memory_order_relaxed); }

}  // namespace headscope::cpu

namespace headscope {

const char* kernel_isa() { return cpu::isa_name(cpu::active_isa()); }

}  // namespace headscope
