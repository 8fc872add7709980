// io::dequantize_row alone, per block type and instruction-set path: one 64-row panel of a
// COLS-column matrix (what ops::quant_linear dequantises before each sgemm in a prefill; COLS
// defaults to 1536, SmolLM2's d_ff) from random blocks, on one thread. Prints one JSON line per
// type with the median nanoseconds per value on every path this CPU runs, and each vector path's
// speed-up over the portable loop measured in the same run (the path is switched with
// cpu::set_isa_for_testing, as the kernel-path tests do).
//   dequant_bench [COLS] [--repeats N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cpu/isa.h"
#include "io/gguf_quants.h"
#include "timing.h"

namespace io = headscope::io;
namespace cpu = headscope::cpu;

int main(int argc, char** argv) {
  int64_t cols = 1536;
  int repeats = 31;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc)
      repeats = std::atoi(argv[++i]);
    else
      cols = std::atoll(argv[i]);
  }
  if (cols <= 0 || cols % 256 != 0) {
    std::fprintf(stderr, "dequant_bench: COLS must be a positive multiple of 256 (a whole number of K-quant blocks)\n");
    return 1;
  }
  // Each type with the byte offsets of its f16 scales (drawn finite below).
  struct BlockType {
    io::GgmlType type;
    std::vector<int> f16_offsets;
  };
  const BlockType types[] = {
      {io::GgmlType::Q4_0, {0}},    {io::GgmlType::Q4_1, {0, 2}}, {io::GgmlType::Q5_0, {0}},
      {io::GgmlType::Q5_1, {0, 2}}, {io::GgmlType::Q8_0, {0}},    {io::GgmlType::Q2_K, {80, 82}},
      {io::GgmlType::Q3_K, {108}},  {io::GgmlType::Q4_K, {0, 2}}, {io::GgmlType::Q5_K, {0, 2}},
      {io::GgmlType::Q6_K, {208}},
  };
  const int64_t n = 64 * cols;
  std::vector<float> y(static_cast<size_t>(n));
  for (const BlockType& bt : types) {
    const size_t size = io::ggml_type_size(bt.type);
    const int64_t nb = n / io::ggml_block_size(bt.type);
    std::vector<uint8_t> blocks(size_t(nb) * size);
    std::mt19937 rng(static_cast<unsigned>(bt.type));
    for (uint8_t& b : blocks) b = uint8_t(rng());
    for (int64_t b = 0; b < nb; ++b)
      for (int offset : bt.f16_offsets) {
        uint16_t h;
        do h = uint16_t(rng());
        while (((h >> 10) & 0x1F) == 0x1F);
        std::memcpy(blocks.data() + size_t(b) * size + size_t(offset), &h, 2);
      }
    std::printf("{\"type\": \"%s\", \"values\": %lld", io::ggml_type_name(bt.type), static_cast<long long>(n));
    double portable_ns = 0;
    for (cpu::Isa isa : {cpu::Isa::portable, cpu::Isa::avx2, cpu::Isa::avx512}) {
      if (isa > cpu::best_isa()) continue;
      const cpu::Isa previous = cpu::set_isa_for_testing(isa);
      const double ms = headscope::bench::median(
          headscope::bench::sorted_times_ms(repeats, [&] { io::dequantize_row(bt.type, blocks.data(), y.data(), n); }));
      cpu::set_isa_for_testing(previous);
      const double ns = ms * 1e6 / double(n);
      if (isa == cpu::Isa::portable) portable_ns = ns;
      std::printf(", \"%s_ns_per_value\": %.4f", cpu::isa_name(isa), ns);
      if (isa != cpu::Isa::portable) std::printf(", \"%s_speedup\": %.2f", cpu::isa_name(isa), portable_ns / ns);
    }
    std::printf("}\n");
  }
  return 0;
}
