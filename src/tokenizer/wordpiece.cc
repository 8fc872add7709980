// headscope — BertNormalizer, BertPreTokenizer, WordPiece and the vocab.txt reader.
#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {
namespace {

// BERT counts tab, newline and carriage return as whitespace although Unicode calls them controls.
bool is_bert_whitespace(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || unicode::is_whitespace(c); }

bool is_bert_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return unicode::is_legacy_other(c);
}

// The CJK Unified Ideographs blocks (and their extensions and compatibility blocks) that BERT
// isolates; Hangul, Hiragana and Katakana are not in them and are split on spaces like Latin.
bool is_chinese_char(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_bert_punctuation(char32_t c) { return unicode::is_ascii_punctuation(c) || unicode::is_legacy_punctuation(c); }

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > static_cast<uintmax_t>(limits::kMaxTokenizerFileBytes)) {
    throw ResourceError(path + ": " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(limits::kMaxTokenizerFileBytes) + " a tokenizer file may have");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token name in tokenizer_config.json: a string, or {"content": ...} as newer files write it.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key, const char* fallback) {
  if (!config.contains(key)) return std::string(fallback);
  const nlohmann::json& v = config.at(key);
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return std::string(fallback);
}

}  // namespace

// ---- BertNormalizer ----

void BertNormalizer::normalize(NormalizedString& text) const {
  if (options_.clean_text) {
    text.filter([](char32_t c) { return !(c == 0 || c == 0xFFFD || is_bert_control(c)); });
    text.map([](char32_t c) { return is_bert_whitespace(c) ? U' ' : c; });
  }
  if (options_.handle_chinese_chars) {
    // An ideograph is replaced by a space, itself and a space: all three keep its alignment.
    bool any = false;
    for (char32_t c : text.chars()) any = any || is_chinese_char(c);
    if (any) {
      std::vector<CharChange> dest;
      dest.reserve(text.size() + 16);
      for (char32_t c : text.chars()) {
        if (is_chinese_char(c)) {
          dest.push_back({U' ', 0});
          dest.push_back({c, 1});
          dest.push_back({U' ', 1});
        } else {
          dest.push_back({c, 0});
        }
      }
      text.transform(dest, 0);
    }
  }
  if (options_.strip_accents.value_or(options_.lowercase)) {
    text.nfd();
    text.filter([](char32_t c) { return !unicode::is_legacy_nonspacing_mark(c); });
  }
  if (options_.lowercase) text.lowercase();
}

// ---- BertPreTokenizer ----

void BertPreTokenizer::pre_tokenize(const NormalizedString& piece, std::vector<NormalizedString>& words) const {
  const std::u32string& s = piece.chars();
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool space = unicode::is_whitespace(s[i]);
    const bool punct = !space && is_bert_punctuation(s[i]);
    if (!space && !punct) continue;
    if (start < i) words.push_back(piece.slice(start, i));
    if (punct) words.push_back(piece.slice(i, i + 1));
    start = i + 1;
  }
  if (start < s.size()) words.push_back(piece.slice(start, s.size()));
}

// ---- WordPiece ----

WordPiece::WordPiece(Vocab vocab, WordPieceOptions options, const std::string& source)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  const std::optional<int32_t> unk = vocab_.find(options_.unk_token);
  if (!unk) {
    throw Error(source + ": the WordPiece unknown token '" + options_.unk_token + "' is not in the vocabulary");
  }
  unk_id_ = *unk;
  for (const auto& [token, id] : vocab_.ids) max_entry_bytes_ = std::max(max_entry_bytes_, token.size());
}

