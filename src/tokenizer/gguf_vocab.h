// headscope — the tokenizer a GGUF file carries in its metadata, as a tokenizer.json document.
//
// llama.cpp stores a byte-level BPE vocabulary ("tokenizer.ggml.model" = "gpt2") as
//   tokenizer.ggml.tokens      [n_vocab] strings, the id is the index
//   tokenizer.ggml.token_type  [n_vocab] 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
//   tokenizer.ggml.merges      ["left right", ...] in rank order
//   tokenizer.ggml.pre         the pre-tokenizer's name ("gpt-2", "llama-bpe", "qwen2", "smollm", ...)
// We rebuild it as transformers does when it reads the same file (integrations/gguf/
// gguf_tokenizer_mapping.py), since transformers is the oracle our tests compare with: a BPE model
// over those tokens and merges, control tokens as special added tokens and user-defined ones as
// plain added tokens, the split regex named by tokenizer.ggml.pre (Llama-3 and Qwen2 families;
// anything else gets GPT-2's ByteLevel regex) and no template. llama.cpp itself also adds BOS when
// tokenizer.ggml.add_bos_token is set and splits digits first for "smollm"; transformers does
// neither, and with SmolLM2's vocabulary (no multi-digit tokens) the digit split changes nothing.
// SentencePiece vocabularies ("llama": tokens with scores, no merges) are rebuilt as transformers
// rebuilds them (GemmaTokenizer for gemma/gemma2/gemma3, LlamaTokenizer otherwise): a BPE model with
// byte fallback over merges derived from the scores; see sentencepiece_from_gguf in gguf_vocab.cc and
// docs/models.md. WordPiece vocabularies ("bert", BERT-family encoders) are rebuilt as BERT's
// tokenizer.json (wordpiece_json_from_gguf), and a byte-level one in a "bert" file as RoBERTa's
// (roberta_json_from_gguf). A SentencePiece Unigram vocabulary ("t5") in a "bert" file, XLM-RoBERTa
// as llama.cpp converts it, is rebuilt as XLM-R's tokenizer.json (Precompiled charsmap, Unigram,
// <s> $A </s>; xlmr_from_gguf in gguf_vocab.cc). tokenizer_json_from_gguf serves the byte-level
// kind only; tokenizer_from_gguf all of them.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>

#include "headscope/tokenizer.h"
#include "io/gguf.h"

namespace headscope::tokenizer {

nlohmann::json tokenizer_json_from_gguf(const io::GgufFile& file);
// A WordPiece vocabulary ("bert") as BERT's tokenizer.json (see gguf_vocab.cc).
nlohmann::json wordpiece_json_from_gguf(const io::GgufFile& file);
// A byte-level BPE vocabulary ("gpt2") in a "bert" file, RoBERTa as llama.cpp converts it, as
// RoBERTa's tokenizer.json (template <s> $A </s>; see gguf_vocab.cc).
nlohmann::json roberta_json_from_gguf(const io::GgufFile& file);
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& file);

}  // namespace headscope::tokenizer
