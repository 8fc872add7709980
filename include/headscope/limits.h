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
// Largest tokenizer.json / tokenizer_config.json read whole into memory; real ones are under 40 MB.
inline constexpr int64_t kMaxTokenizerFileBytes = 512ll << 20;
// Deepest nesting of arrays and objects in tokenizer.json. Real files nest 5 levels (a Sequence
// inside a Sequence is 6); the readers of Sequence components recurse once per level.
inline constexpr int kMaxTokenizerJsonDepth = 64;
// Largest token id and number of ids (vocabulary plus added tokens); the largest real vocabularies
// hold ~260K entries. Each id costs a string slot, so this caps the table at ~130 MB.
inline constexpr int64_t kMaxVocabSize = 1ll << 22;
// How far ids may run past the number of entries (vocabulary + added tokens): a real file leaves at
// most a few unused ids; a sparse one would make us allocate slots for ids no entry has.
inline constexpr int64_t kMaxVocabIdSlack = 1 << 16;
// Most BPE merges; real files have at most about the vocabulary size (~260K).
inline constexpr int64_t kMaxBpeMerges = 1ll << 22;
// Normalized text, in characters, relative to the characters of the input it came from (real
// normalizers and byte-level spelling grow text at most ~9-fold: NFD of Hangul into 3 jamo of 3
// bytes each) plus room for prefixes, and at most this many characters in all (20 bytes each).
inline constexpr int64_t kMaxNormalizedGrowth = 16;
inline constexpr int64_t kMaxNormalizedSlack = 1024;
inline constexpr int64_t kMaxNormalizedChars = 1ll << 24;
// Backtracking allowed to a tokenizer.json regex, in ICU ticks (10,000 saved states each) per
// character of the text: real split patterns save a few states per character, so this is ~1000x.
inline constexpr int64_t kMaxRegexTicksPerChar = 1;
// ... and at least this many ticks for any text (~50 ms of matching), for short texts.
inline constexpr int64_t kMinRegexTicks = 100;

// Chat template source (tokenizer_config.json / GGUF metadata); real ones are under 20 KB.
inline constexpr int64_t kMaxChatTemplateBytes = 1 << 20;
// Nesting of parentheses, subscripts and `not` in one template expression, and of {% if %} /
// {% for %} blocks; each level is a few frames of the recursive parser and renderer. Real
// templates nest under 10 deep.
inline constexpr int kMaxTemplateExpressionDepth = 64;
inline constexpr int kMaxTemplateBlockDepth = 64;
// Steps of one rendering (a piece of text or tag rendered, a loop iteration, an operand or
// operator evaluated): SmolLM2's template takes 31 per message; a runaway stops within a second.
inline constexpr int64_t kMaxTemplateSteps = 2'000'000;
// Largest string a template may build (concatenation, trim), and largest rendered prompt.
inline constexpr int64_t kMaxTemplateStringBytes = 16ll << 20;
inline constexpr int64_t kMaxTemplateOutputBytes = 16ll << 20;
// Bytes that string operations of one rendering may copy, compare or scan in all, so that a loop
// over large strings cannot run for minutes within the step budget.
inline constexpr int64_t kMaxTemplateWorkBytes = 1ll << 30;



// ---- the HTTP server ----



}  // namespace headscope::limits
