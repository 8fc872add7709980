// headscope — PipelineTokenizer: added tokens, normalizer, pre-tokenizer, model, post-processor.
// The order of the steps and the rules for added tokens follow tokenizers/src/tokenizer/mod.rs
// and tokenizers/src/tokenizer/added_vocabulary.rs.
#include "tokenizer/pipeline.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/bpe.h"
#include "tokenizer/post_processors.h"

namespace headscope::tokenizer {

void Vocab::add(std::string token, int32_t id) {
  if (id < 0) throw Error("token '" + token + "' has a negative id " + std::to_string(id));
  if (id >= limits::kMaxVocabulary) {
    throw ResourceError("token '" + token + "' has the id " + std::to_string(id) + ", beyond the " +
                        std::to_string(limits::kMaxVocabulary) + " ids a vocabulary may have");
  }
  if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(static_cast<size_t>(id) + 1);
  tokens[static_cast<size_t>(id)] = token;
  ids.insert_or_assign(std::move(token), id);
}

size_t PostProcessor::added_count() const {
  size_t n = 0;
  for (const TemplatePiece& p : single) n += p.ids.size();
  return n;
}

void PipelineTokenizer::PatternSet::add(std::u32string text, size_t token) {
  if (text.empty()) return;  // the library ignores empty added tokens
  texts.push_back(std::move(text));
  tokens.push_back(token);
}

void PipelineTokenizer::PatternSet::index() {
  by_first_char.clear();
  for (size_t i = 0; i < texts.size(); ++i) by_first_char[texts[i][0]].push_back(i);
  for (auto& [c, list] : by_first_char) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) { return texts[a].size() > texts[b].size(); });
  }
}

PipelineTokenizer::PipelineTokenizer(Parts parts) : parts_(std::move(parts)) {
  if (!parts_.model) throw Error(parts_.source + ": the tokenizer has no model");
  id_to_text_ = parts_.model->vocab().tokens;
  // Added tokens may extend the vocabulary, by about their number (kMaxVocabIdSlack in limits.h).
  const int64_t id_limit =
      std::min<int64_t>(limits::kMaxVocabulary, static_cast<int64_t>(id_to_text_.size() + parts_.added_tokens.size()) +
                                                    limits::kMaxVocabIdSlack);
  for (size_t i = 0; i < parts_.added_tokens.size(); ++i) {
    const AddedToken& t = parts_.added_tokens[i];
    if (t.id < 0) throw Error(parts_.source + ": added token '" + t.content + "' has a negative id");
    if (t.id >= id_limit) {
      throw ResourceError(parts_.source + ": added token '" + t.content + "' has the id " + std::to_string(t.id) +
                          ", far beyond the vocabulary's " + std::to_string(id_to_text_.size()) + " ids (at most " +
                          std::to_string(id_limit - 1) + " allowed); the file is corrupt");
    }
    if (static_cast<size_t>(t.id) >= id_to_text_.size()) id_to_text_.resize(static_cast<size_t>(t.id) + 1);
    id_to_text_[static_cast<size_t>(t.id)] = t.content;
    const unicode::DecodedText content = unicode::decode_utf8(t.content, parts_.source + " added token");
    if (!t.normalized) {
      raw_patterns_.add(content.chars, i);
    } else {
      // Matched against normalized text, so look for the normalized form of the content.
      NormalizedString s(content, 0, content.chars.size());
      if (parts_.normalizer) parts_.normalizer->normalize(s);
      normalized_patterns_.add(s.chars(), i);
    }
  }
  raw_patterns_.index();
  normalized_patterns_.index();
  for (const TemplatePiece& p : parts_.post_processor.single) {
    for (int32_t id : p.ids) {
      if (id < 0 || static_cast<size_t>(id) >= id_to_text_.size()) {
        throw Error(parts_.source + ": post_processor special token id " + std::to_string(id) +
                    " is outside the vocabulary");
      }
    }
  }
}

