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

// Each bound is checked when the hyper-parameters are read, before any per-layer or per-head
// storage is sized; a value beyond it is refused as a ResourceError naming the file and key.
constexpr int64_t kMaxLayers = 1024;          // n_layer: the deepest public models have ~128
constexpr int64_t kMaxHeads = 1024;           // n_head, n_kv_head: the widest have 128
constexpr int64_t kMaxModelWidth = 65536;     // d_model: 4x the largest public model (16,384)
constexpr int64_t kMaxHeadWidth = 4096;       // d_head: real models use 64-256
constexpr int64_t kMaxFeedForward = 1 << 20;  // d_ff: ~53K in the largest dense models, with room
constexpr int64_t kMaxVocabulary = 1 << 22;   // vocab_size: ~260K is the largest known; 4M ids
constexpr int64_t kMaxPositions = 1 << 24;    // max_positions: 1M-token contexts exist; 16M ids
// What `Model::run` leaves free of the memory the kernel reports available (MemAvailable), for
// the rest of the process (weights already loaded, the analysis, the server) and the system.
constexpr uint64_t kRunMemoryMarginBytes = uint64_t{512} << 20;

// ---- model files (safetensors, GGUF) ----

// The safetensors reference implementation (huggingface/safetensors, MAX_HEADER_SIZE) refuses
// headers above 100 MB; a corrupt length cannot send more to the JSON parser.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;
// config.json is read whole into a JSON tree; real ones are 1-10 KB.
constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;
// Load warnings kept (one per tensor with non-finite values); the rest are counted in one line.
constexpr size_t kMaxLoadWarnings = 16;


// ---- tokenizers (tokenizer.json, GGUF vocabularies) and chat templates ----



// ---- the HTTP server ----



}  // namespace headscope::limits