void WordPiece::tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const {
  const std::u32string& chars = word.chars();
  const size_t n = chars.size();
  if (n > options_.max_input_chars_per_word) {
    out.push_back({unk_id_, 0, n});
    return;
  }
  std::string utf8;
  utf8.reserve(n * 2);
  std::vector<size_t> byte_at(n + 1);  // byte offset of each character in utf8, plus the end
  for (size_t i = 0; i < n; ++i) {
    byte_at[i] = utf8.size();
    unicode::append_utf8(chars[i], utf8);
  }
  byte_at[n] = utf8.size();

  const size_t first_out = out.size();
  const std::string& prefix = options_.continuing_subword_prefix;
  std::string candidate;
  size_t start = 0;
  while (start < n) {
    std::optional<int32_t> found;
    // Start from the longest piece that can fit in the longest entry, so a long word costs
    // O(length x longest entry) lookups instead of O(length^2).
    const size_t prefix_bytes = start > 0 ? prefix.size() : 0;
    const size_t room = max_entry_bytes_ > prefix_bytes ? max_entry_bytes_ - prefix_bytes : 0;
    size_t end = static_cast<size_t>(std::upper_bound(byte_at.begin() + static_cast<std::ptrdiff_t>(start),
                                                      byte_at.end(), byte_at[start] + room) -
                                     byte_at.begin()) -
                 1;
    for (; end > start; --end) {
      const std::string_view piece(utf8.data() + byte_at[start], byte_at[end] - byte_at[start]);
      const size_t length = piece.size() + (start > 0 ? prefix.size() : 0);
      if (length > max_entry_bytes_) continue;  // longer than any entry: cannot match
      if (start > 0) {
        candidate.assign(prefix).append(piece);
        found = vocab_.find(candidate);
      } else {
        found = vocab_.find(piece);
      }
      if (found) break;
    }
    if (!found) {
      // Some part of the word has no entry: the whole word is one unknown token.
      out.resize(first_out);
      out.push_back({unk_id_, 0, n});
      return;
    }
    out.push_back({*found, start, end});
    start = end;
  }
}

// ---- readers ----

std::unique_ptr<Normalizer> read_bert_normalizer(const nlohmann::json& j, const std::string& path) {
  BertNormalizerOptions o;
  o.clean_text = j.value("clean_text", true);
  o.handle_chinese_chars = j.value("handle_chinese_chars", true);
  if (j.contains("strip_accents") && !j.at("strip_accents").is_null())
    o.strip_accents = j.at("strip_accents").get<bool>();
  o.lowercase = j.value("lowercase", true);
  return std::make_unique<BertNormalizer>(o);
}

std::unique_ptr<PreTokenizer> read_bert_pre_tokenizer(const nlohmann::json&, const std::string&) {
  return std::make_unique<BertPreTokenizer>();
}

std::unique_ptr<Model> read_wordpiece_model(const nlohmann::json& j, const std::string& path) {
  if (!j.contains("vocab") || !j.at("vocab").is_object()) {
    throw Error(path + ": WordPiece model has no \"vocab\" object");
  }
  Vocab vocab = read_vocab(j.at("vocab"), "model.vocab", path);
  WordPieceOptions o;
  o.unk_token = j.value("unk_token", std::string("[UNK]"));
  o.continuing_subword_prefix = j.value("continuing_subword_prefix", std::string("##"));
  if (j.contains("max_input_chars_per_word") && !j.at("max_input_chars_per_word").is_number_unsigned()) {
    throw Error(path + ": model.max_input_chars_per_word must be a non-negative integer");
  }
  o.max_input_chars_per_word = j.value("max_input_chars_per_word", size_t{100});
  return std::make_unique<WordPiece>(std::move(vocab), std::move(o), path);
}