void PipelineTokenizer::split_added(NormalizedString piece, const PatternSet& patterns, std::vector<Piece>& out) const {
  if (patterns.empty() || piece.empty()) {
    out.push_back({std::move(piece), -1});
    return;
  }
  const std::u32string& s = piece.chars();
  const size_t n = s.size();
  size_t kept_from = 0;  // start of the text not yet emitted
  size_t pos = 0;        // where the search for the next match starts
  while (pos < n) {
    // Leftmost match, longest among those that start there.
    size_t start = n, length = 0, pattern = 0;
    for (size_t i = pos; i < n && length == 0; ++i) {
      const auto it = patterns.by_first_char.find(s[i]);
      if (it == patterns.by_first_char.end()) continue;
      for (size_t k : it->second) {
        const std::u32string& p = patterns.texts[k];
        if (p.size() <= n - i && s.compare(i, p.size(), p) == 0) {
          start = i, length = p.size(), pattern = k;
          break;
        }
      }
    }
    if (length == 0) break;
    size_t stop = start + length;
    pos = stop;  // the search resumes after the match even when the match is discarded below
    const size_t token_index = patterns.tokens[pattern];
    const AddedToken& token = parts_.added_tokens[token_index];
    if (token.single_word) {
      const bool space_before = start == 0 || !unicode::is_regex_word(s[start - 1]);
      const bool space_after = stop == n || !unicode::is_regex_word(s[stop]);
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0 && unicode::is_whitespace(s[new_start - 1])) --new_start;
      start = std::max(new_start, kept_from);
    }
    if (token.rstrip) {
      while (stop < n && unicode::is_whitespace(s[stop])) ++stop;
    }
    if (kept_from < start) out.push_back({piece.slice(kept_from, start), -1});
    out.push_back({piece.slice(start, stop), static_cast<int64_t>(token_index)});
    kept_from = stop;
  }
  if (kept_from == 0) {
    out.push_back({std::move(piece), -1});
  } else if (kept_from < n) {
    out.push_back({piece.slice(kept_from, n), -1});
  }
}

Encoding PipelineTokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  try {
    return encode_unchecked(text, options);
  } catch (const ResourceError& e) {
    throw ResourceError(parts_.source + ": " + e.what());
  }
}

std::vector<Token> PipelineTokenizer::text_tokens(std::string_view text, size_t stop_after) const {
  const unicode::DecodedText decoded = unicode::decode_utf8(text);
  NormalizedString whole(decoded, 0, decoded.chars.size());
  const NormalizedString limit = whole.slice(0, 0);  // empty, with the whole text's size limit

  // 1. Added tokens in the raw text; 2. normalize the rest, then look for normalized added tokens.
  std::vector<Piece> raw_pieces;
  split_added(std::move(whole), raw_patterns_, raw_pieces);
  std::vector<Piece> pieces;
  size_t normalized_total = 0;  // all pieces together stay within the limit of the whole text
  for (Piece& p : raw_pieces) {
    if (p.added >= 0) {
      pieces.push_back(std::move(p));
      continue;
    }
    if (parts_.normalizer) parts_.normalizer->normalize(p.text);
    normalized_total += p.text.size();
    limit.check_size(normalized_total, "the normalizer");
    split_added(std::move(p.text), normalized_patterns_, pieces);
  }

  // 3. Pre-tokenize into words; 4. tokenize each word. Each added token and each word is a unit
  // of the word index.
  std::vector<Token> tokens;
  tokens.reserve(std::min<size_t>(text.size() / 3, stop_after > 0 ? stop_after : SIZE_MAX) + 4);
  int32_t word = 0;
  std::vector<NormalizedString> words;
  size_t word_total = 0;
  std::vector<ModelToken> model_tokens;
  for (const Piece& p : pieces) {
    if (stop_after > 0 && tokens.size() >= stop_after) break;
    if (p.text.empty()) continue;
    if (p.added >= 0) {
      const AddedToken& t = parts_.added_tokens[static_cast<size_t>(p.added)];
      const Span span = p.text.original_span(0, p.text.size());
      tokens.push_back({t.id, t.content, span.begin, span.end, false, word++});
      continue;
    }
    words.clear();
    if (parts_.pre_tokenizer) {
      parts_.pre_tokenizer->pre_tokenize(p.text, words);
    } else {
      words.push_back(p.text);
    }
    for (const NormalizedString& w : words) word_total += w.size();
    limit.check_size(word_total, "the pre-tokenizer");
    for (const NormalizedString& w : words) {
      if (stop_after > 0 && tokens.size() >= stop_after) break;
      if (w.empty()) continue;
      model_tokens.clear();
      parts_.model->tokenize(w, model_tokens);
      for (const ModelToken& mt : model_tokens) {
        const Span span = w.original_span(mt.first, mt.last);
        tokens.push_back({mt.id, id_to_text_[static_cast<size_t>(mt.id)], span.begin, span.end, false, word});
      }
      ++word;
    }
  }

  if (stop_after > 0 && tokens.size() > stop_after) tokens.resize(stop_after);
  if (parts_.post_processor.trim_offsets)
    trim_byte_level_offsets(text, tokens, parts_.post_processor.trim_keeps_prefix_space);
  return tokens;
}

