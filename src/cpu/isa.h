// headscope — runtime choice of the kernels' instruction-set path (include/headscope/cpu.h).
//
// The paths are ordered: each includes the ones below it, so a kernel with no variant for the
// active path runs its next lower one. The choice is made once, on first use, from cpuid
// (__builtin_cpu_supports) lowered by HEADSCOPE_ISA; it is process-wide state, like OpenMP's
// thread count, read with one atomic load per kernel call. Tests switch it with
// set_isa_for_testing to run every variant in one process.
#pragma once
#include <string_view>

namespace headscope::cpu {

enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };

const char* isa_name(Isa isa);

// The highest path this CPU runs (portable off x86-64).
Isa best_isa();

// The path HEADSCOPE_ISA = `value` asks for on a CPU whose best path is `best`: `best` when the
// value is null or empty, the lower of the two otherwise. Throws Error on an unknown name.
Isa isa_from_setting(const char* value, Isa best);

// The path the kernels take (best_isa() lowered by HEADSCOPE_ISA, resolved on first call).
Isa active_isa();

// Tests only: makes `isa` the active path (an Error if the CPU cannot run it); returns the
// previous one. reset_isa_for_testing() forgets the choice, so the next active_isa() reads
// HEADSCOPE_ISA again.
Isa set_isa_for_testing(Isa isa);
void reset_isa_for_testing();

}  // namespace headscope::cpu
