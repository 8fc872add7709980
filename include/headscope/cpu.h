// headscope — which instruction-set path the hand-written kernels take in this process.
//
// One binary carries each kernel for several x86 instruction sets and picks one at start-up from
// the CPU (cpuid): "avx512" (AVX-512F), "avx2" (AVX2 + FMA + F16C) or "portable" (plain C++).
// The environment variable HEADSCOPE_ISA may lower the choice (never raise it above what the CPU
// runs); an unknown value is an Error naming the allowed ones. docs/performance.md lists the
// kernels and their variants.
#pragma once

namespace headscope {

// The path's name ("portable", "avx2", "avx512"); throws Error on an unknown HEADSCOPE_ISA.
const char* kernel_isa();

}  // namespace headscope