namespace {

// Bytes of the first prefix leading_tokens encodes, beyond 16 per wanted token (real texts take
// 2-6 bytes per token), and how far before a prefix's end a token of its last word must end to
// count as settled.
constexpr size_t kPrefixSlackBytes = 4096;
constexpr int64_t kSettledDistanceBytes = 4096;
// Texts up to this size are encoded whole to say in an error how many tokens they have (a few MB
// of work at most; the server's texts are never longer).
constexpr size_t kCountWholeBytes = size_t{64} << 10;

// How many leading tokens of `shorter` (the tokens of text[0, cut)) are settled: the same in
// `longer` (the tokens of a prefix twice as long), and outside the last word of `shorter` or ending
// kSettledDistanceBytes before the cut. Only the words next to a cut can change when the text goes
// on: the normalizers, pre-tokenizers and added-token matching all decide from a few characters
// around a position, and the models work within one word.
size_t settled_tokens(const std::vector<Token>& shorter, const std::vector<Token>& longer, size_t cut) {
  if (shorter.empty()) return 0;
  const int32_t last_word = shorter.back().word;
  size_t n = 0;
  for (; n < shorter.size() && n < longer.size(); ++n) {
    const Token& a = shorter[n];
    const Token& b = longer[n];
    if (a.id != b.id || a.begin != b.begin || a.end != b.end || a.word != b.word) break;
    if (a.word == last_word && a.end + kSettledDistanceBytes > static_cast<int64_t>(cut)) break;
  }
  return n;
}

}  // namespace

std::vector<Token> PipelineTokenizer::leading_tokens(std::string_view text, size_t want) const {
  // The whole text must be valid UTF-8, as for a whole encoding (and with the same message).
  if (const int64_t bad = unicode::find_invalid_utf8(text); bad >= 0)
    unicode::decode_utf8(text.substr(0, static_cast<size_t>(bad) + 4));
  std::vector<Token> previous;
  size_t previous_cut = 0;
  for (size_t cut = kPrefixSlackBytes + 16 * want; cut < text.size(); cut *= 2) {
    while (cut < text.size() && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) ++cut;  // a whole character
    if (cut >= text.size()) break;
    std::vector<Token> current = text_tokens(text.substr(0, cut), 0);
    if (previous_cut > 0 && settled_tokens(previous, current, previous_cut) >= want) {
      previous.resize(want);
      return previous;
    }
    previous = std::move(current);
    previous_cut = cut;
  }
  return text_tokens(text, want);
}

Encoding PipelineTokenizer::encode_unchecked(std::string_view text, const EncodeOptions& options) const {
  // Steps 1-4. Under a length limit only the tokens up to one past it are made: enough to tell that
  // the text is too long, or to keep the first ones.
  const PostProcessor& post = parts_.post_processor;
  const size_t n_added = options.add_special_tokens ? post.added_count() : 0;
  Encoding encoding;
  std::vector<Token>& tokens = encoding.tokens;
  const size_t max_length = options.max_length > 0 ? static_cast<size_t>(options.max_length) : 0;
  tokens =
      max_length > 0 ? leading_tokens(text, max_length > n_added ? max_length - n_added + 1 : 1) : text_tokens(text, 0);

  // 5. Length check / truncation, then the template. Truncation keeps the template's special
  // tokens and cuts the text's tokens from the end, as the library does for a single sequence.
  const size_t total = tokens.size() + n_added;
  if (max_length > 0 && total > max_length) {
    if (!options.truncate) {
      // A short text is counted whole, so that the message says how far over it is; a long one
      // is only said to be over.
      if (text.size() > kCountWholeBytes)
        throw Error("text is longer than the " + std::to_string(options.max_length) +
                        " tokens the model allows (the template's special tokens included)",
                    Remedy::kTruncate);
      throw Error("text is " + std::to_string(text_tokens(text, 0).size() + n_added) +
                      " tokens, the model allows at most " + std::to_string(options.max_length),
                  Remedy::kTruncate);
    }
    if (static_cast<size_t>(options.max_length) < n_added) {
      throw Error("max_length " + std::to_string(options.max_length) + " cannot hold the " + std::to_string(n_added) +
                  " special tokens the template adds; use a larger max_length");
    }
    tokens.resize(static_cast<size_t>(options.max_length) - n_added);
    encoding.truncated = true;
  }
  if (n_added > 0) {
    std::vector<Token> with_specials;
    with_specials.reserve(total);
    for (const TemplatePiece& piece : post.single) {
      if (piece.is_sequence) {
        for (Token& t : tokens) with_specials.push_back(std::move(t));
        continue;
      }
      for (size_t i = 0; i < piece.ids.size(); ++i) {
        with_specials.push_back({piece.ids[i], piece.tokens[i], 0, 0, true, -1});
      }
    }
    tokens = std::move(with_specials);
  }
  return encoding;
}

