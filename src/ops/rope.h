// headscope — rotary position embedding (RoPE; Su et al. 2021, "RoFormer", eq. 34).
//
// Each head vector is cut into d_rot/2 pairs (x_a, x_b); pair i at position p is rotated by the
// angle p · θ_i, θ_i = base^(−2i / d_rot) (optionally rescaled, below):
//   x_a' = x_a cos(pθ_i) − x_b sin(pθ_i),   x_b' = x_b cos(pθ_i) + x_a sin(pθ_i)
// Two layouts of the pairs exist in released weights:
//   kHalfSplit    (a, b) = (i, i + d_rot/2) — Hugging Face Llama/Qwen2/Mistral ("rotate_half") and
//                 GPT-NeoX; also what llama.cpp calls NEOX
//   kInterleaved  (a, b) = (2i, 2i + 1) — the RoFormer / GPT-J / Meta-Llama layout; llama.cpp's
//                 convert script permutes the Q and K rows of Llama checkpoints into it, so a
//                 Llama GGUF is run with this layout
// Scores q·k are the same in both when the rows of Q and K are permuted consistently.
#pragma once
#include <cstdint>
#include <vector>

namespace headscope::ops {

enum class RopeLayout { kHalfSplit, kInterleaved };

struct RopeConfig {
  int64_t d_rot = 0;      // rotated dimensions per head (= d_head for the families here)
  double base = 10000.0;  // rope_theta
  RopeLayout layout = RopeLayout::kHalfSplit;
  // Llama-3.1 frequency rescaling (transformers' _compute_llama3_parameters): wavelengths longer
  // than original_max_positions / low_freq_factor are divided by `factor`, shorter than
  // original_max_positions / high_freq_factor are kept, and those between are blended.
  bool llama3_scaling = false;
  double factor = 1.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_positions = 8192.0;
  // Per-frequency divisors stored in a GGUF (tensor rope_freqs.weight, [d_rot/2]); empty if none.
  std::vector<float> freq_divisors;
};

// The inverse frequencies θ_i, i < d_rot/2, in fp32 as transformers computes them.
std::vector<float> rope_inverse_frequencies(const RopeConfig& config);

// cos/sin tables for positions [first, first + T): cos[t · d_rot/2 + i] = cos((first+t) · θ_i).
struct RopeTable {
  std::vector<float> cos, sin;  // [T, d_rot/2]
};
RopeTable rope_table(const std::vector<float>& inv_freq, int64_t first_position, int64_t T);

// Rotates x: [T, n_heads · d_head] (row stride ld) in place, every head, with the table's rows.
void rope_apply(float* x, int64_t ld, int64_t T, int64_t n_heads, int64_t d_head, const RopeTable& table, int64_t d_rot,
                RopeLayout layout);

}  // namespace headscope::ops
