#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/precompiled.h"
#include "tokenizer/unicode.h"
#include "tokenizer/unigram.h"

namespace headscope::tokenizer {

namespace {

constexpr int64_t kTokenNormal = 1;
constexpr int64_t kTokenUnknown = 2;
constexpr int64_t kTokenControl = 3;
constexpr int64_t kTokenUserDefined = 4;
constexpr int64_t kTokenUnused = 5;

// tokenizer.ggml.pre values whose split regex transformers knows (GGUF_PRE_TOKENIZER_SPLITS).
const char* split_pattern_for(const std::string& pre) {
  static const std::set<std::string_view> llama3 = {"llama3",       "llama-v3", "llama-bpe", "falcon3",
                                                    "falcon-h1",    "pixtral",  "midm-2.0",  "lfm2",
                                                    "jina-v5-nano", "dbrx",     "smaug-bpe"};
  static const std::set<std::string_view> qwen2 = {"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez"};
  if (llama3.count(pre)) return kLlama3SplitPattern;
  if (qwen2.count(pre)) return kQwen2SplitPattern;
  return nullptr;
}

bool is_byte_level_spelling(const std::u32string& chars) {
  for (char32_t c : chars) {
    if (char_to_byte(c) < 0) return false;
  }
  return true;
}

// tokenizers_from_gguf's checks of list sizes, shared by both vocabulary kinds.
void check_count(const io::GgufFile& file, const char* key, size_t n, int64_t limit) {
  if (n > static_cast<size_t>(limit)) {
    throw ResourceError(file.path() + ": " + key + " has " + std::to_string(n) + " entries, more than the " +
                        std::to_string(limit) + " allowed");
  }
}

std::vector<int64_t> token_types(const io::GgufFile& file, size_t n_tokens) {
  std::vector<int64_t> types;
  if (file.has("tokenizer.ggml.token_type")) types = file.get_int_array("tokenizer.ggml.token_type");
  if (types.empty()) types.assign(n_tokens, kTokenNormal);
  if (types.size() != n_tokens) {
    throw Error(file.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(n_tokens) + " tokens");
  }
  return types;
}

// The pieces of a vocabulary by a polynomial hash of their bytes, H(s) = sum s[i] * B^(n-1-i) mod
// 2^64, so that every prefix and every suffix of a piece is hashed in O(1) from the one before.
// Open addressing over (hash, id); a hit is confirmed by comparing the bytes. derive_merges looks up
// ~2 million splits of Gemma's pieces, which costs seconds through the node-based Vocab map.
class PieceIndex {
 public:
  static constexpr uint64_t kBase = 0x100000001b3ull;  // odd, so B^k never becomes 0

  explicit PieceIndex(const Vocab& vocab) : vocab_(vocab) {
    size_t capacity = 16;
    while (capacity < 2 * vocab.tokens.size()) capacity <<= 1;
    mask_ = capacity - 1;
    slots_.assign(capacity, Slot{0, -1});
    for (size_t id = 0; id < vocab.tokens.size(); ++id) {
      const std::string& piece = vocab.tokens[id];
      if (piece.empty() || vocab.find(piece) != static_cast<int32_t>(id)) continue;
      uint64_t h = 0;
      for (unsigned char b : piece) h = h * kBase + b;
      size_t i = spread(h);
      while (slots_[i].id >= 0) i = (i + 1) & mask_;
      slots_[i] = {h, static_cast<int32_t>(id)};
    }
  }
  std::optional<int32_t> find(uint64_t hash, std::string_view piece) const {
    for (size_t i = spread(hash);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return std::nullopt;
      if (s.hash == hash && vocab_.tokens[static_cast<size_t>(s.id)] == piece) return s.id;
    }
  }

