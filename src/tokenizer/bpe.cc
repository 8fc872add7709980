// headscope — BPE model (tokenizers/src/models/bpe/model.rs and word.rs).
#include "tokenizer/bpe.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

Bpe::Bpe(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
         const std::string& source)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [left, right] = merges[r];
    const auto l = vocab_.find(left), rr = vocab_.find(right), m = vocab_.find(left + right);
    if (!l || !rr || !m) {
      throw Error(source + ": merge " + std::to_string(r) + " '" + left + " " + right +
                  "' uses a token missing from the vocabulary; the file is inconsistent");
    }
    // A pair listed twice keeps its first (best) rank, as the library's map does.
    merges_.try_emplace(pair_key(*l, *rr), Merge{static_cast<int32_t>(r), *m});
  }
  set_up_options(source);
}

Bpe::Bpe(Vocab vocab, const std::vector<IdMerge>& merges, BpeOptions options, const std::string& source)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    merges_.try_emplace(pair_key(merges[r].left, merges[r].right), Merge{static_cast<int32_t>(r), merges[r].merged});
  }
  set_up_options(source);
}

void Bpe::set_up_options(const std::string& source) {
  if (options_.unk_token) {
    unk_id_ = vocab_.find(*options_.unk_token);
    if (!unk_id_) throw Error(source + ": unk_token '" + *options_.unk_token + "' is not in the vocabulary");
  }
  if (options_.byte_fallback) {
    byte_ids_.assign(256, -1);
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (const auto id = vocab_.find(name)) byte_ids_[static_cast<size_t>(b)] = *id;
    }
  }
}

void Bpe::tokenize(const NormalizedString& word, std::vector<ModelToken>& out) const {
  const std::u32string& chars = word.chars();
  std::string text;
  if (options_.ignore_merges) {
    text = unicode::to_utf8(chars);
    if (const auto id = vocab_.find(text)) {
      out.push_back({*id, 0, chars.size()});
      return;
    }
  }

  // One symbol per character (or per byte, with byte fallback), linked as a list.
  struct Symbol {
    int32_t id;
    int64_t prev, next;
    size_t first, last;  // characters of the word
    bool alive;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(chars.size());
  const auto add = [&](int32_t id, size_t first, size_t last) {
    const int64_t index = static_cast<int64_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, first, last, true});
  };
  // A pending unknown run [first, last), emitted before the next known symbol (the library's order).
  std::optional<std::pair<size_t, size_t>> unk;
  const auto flush_unk = [&] {
    if (unk) add(*unk_id_, unk->first, unk->second);
    unk.reset();
  };
  for (size_t i = 0; i < chars.size(); ++i) {
    text.clear();
    unicode::append_utf8(chars[i], text);
    if (const auto id = vocab_.find(text)) {
      flush_unk();
      add(*id, i, i + 1);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char b : text) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : text) add(byte_ids_[b], i, i + 1);
        continue;
      }
    }
    if (!unk_id_) continue;  // no unknown token: the library drops the character
    if (unk && options_.fuse_unk) {
      unk->second = i + 1;
    } else {
      flush_unk();
      unk = std::make_pair(i, i + 1);
    }
  }
  flush_unk();
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // Lowest rank first, then leftmost position (word.rs, Merge's ordering).
  struct Candidate {
    int32_t rank;
    int64_t pos;
    int32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto consider = [&](int64_t pos) {
    const Symbol& s = symbols[static_cast<size_t>(pos)];
    if (s.next < 0) return;
    const auto it = merges_.find(pair_key(s.id, symbols[static_cast<size_t>(s.next)].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (int64_t pos = 0; pos + 1 < static_cast<int64_t>(symbols.size()); ++pos) consider(pos);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    // Skip entries made stale by an earlier merge of either symbol.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;
    left.id = top.id;
    left.last = right.last;
    left.next = right.next;
    right.alive = false;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back({s.id, s.first, s.last});
  }
}

std::unique_ptr<Model> read_bpe_model(const nlohmann::json& model, const std::string& path) {
  const auto null_or_empty = [&](const char* key) {
    return !model.contains(key) || model.at(key).is_null() || model.at(key).get<std::string>().empty();
  };
  if (!null_or_empty("continuing_subword_prefix") || !null_or_empty("end_of_word_suffix")) {
    throw Error(path + ": BPE with continuing_subword_prefix / end_of_word_suffix is not supported");
  }
  if (model.contains("dropout") && !model.at("dropout").is_null() && model.at("dropout").get<double>() > 0.0) {
    throw Error(path + ": BPE dropout makes tokenization random; set \"dropout\" to null to use this file");
  }
  if (!model.contains("vocab") || !model.at("vocab").is_object())
    throw Error(path + ": BPE model has no \"vocab\" object");
  Vocab vocab = read_vocab(model.at("vocab"), "model.vocab", path);

  std::vector<std::pair<std::string, std::string>> merges;
  if (model.contains("merges")) {
    const nlohmann::json& list = model.at("merges");
    if (list.size() > static_cast<size_t>(limits::kMaxBpeMerges)) {
      throw ResourceError(path + ": model.merges has " + std::to_string(list.size()) + " entries, more than the " +
                          std::to_string(limits::kMaxBpeMerges) + " allowed");
    }
    merges.reserve(list.size());
    for (const nlohmann::json& m : list) {
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          throw Error(path + ": merge '" + s + "' is not two tokens separated by one space");
        }
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        throw Error(path + ": every merge must be \"left right\" or [left, right]");
      }
    }
  }
  BpeOptions options;
  options.byte_fallback = model.value("byte_fallback", false);
  options.ignore_merges = model.value("ignore_merges", false);
  options.fuse_unk = model.value("fuse_unk", false);
  if (model.contains("unk_token") && model.at("unk_token").is_string())
    options.unk_token = model.at("unk_token").get<std::string>();
  return std::make_unique<Bpe>(std::move(vocab), merges, std::move(options), path);
}