std::string PipelineTokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_text_.size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary of " + parts_.source + " (ids 0.." +
                std::to_string(static_cast<int64_t>(id_to_text_.size()) - 1) + ")");
  }
  return id_to_text_[static_cast<size_t>(id)];
}

int32_t PipelineTokenizer::vocab_size() const { return static_cast<int32_t>(id_to_text_.size()); }

std::string PipelineTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> texts;
  texts.reserve(ids.size());
  for (int32_t id : ids) texts.push_back(token_text(id));
  return decode_token_texts(parts_.decode_style, texts);
}

// ---- readers ----

int32_t read_token_id(const nlohmann::json& value, int64_t limit, const std::string& what, const std::string& path) {
  limit = std::min(limit, limits::kMaxVocabulary);
  if (!value.is_number_integer()) throw Error(path + ": " + what + " has an id that is not an integer");
  // Unsigned JSON numbers above INT64_MAX read as negative here and are refused as such.
  const int64_t id = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                         ? -1
                         : value.get<int64_t>();
  if (id < 0) throw Error(path + ": " + what + " has a negative id " + value.dump());
  if (id >= limit) {
    throw ResourceError(path + ": " + what + " has the id " + std::to_string(id) + "; ids must be below " +
                        std::to_string(limit) + " (the number of entries plus " +
                        std::to_string(limits::kMaxVocabIdSlack) + ", at most " +
                        std::to_string(limits::kMaxVocabulary) + "); the file is corrupt");
  }
  return static_cast<int32_t>(id);
}

Vocab read_vocab(const nlohmann::json& vocab, const std::string& where, const std::string& path) {
  if (vocab.size() > static_cast<size_t>(limits::kMaxVocabulary)) {
    throw ResourceError(path + ": " + where + " has " + std::to_string(vocab.size()) + " entries, more than the " +
                        std::to_string(limits::kMaxVocabulary) + " a vocabulary may have");
  }
  const int64_t limit = static_cast<int64_t>(vocab.size()) + limits::kMaxVocabIdSlack;
  Vocab out;
  out.ids.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    out.add(token, read_token_id(id, limit, where + " entry '" + token + "'", path));
  }
  return out;
}

std::vector<AddedToken> read_added_tokens(const nlohmann::json& added, const std::string& path) {
  std::vector<AddedToken> out;
  if (added.is_null()) return out;
  if (!added.is_array()) throw Error(path + ": \"added_tokens\" must be a list");
  for (const nlohmann::json& entry : added) {
    if (!entry.is_object() || !entry.contains("content") || !entry.contains("id")) {
      throw Error(path + ": every entry of \"added_tokens\" needs \"content\" and \"id\"");
    }
    AddedToken t;
    t.content = entry.at("content").get<std::string>();
    t.id = read_token_id(entry.at("id"), limits::kMaxVocabulary, "added token '" + t.content + "'", path);
    t.special = entry.value("special", false);
    t.single_word = entry.value("single_word", false);
    t.lstrip = entry.value("lstrip", false);
    t.rstrip = entry.value("rstrip", false);
    t.normalized = entry.value("normalized", !t.special);  // the library's default
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace headscope::tokenizer