 private:
  struct Slot {
    uint64_t hash;
    int32_t id;  // -1: empty
  };
  size_t spread(uint64_t h) const { return static_cast<size_t>((h ^ (h >> 31)) * 0x9e3779b97f4a7c15ull >> 20) & mask_; }
  const Vocab& vocab_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// The merges a SentencePiece vocabulary implies, as transformers derives them
// (tokenization_utils_base.generate_merges): every split of every piece into two pieces of the
// vocabulary is a merge; a piece's splits are ordered by (left id, right id), then all merges are
// sorted, stably, by (score of the merged piece, characters of the left part, of the right part),
// best first. Merging the best-ranked adjacent pair first is then llama.cpp's SPM rule (merge the
// adjacent pair whose merged piece scores highest, leftmost on ties) except for equal scores.
std::vector<Bpe::IdMerge> derive_merges(const Vocab& vocab, const std::vector<double>& scores,
                                        const std::string& path) {
  struct Candidate {
    double score;
    int32_t left_chars, right_chars;
    Bpe::IdMerge merge;
  };
  const PieceIndex index(vocab);
  std::vector<Candidate> all, local;
  std::vector<uint64_t> prefix, suffix, power{1};  // hashes of piece[0, b) and piece[b, n); B^k
  int64_t work = 0;                                // bytes compared by the lookups below, at most
  for (size_t i = 0; i < vocab.tokens.size(); ++i) {
    const std::string& piece = vocab.tokens[i];
    if (piece.empty() || vocab.find(piece) != static_cast<int32_t>(i)) continue;  // a later duplicate wins
    const size_t n = piece.size();
    work += static_cast<int64_t>(n) * static_cast<int64_t>(n);
    if (work > limits::kMaxMergeDerivationBytes) {
      throw ResourceError(path + ": deriving merges from the vocabulary would compare more than " +
                          std::to_string(limits::kMaxMergeDerivationBytes) +
                          " bytes (the pieces are far longer than in any real vocabulary)");
    }
    while (power.size() <= n) power.push_back(power.back() * PieceIndex::kBase);
    prefix.assign(n + 1, 0);
    suffix.assign(n + 1, 0);
    for (size_t b = 0; b < n; ++b) prefix[b + 1] = prefix[b] * PieceIndex::kBase + static_cast<unsigned char>(piece[b]);
    for (size_t b = n; b-- > 0;) suffix[b] = static_cast<unsigned char>(piece[b]) * power[n - 1 - b] + suffix[b + 1];
    local.clear();
    const std::string_view sv(piece);
    int32_t chars = 0, total_chars = 0;
    for (unsigned char c : piece) total_chars += (c & 0xC0) != 0x80;
    for (size_t cut = 1; cut < n; ++cut) {
      if ((static_cast<unsigned char>(piece[cut - 1]) & 0xC0) != 0x80) ++chars;  // characters in [0, cut)
      if ((static_cast<unsigned char>(piece[cut]) & 0xC0) == 0x80) continue;     // not a character boundary
      const auto left = index.find(prefix[cut], sv.substr(0, cut));
      if (!left) continue;
      const auto right = index.find(suffix[cut], sv.substr(cut));
      if (!right) continue;
      local.push_back({scores[i], chars, total_chars - chars, {*left, *right, static_cast<int32_t>(i)}});
    }
    std::sort(local.begin(), local.end(), [](const Candidate& a, const Candidate& b) {
      return std::pair(a.merge.left, a.merge.right) < std::pair(b.merge.left, b.merge.right);
    });
    all.insert(all.end(), local.begin(), local.end());
    if (all.size() > static_cast<size_t>(limits::kMaxBpeMerges)) {
      throw ResourceError(path + ": the vocabulary implies more than " + std::to_string(limits::kMaxBpeMerges) +
                          " merges, the most allowed");
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    return std::tuple(a.score, a.left_chars, a.right_chars) > std::tuple(b.score, b.left_chars, b.right_chars);
  });
  std::vector<Bpe::IdMerge> merges;
  merges.reserve(all.size());
  for (const Candidate& c : all) merges.push_back(c.merge);
  return merges;
}

// The id a special-token key names, if the file has the key; an id outside the n_tokens pieces is an error.
std::optional<int32_t> optional_token_id(const io::GgufFile& file, const char* key, size_t n_tokens) {
  if (!file.has(key)) return std::nullopt;
  const int64_t id = file.get_int(key);
  if (id < 0 || id >= static_cast<int64_t>(n_tokens)) {
    throw Error(file.path() + ": " + key + " is " + std::to_string(id) + ", outside the " + std::to_string(n_tokens) +
                " tokens");
  }
  return static_cast<int32_t>(id);
}

bool is_gemma(const std::string& architecture) {
  return architecture == "gemma" || architecture == "gemma2" || architecture == "gemma3";
}

// A SentencePiece vocabulary ("llama"): pieces with scores, no merges, byte pieces <0xNN>. Built as
// transformers builds it from the same file (integrations/gguf/gguf_tokenizer_mapping.py):
//   Gemma (gemma, gemma2, gemma3)  GemmaTokenizer: normalizer Replace(" " -> "▁"), no prefix; pieces
//                                  made only of whitespace and spelled with spaces are respelled with
//                                  "▁"; merges ranked by the piece's position in the file, not its
//                                  score (Gemma's scores do not follow the merge order)
//   anything else                  LlamaTokenizer: Metaspace("▁", prepend "first" unless
//                                  tokenizer.ggml.add_space_prefix is false); merges ranked by score
// Both: BPE with byte_fallback and fuse_unk; control pieces are special added tokens and
// user-defined pieces plain added tokens, both matched whole in the raw text; BOS first when
// tokenizer.ggml.add_bos_token (default true) and EOS last when add_eos_token (default false).
std::unique_ptr<Tokenizer> sentencepiece_from_gguf(const io::GgufFile& file) {
  const std::string& path = file.path();
  const bool gemma = is_gemma(file.get_string("general.architecture", ""));
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  check_count(file, "tokenizer.ggml.tokens", tokens.size(), limits::kMaxVocabulary);
  const std::vector<int64_t> types = token_types(file, tokens.size());
  std::vector<double> scores(tokens.size());
  if (gemma) {
    for (size_t i = 0; i < tokens.size(); ++i) scores[i] = -static_cast<double>(i);
  } else {
    if (!file.has("tokenizer.ggml.scores")) throw Error(path + ": a 'llama' vocabulary needs tokenizer.ggml.scores");
    const std::vector<float> stored = file.get_float_array("tokenizer.ggml.scores");
    if (stored.size() != tokens.size()) {
      throw Error(path + ": tokenizer.ggml.scores has " + std::to_string(stored.size()) + " entries for " +
                  std::to_string(tokens.size()) + " tokens");
    }
    std::copy(stored.begin(), stored.end(), scores.begin());
  }
  Vocab vocab;
  vocab.ids.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string piece = tokens[i];
    if (const int64_t bad = unicode::find_invalid_utf8(piece); bad >= 0) {
      throw Error(path + ": tokenizer.ggml.tokens entry " + std::to_string(i) + " is not valid UTF-8 (byte " +
                  std::to_string(bad) + "); the file is corrupt");
    }
    if (gemma && piece.find(' ') != std::string::npos) {
      const std::u32string chars = unicode::decode_utf8(piece, path).chars;
      const bool blank = std::all_of(chars.begin(), chars.end(), unicode::is_whitespace);
      if (blank) {
        piece.clear();
        for (size_t k = 0; k < chars.size(); ++k) piece += "\u2581";
      }
    }
    vocab.add(std::move(piece), static_cast<int32_t>(i));
  }
  const std::vector<Bpe::IdMerge> merges = derive_merges(vocab, scores, path);