DecodeStyle decode_style_of(const nlohmann::json& decoder) {
  if (!decoder.is_object() || !decoder.contains("type")) return DecodeStyle::kConcatenate;
  const std::string type = decoder.at("type").get<std::string>();
  if (type == "ByteLevel") return DecodeStyle::kByteLevel;
  if (type == "Metaspace" || type == "ByteFallback") return DecodeStyle::kSentencePiece;
  if (type == "WordPiece") return DecodeStyle::kWordPiece;
  if (type == "Replace" && decoder.contains("pattern") && decoder["pattern"].value("String", "") == "\u2581") {
    return DecodeStyle::kSentencePiece;
  }
  if (type == "Sequence" && decoder.contains("decoders") && decoder.at("decoders").is_array()) {
    // A '▁' → ' ' Replace keeps the first space unless a Strip step follows (Llama 2 has one, Gemma not).
    bool replace = false, strip = false;
    for (const nlohmann::json& d : decoder.at("decoders")) {
      const std::string t = d.is_object() ? d.value("type", "") : "";
      strip = strip || t == "Strip";
      replace = replace || t == "Replace";
    }
    for (const nlohmann::json& d : decoder.at("decoders")) {
      const DecodeStyle style = decode_style_of(d);
      if (style == DecodeStyle::kSentencePiece && replace && !strip) return DecodeStyle::kSentencePieceKeepSpace;
      if (style != DecodeStyle::kConcatenate) return style;
    }
  }
  return DecodeStyle::kConcatenate;
}

std::string decode_token_texts(DecodeStyle style, const std::vector<std::string>& token_texts) {
  std::string out;
  for (size_t k = 0; k < token_texts.size(); ++k) {
    const std::string& t = token_texts[k];
    switch (style) {
      case DecodeStyle::kByteLevel:
        for (char32_t c : unicode::decode_utf8(t, "token").chars) {
          const int b = char_to_byte(c);
          if (b >= 0) {
            out.push_back(static_cast<char>(b));
          } else {
            unicode::append_utf8(c, out);  // added tokens stored as plain text
          }
        }
        break;
      case DecodeStyle::kSentencePiece:
      case DecodeStyle::kSentencePieceKeepSpace: {
        unsigned byte = 0;
        if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t[5] == '>' && std::sscanf(t.c_str() + 3, "%2X", &byte) == 1) {
          out.push_back(static_cast<char>(byte));
          break;
        }
        for (size_t i = 0; i < t.size(); ++i) {
          if (t.compare(i, 3, "\u2581") == 0) {
            out.push_back(' ');
            i += 2;
          } else {
            out.push_back(t[i]);
          }
        }
        break;
      }
      case DecodeStyle::kWordPiece:
        if (t.rfind("##", 0) == 0) {
          out += t.substr(2);
        } else {
          if (k > 0) out.push_back(' ');
          out += t;
        }
        break;
      case DecodeStyle::kConcatenate:
        out += t;
        break;
    }
  }
  if (style == DecodeStyle::kSentencePiece && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace headscope::tokenizer