std::unique_ptr<Tokenizer> read_wordpiece_vocab_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string vocab_path = (fs::path(dir) / "vocab.txt").string();
  const std::string config_path = (fs::path(dir) / "tokenizer_config.json").string();

  // vocab.txt: one entry per line, the line number is the id (as transformers' load_vocab reads it).
  Vocab vocab;
  {
    const std::string text = read_text_file(vocab_path);
    const int64_t bad = unicode::find_invalid_utf8(text);
    if (bad >= 0) throw Error(vocab_path + ": not valid UTF-8 at byte offset " + std::to_string(bad));
    int32_t id = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string::npos) eol = text.size();
      std::string line = text.substr(pos, eol - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      // load_vocab strips trailing whitespace only ("\n"); keep the entry otherwise as written.
      vocab.add(std::move(line), id++);
      pos = eol + 1;
    }
    if (id == 0) throw Error(vocab_path + ": the vocabulary is empty");
  }

  nlohmann::json config = nlohmann::json::object();
  if (fs::exists(config_path)) {
    try {
      config = nlohmann::json::parse(read_text_file(config_path));
    } catch (const nlohmann::json::exception& e) {
      throw Error(config_path + ": not valid JSON (" + e.what() + ")");
    }
  }

  PipelineTokenizer::Parts parts;
  parts.source = vocab_path;
  try {
    BertNormalizerOptions n;
    n.lowercase = config.value("do_lower_case", true);
    n.handle_chinese_chars = config.value("tokenize_chinese_chars", true);
    if (config.contains("strip_accents") && !config.at("strip_accents").is_null()) {
      n.strip_accents = config.at("strip_accents").get<bool>();
    }
    parts.normalizer = std::make_unique<BertNormalizer>(n);
    parts.pre_tokenizer = std::make_unique<BertPreTokenizer>();

    const auto required = [&](const char* key, const char* fallback) {
      const std::optional<std::string> name = config_token(config, key, fallback);
      if (!name || !vocab.find(*name)) {
        throw Error(vocab_path + ": the " + key + " '" + name.value_or("") + "' is not in the vocabulary");
      }
      return *name;
    };
    const std::string unk = required("unk_token", "[UNK]");
    const std::string cls = required("cls_token", "[CLS]");
    const std::string sep = required("sep_token", "[SEP]");

    // Special tokens are matched literally in the text, before normalization.
    if (config.contains("added_tokens_decoder") && config.at("added_tokens_decoder").is_object()) {
      for (const auto& [id, entry] : config.at("added_tokens_decoder").items()) {
        AddedToken t;
        int64_t value = -1;
        const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), value);
        if (ec != std::errc() || end != id.data() + id.size()) {
          throw Error(config_path + ": added_tokens_decoder key '" + id + "' is not a token id");
        }
        t.id =
            read_token_id(nlohmann::json(value), static_cast<int64_t>(vocab.tokens.size()) + limits::kMaxVocabIdSlack,
                          "added_tokens_decoder entry '" + id + "'", config_path);
        t.content = entry.at("content").get<std::string>();
        t.special = entry.value("special", false);
        t.single_word = entry.value("single_word", false);
        t.lstrip = entry.value("lstrip", false);
        t.rstrip = entry.value("rstrip", false);
        t.normalized = entry.value("normalized", !t.special);
        parts.added_tokens.push_back(std::move(t));
      }
    } else {
      for (const auto& [key, fallback] : {std::pair{"pad_token", "[PAD]"},
                                          {"unk_token", "[UNK]"},
                                          {"cls_token", "[CLS]"},
                                          {"sep_token", "[SEP]"},
                                          {"mask_token", "[MASK]"}}) {
        const std::optional<std::string> name = config_token(config, key, fallback);
        if (!name) continue;
        const std::optional<int32_t> id = vocab.find(*name);
        if (!id) continue;
        AddedToken t;
        t.content = *name;
        t.id = *id;
        t.special = true;
        parts.added_tokens.push_back(std::move(t));
      }
    }

    PostProcessor post;
    post.single.push_back(TemplatePiece{false, {*vocab.find(cls)}, {cls}});
    post.single.push_back(TemplatePiece{true, {}, {}});
    post.single.push_back(TemplatePiece{false, {*vocab.find(sep)}, {sep}});
    parts.post_processor = std::move(post);

    WordPieceOptions w;
    w.unk_token = unk;
    parts.model = std::make_unique<WordPiece>(std::move(vocab), std::move(w), vocab_path);
  } catch (const nlohmann::json::exception& e) {
    throw Error(config_path + ": unexpected value (" + e.what() + ")");
  }
  return std::make_unique<PipelineTokenizer>(std::move(parts));
}

}  // namespace headscope::tokenizer