  const auto special_id = [&](const char* key) { return optional_token_id(file, key, tokens.size()); };
  BpeOptions options;
  options.byte_fallback = true;
  options.fuse_unk = true;
  const std::optional<int32_t> unk = special_id("tokenizer.ggml.unknown_token_id");
  const std::string unk_text = unk ? vocab.tokens[static_cast<size_t>(*unk)] : std::string("<unk>");
  if (vocab.find(unk_text)) options.unk_token = unk_text;

  PipelineTokenizer::Parts parts;
  parts.source = path;
  parts.decode_style = gemma ? DecodeStyle::kSentencePieceKeepSpace : DecodeStyle::kSentencePiece;
  if (gemma) {
    parts.normalizer =
        read_normalizer({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}, path);
  } else {
    const bool prefix = file.get_bool("tokenizer.ggml.add_space_prefix", true);
    parts.pre_tokenizer = read_pre_tokenizer({{"type", "Metaspace"},
                                              {"replacement", "\u2581"},
                                              {"prepend_scheme", prefix ? "first" : "never"},
                                              {"split", false}},
                                             path);
  }
  // Control pieces, the named special ids, then user-defined pieces that the vocabulary spells as
  // the file does (Gemma's respelled blank pieces are not matched whole, as in transformers).
  std::vector<bool> is_special(tokens.size(), false);
  for (size_t i = 0; i < tokens.size(); ++i) is_special[i] = types[i] == kTokenControl;
  for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                          "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"}) {
    if (const auto id = special_id(key)) is_special[static_cast<size_t>(*id)] = true;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool user = types[i] == kTokenUserDefined && vocab.find(tokens[i]) == static_cast<int32_t>(i);
    if (!is_special[i] && !user) continue;
    AddedToken t;
    t.content = vocab.tokens[i];
    t.id = static_cast<int32_t>(i);
    t.special = is_special[i];
    parts.added_tokens.push_back(std::move(t));
  }
  const auto template_piece = [&](int32_t id) {
    TemplatePiece p;
    p.ids = {id};
    p.tokens = {vocab.tokens[static_cast<size_t>(id)]};
    return p;
  };
  const std::optional<int32_t> bos = special_id("tokenizer.ggml.bos_token_id");
  const std::optional<int32_t> eos = special_id("tokenizer.ggml.eos_token_id");
  const bool add_bos = bos && file.get_bool("tokenizer.ggml.add_bos_token", true);
  const bool add_eos = eos && file.get_bool("tokenizer.ggml.add_eos_token", false);
  if (add_bos || add_eos) {
    if (add_bos) parts.post_processor.single.push_back(template_piece(*bos));
    TemplatePiece sequence;
    sequence.is_sequence = true;
    parts.post_processor.single.push_back(sequence);
    if (add_eos) parts.post_processor.single.push_back(template_piece(*eos));
  }
  parts.model = std::make_unique<Bpe>(std::move(vocab), merges, std::move(options), path);
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

// XLM-RoBERTa as llama.cpp's converter writes it (conversion/bert.py, _xlmroberta_set_vocab): a
// "bert" file with a SentencePiece Unigram vocabulary, tokenizer.ggml.model "t5":
//   tokenizer.ggml.tokens / scores / token_type   the pieces in transformers' id order (<s> <pad>
//                                 </s> <unk>, then the model's pieces from its fourth on), scores
//                                 as the sentencepiece model has them
//   tokenizer.ggml.precompiled_charsmap   the model's normalization rules, bytes (optional)
//   tokenizer.ggml.add_space_prefix, remove_extra_whitespaces   from the model's normalizer_spec
//   tokenizer.ggml.{bos,eos,unknown,seperator,padding,mask}_token_id
// We rebuild the tokenizer.json transformers' XLMRobertaConverter makes of the same model: the
// Precompiled normalizer, then Replace(" {2,}" -> " ") when remove_extra_whitespaces, Metaspace
// "▁" (prepended unless add_space_prefix is false), the Unigram model, and <s> $A </s>. The ids
// past the sentencepiece model are placeholders "[PAD<n>]" of type unused; the one that
// mask_token_id names is XLM-R's <mask> and is spelled so. Control and unknown pieces and the
// named special ids are special added tokens, matched as written (the file keeps no lstrip; the
// Hub's xlm-roberta-base gives <mask> lstrip, so " <mask>" keeps its space here).
std::unique_ptr<Tokenizer> xlmr_from_gguf(const io::GgufFile& file) {
  const std::string& path = file.path();
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  check_count(file, "tokenizer.ggml.tokens", tokens.size(), limits::kMaxVocabulary);
  if (tokens.empty()) throw Error(path + ": tokenizer.ggml.tokens is empty");
  const std::vector<int64_t> types = token_types(file, tokens.size());
  if (!file.has("tokenizer.ggml.scores")) throw Error(path + ": a 't5' vocabulary needs tokenizer.ggml.scores");
  const std::vector<float> scores = file.get_float_array("tokenizer.ggml.scores");
  if (scores.size() != tokens.size()) {
    throw Error(path + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  }
  const auto special_id = [&](const char* key) { return optional_token_id(file, key, tokens.size()); };
  const std::optional<int32_t> mask = special_id("tokenizer.ggml.mask_token_id");
  std::vector<std::pair<std::string, double>> pieces;
  pieces.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (const int64_t bad = unicode::find_invalid_utf8(t); bad >= 0) {
      throw Error(path + ": tokenizer.ggml.tokens entry " + std::to_string(i) + " is not valid UTF-8 (byte " +
                  std::to_string(bad) + "); the file is corrupt");
    }
    if (t.size() > static_cast<size_t>(limits::kMaxUnigramPieceBytes)) {
      throw ResourceError(path + ": tokenizer.ggml.tokens entry " + std::to_string(i) + " is " +
                          std::to_string(t.size()) + " bytes long, more than the " +
                          std::to_string(limits::kMaxUnigramPieceBytes) + " a Unigram piece may have");
    }
    if (!std::isfinite(scores[i])) {
      throw Error(path + ": tokenizer.ggml.scores entry " + std::to_string(i) + " is not a finite number");
    }
    const bool mask_placeholder = mask && static_cast<size_t>(*mask) == i && types[i] == kTokenUnused;
    pieces.emplace_back(mask_placeholder ? std::string("<mask>") : t, mask_placeholder ? 0.0 : double(scores[i]));
  }
  // transformers' converter puts <unk> at id 3 (unk_id 3); the file names it.
  std::optional<int32_t> unk = special_id("tokenizer.ggml.unknown_token_id");
  if (!unk) {
    const auto it = std::find(types.begin(), types.end(), kTokenUnknown);
    if (it != types.end()) unk = static_cast<int32_t>(it - types.begin());
  }

  PipelineTokenizer::Parts parts;
  parts.source = path;
  parts.decode_style = DecodeStyle::kSentencePiece;
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  if (file.has("tokenizer.ggml.precompiled_charsmap")) {
    const io::GgufValue& v = file.value("tokenizer.ggml.precompiled_charsmap");
    if (v.type != io::GgufType::ARRAY || (v.elem_type != io::GgufType::UINT8 && v.elem_type != io::GgufType::INT8)) {
      throw Error(path + ": tokenizer.ggml.precompiled_charsmap is not an array of bytes");
    }
    check_count(file, "tokenizer.ggml.precompiled_charsmap", v.elems_nbytes, limits::kMaxPrecompiledCharsmapBytes);
    const std::string_view blob(reinterpret_cast<const char*>(v.elems), v.elems_nbytes);
    normalizers.push_back(std::make_unique<PrecompiledNormalizer>(
        PrecompiledCharsmap(blob, path + ": tokenizer.ggml.precompiled_charsmap")));
  }
  if (file.get_bool("tokenizer.ggml.remove_extra_whitespaces", true)) {
    normalizers.push_back(
        read_normalizer({{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", " "}}, path));
  }
  parts.normalizer = sequence_normalizer(std::move(normalizers));
  const bool prefix = file.get_bool("tokenizer.ggml.add_space_prefix", true);
  parts.pre_tokenizer = read_pre_tokenizer({{"type", "Metaspace"},
                                            {"replacement", "\u2581"},
                                            {"prepend_scheme", prefix ? "always" : "never"},
                                            {"split", true}},
                                           path);

  std::vector<bool> is_special(tokens.size(), false);
  for (size_t i = 0; i < tokens.size(); ++i) is_special[i] = types[i] == kTokenControl || types[i] == kTokenUnknown;
  for (const char* key :
       {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id",
        "tokenizer.ggml.mask_token_id"}) {
    if (const auto id = special_id(key)) is_special[static_cast<size_t>(*id)] = true;
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!is_special[i] && types[i] != kTokenUserDefined) continue;
    AddedToken t;
    t.content = pieces[i].first;
    t.id = static_cast<int32_t>(i);
    t.special = is_special[i];
    parts.added_tokens.push_back(std::move(t));
  }
  const std::optional<int32_t> bos = special_id("tokenizer.ggml.bos_token_id");
  const std::optional<int32_t> sep = file.has("tokenizer.ggml.seperator_token_id")
                                         ? special_id("tokenizer.ggml.seperator_token_id")
                                         : special_id("tokenizer.ggml.eos_token_id");
  const bool add_bos = file.get_bool("tokenizer.ggml.add_bos_token", true);
  const bool add_eos = file.get_bool("tokenizer.ggml.add_eos_token", true);
  if (add_bos || add_eos) {
    if (add_bos != add_eos) {
      throw Error(path +
                  ": tokenizer.ggml.add_bos_token and add_eos_token differ; XLM-RoBERTa's template adds both "
                  "<s> and </s> (or neither), so headscope cannot tell which template this file means");
    }
    if (!bos || !sep) {
      throw Error(path +
                  ": an XLM-RoBERTa vocabulary that adds <s> … </s> needs tokenizer.ggml.bos_token_id and "
                  "seperator_token_id (or eos_token_id)");
    }
    const auto template_piece = [&](int32_t id) {
      TemplatePiece p;
      p.ids = {id};
      p.tokens = {pieces[static_cast<size_t>(id)].first};
      return p;
    };
    TemplatePiece sequence;
    sequence.is_sequence = true;
    parts.post_processor.single = {template_piece(*bos), sequence, template_piece(*sep)};
  }
  parts.model = std::make_unique<Unigram>(pieces, unk, false, path);
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace

// A WordPiece vocabulary ("bert"), as llama.cpp's converter writes it (convert_hf_to_gguf.py
// BertModel.set_vocab): every piece of vocab.txt in id order, control pieces ([CLS], [SEP], …) as
// they are, continuation pieces without their "##", and word-initial pieces behind a phantom space
// "▁" ("the" → "▁the", "##ing" → "ing"). We undo that spelling and rebuild BERT's tokenizer.json
// (BertNormalizer, BertPreTokenizer, WordPiece with "##", [CLS] $A [SEP]), so that ids and
// offsets are those of the model's own tokenizer.json. What the file does not record is BERT's:
// clean_text and handle_chinese_chars on, 100 characters at most per word. Lowercasing is
// tokenizer.ggml.normalizer.lowercase; files written before that key (2025) lowercase when no
// piece holds an ASCII capital (an uncased vocabulary). Accents are stripped as
// tokenizer.ggml.normalizer.strip_accents says, or when absent as lowercasing does (BERT's rule).
nlohmann::json wordpiece_json_from_gguf(const io::GgufFile& file) {
  const std::string& path = file.path();
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  check_count(file, "tokenizer.ggml.tokens", tokens.size(), limits::kMaxVocabulary);
  const std::vector<int64_t> types = token_types(file, tokens.size());
  const auto special_id = [&](const char* key) -> int64_t {
    const int64_t id = file.get_int(key);
    if (id < 0 || id >= static_cast<int64_t>(tokens.size())) {
      throw Error(path + ": " + key + " is " + std::to_string(id) + ", outside the " + std::to_string(tokens.size()) +
                  " tokens");
    }
    return id;
  };
  constexpr std::string_view kPhantomSpace = "\u2581";  // "▁"
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  bool capitals = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (const int64_t bad = unicode::find_invalid_utf8(t); bad >= 0) {
      throw Error(path + ": tokenizer.ggml.tokens entry " + std::to_string(i) + " is not valid UTF-8 (byte " +
                  std::to_string(bad) + "); the file is corrupt");
    }
    std::string piece;
    if (types[i] == kTokenControl) {
      piece = t;
      added.push_back({{"id", static_cast<int64_t>(i)},
                       {"content", t},
                       {"special", true},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false}});
    } else {
      piece = t.starts_with(kPhantomSpace) ? t.substr(kPhantomSpace.size()) : "##" + t;
      capitals = capitals || std::any_of(t.begin(), t.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    }
    vocab[piece] = static_cast<int64_t>(i);
  }
  const bool lowercase = file.get_bool("tokenizer.ggml.normalizer.lowercase", !capitals);
  nlohmann::json strip = nullptr;
  if (file.has("tokenizer.ggml.normalizer.strip_accents"))
    strip = file.get_bool("tokenizer.ggml.normalizer.strip_accents");
  if (!file.has("tokenizer.ggml.unknown_token_id"))
    throw Error(path + ": a 'bert' vocabulary needs tokenizer.ggml.unknown_token_id");
  const std::string unk = tokens[static_cast<size_t>(special_id("tokenizer.ggml.unknown_token_id"))];
  // [CLS] is the converter's bos; [SEP] its seperator (llama.cpp's spelling of the key), else eos.
  nlohmann::json single = nlohmann::json::array(), specials = nlohmann::json::object();
  const auto template_token = [&](const char* key) {
    const std::string& content = tokens[static_cast<size_t>(special_id(key))];
    specials[content] = {{"id", content}, {"ids", {special_id(key)}}, {"tokens", {content}}};
    return nlohmann::json{{"SpecialToken", {{"id", content}, {"type_id", 0}}}};
  };
  if (file.get_bool("tokenizer.ggml.add_bos_token", true) && file.has("tokenizer.ggml.bos_token_id"))
    single.push_back(template_token("tokenizer.ggml.bos_token_id"));
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  const char* sep = file.has("tokenizer.ggml.seperator_token_id") ? "tokenizer.ggml.seperator_token_id"
                    : file.has("tokenizer.ggml.eos_token_id")     ? "tokenizer.ggml.eos_token_id"
                                                                  : nullptr;
  if (sep &&
      (file.get_bool("tokenizer.ggml.add_eos_token", false) || file.get_bool("tokenizer.ggml.add_sep_token", true)))
    single.push_back(template_token(sep));
  return {{"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", strip},
            {"lowercase", lowercase}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", unk},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", uint64_t{100}},
            {"vocab", vocab}}}};
}

nlohmann::json tokenizer_json_from_gguf(const io::GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model", "");
  if (model != "gpt2") {
    throw Error(file.path() + ": tokenizer.ggml.model '" + model +
                "' is not supported (byte-level BPE 'gpt2', SentencePiece 'llama' and WordPiece 'bert' are); use the "
                "model's Hugging "
                "Face folder instead");
  }
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto check_count = [&](const char* key, size_t n, int64_t limit) {
    if (n > static_cast<size_t>(limit)) {
      throw ResourceError(file.path() + ": " + key + " has " + std::to_string(n) + " entries, more than the " +
                          std::to_string(limit) + " allowed");
    }
  };
  check_count("tokenizer.ggml.tokens", tokens.size(), limits::kMaxVocabulary);
  std::vector<int64_t> types;
  if (file.has("tokenizer.ggml.token_type")) types = file.get_int_array("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != tokens.size()) {
    throw Error(file.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                std::to_string(tokens.size()) + " tokens");
  }
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::u32string chars = unicode::decode_utf8(tokens[i], file.path() + " token " + std::to_string(i)).chars;
    const bool spelled = is_byte_level_spelling(chars);
    // Tokens written as plain text are respelled in the byte alphabet, as transformers does.
    std::string entry;
    if (spelled) {
      entry = tokens[i];
    } else {
      for (unsigned char b : tokens[i]) unicode::append_utf8(byte_to_char(b), entry);
    }
    vocab[entry] = static_cast<int64_t>(i);
    const int64_t type = types.empty() ? 1 : types[i];
    if ((type == kTokenControl && spelled) || type == kTokenUserDefined) {
      added.push_back({{"id", static_cast<int64_t>(i)},
                       {"content", tokens[i]},
                       {"special", type == kTokenControl},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false}});
    }
  }
  nlohmann::json merges = nlohmann::json::array();
  if (file.has("tokenizer.ggml.merges")) {
    const std::vector<std::string> list = file.get_string_array("tokenizer.ggml.merges");
    check_count("tokenizer.ggml.merges", list.size(), limits::kMaxBpeMerges);
    for (const std::string& m : list) merges.push_back(m);
  }
  nlohmann::json pre;
  if (const char* pattern = split_pattern_for(file.get_string("tokenizer.ggml.pre", ""))) {
    pre = {{"type", "Sequence"},
           {"pretokenizers",
            {{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
             {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  } else {
    pre = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  }
  return {{"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", pre},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"vocab", vocab},
            {"merges", merges},
            {"byte_fallback", false},
            {"ignore_merges", false},
            {"unk_token", nullptr}}}};
}

// RoBERTa as llama.cpp's converter writes it (RobertaModel.set_vocab: general.architecture "bert",
// a "gpt2" vocabulary): the byte-level BPE above with RoBERTa's template <s> $A </s>, read as
// RobertaProcessing over tokenizer.ggml.bos_token_id and seperator_token_id (else eos_token_id).
// The converter records that the template is added (add_bos_token and add_eos_token, both true
// for RobertaProcessing) but not its trim_offsets or add_prefix_space, nor the pre-tokenizer's
// add_prefix_space: those are roberta-base's (trim on, no prefix space). Nor does it keep an added
// token's lstrip (roberta-base's <mask> has it): every added token matches as written.
nlohmann::json roberta_json_from_gguf(const io::GgufFile& file) {
  nlohmann::json j = tokenizer_json_from_gguf(file);
  const std::string& path = file.path();
  const bool bos = file.get_bool("tokenizer.ggml.add_bos_token", true);
  const bool eos = file.get_bool("tokenizer.ggml.add_eos_token", true);
  if (!bos && !eos) return j;
  if (bos != eos) {
    throw Error(path +
                ": tokenizer.ggml.add_bos_token and add_eos_token differ; RoBERTa's template adds both "
                "<s> and </s> (or neither), so headscope cannot tell which template this file means");
  }
  const std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  const auto special = [&](const char* key) {
    if (!file.has(key)) throw Error(path + ": a RoBERTa vocabulary that adds <s> … </s> needs " + key);
    const int64_t id = file.get_int(key);
    if (id < 0 || id >= static_cast<int64_t>(tokens.size())) {
      throw Error(path + ": " + key + " is " + std::to_string(id) + ", outside the " + std::to_string(tokens.size()) +
                  " tokens");
    }
    return nlohmann::json::array({tokens[static_cast<size_t>(id)], id});
  };
  const char* sep = file.has("tokenizer.ggml.seperator_token_id") ? "tokenizer.ggml.seperator_token_id"
                                                                  : "tokenizer.ggml.eos_token_id";
  j["post_processor"] = {{"type", "RobertaProcessing"},
                         {"sep", special(sep)},
                         {"cls", special("tokenizer.ggml.bos_token_id")},
                         {"trim_offsets", true},
                         {"add_prefix_space", false}};
  return j;
}

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& file) {
  const std::string model = file.get_string("tokenizer.ggml.model", "");
  if (model == "llama") return sentencepiece_from_gguf(file);
  if (model == "bert") return from_json(wordpiece_json_from_gguf(file), file.path());
  if (model == "t5" && file.get_string("general.architecture", "") == "bert") return xlmr_from_gguf(file);
  if (model == "gpt2" && file.get_string("general.architecture", "") == "bert")
    return from_json(roberta_json_from_gguf(file), file.path());
  return from_json(tokenizer_json_from_gguf(file), file.path());
}

}  // namespace headscope::tokenizer
