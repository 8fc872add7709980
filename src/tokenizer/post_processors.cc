// headscope — post-processors, following tokenizers/src/processors/*.rs; see post_processors.h.
#include "tokenizer/post_processors.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "tokenizer/unicode.h"

namespace headscope::tokenizer {

PostProcessor read_template_processing(const nlohmann::json& post, const std::string& path) {
  const nlohmann::json& specials = post.at("special_tokens");
  PostProcessor out;
  bool has_sequence = false;
  for (const nlohmann::json& item : post.at("single")) {
    TemplatePiece piece;
    if (item.contains("Sequence")) {
      if (item["Sequence"].value("id", "A") != "A") {
        throw Error(path + ": post_processor \"single\" template refers to sequence B");
      }
      piece.is_sequence = true;
      has_sequence = true;
    } else if (item.contains("SpecialToken")) {
      const std::string name = item["SpecialToken"].at("id").get<std::string>();
      if (!specials.contains(name)) {
        throw Error(path + ": post_processor template uses special token '" + name +
                    "' which is missing from its \"special_tokens\"");
      }
      const nlohmann::json& sp = specials.at(name);
      for (const nlohmann::json& id : sp.at("ids")) {
        piece.ids.push_back(
            read_token_id(id, limits::kMaxVocabulary, "post_processor special token '" + name + "'", path));
      }
      piece.tokens = sp.at("tokens").get<std::vector<std::string>>();
      if (piece.ids.size() != piece.tokens.size()) {
        throw Error(path + ": special token '" + name + "' has " + std::to_string(piece.ids.size()) + " ids but " +
                    std::to_string(piece.tokens.size()) + " tokens");
      }
    } else {
      throw Error(path + ": post_processor template piece is neither Sequence nor SpecialToken");
    }
    out.single.push_back(std::move(piece));
  }
  if (!has_sequence) throw Error(path + ": post_processor \"single\" template has no $A sequence");
  return out;
}

PostProcessor read_bert_processing(const nlohmann::json& post, const std::string& path) {
  // {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}  ->  [CLS] $A [SEP]
  const auto special = [&](const char* key) {
    const nlohmann::json& pair = post.at(key);
    if (!pair.is_array() || pair.size() != 2) {
      throw Error(path + ": post_processor \"" + key + "\" must be [token, id]");
    }
    TemplatePiece piece;
    piece.tokens = {pair[0].get<std::string>()};
    piece.ids = {read_token_id(pair[1], limits::kMaxVocabulary, std::string("post_processor \"") + key + "\"", path)};
    return piece;
  };
  PostProcessor out;
  out.single.push_back(special("cls"));
  out.single.push_back(TemplatePiece{true, {}, {}});
  out.single.push_back(special("sep"));
  return out;
}

PostProcessor read_byte_level_processing(const nlohmann::json& spec, const std::string&) {
  PostProcessor out;
  out.trim_offsets = spec.value("trim_offsets", true);
  out.trim_keeps_prefix_space = spec.value("add_prefix_space", true);
  return out;
}

PostProcessor read_sequence_processing(const nlohmann::json& spec, const std::string& path) {
  // Only two effects exist in the processors we read: offset trimming and a template. They commute
  // (the template's special tokens have empty spans), so their union is the sequence.
  PostProcessor out;
  for (const nlohmann::json& step : spec.at("processors")) {
    if (step.is_null()) continue;
    PostProcessor p = read_post_processor(step, path);
    if (p.trim_offsets) {
      out.trim_offsets = true;
      out.trim_keeps_prefix_space = p.trim_keeps_prefix_space;
    }
    if (!p.single.empty()) {
      if (!out.single.empty()) throw Error(path + ": post_processor Sequence has two templates");
      out.single = std::move(p.single);
    }
  }
  return out;
}

PostProcessor read_roberta_processing(const nlohmann::json& spec, const std::string& path) {
  // {"sep": ["</s>", 2], "cls": ["<s>", 0], "trim_offsets": true, "add_prefix_space": true}
  PostProcessor out = read_bert_processing(spec, path);
  out.trim_offsets = spec.value("trim_offsets", true);
  out.trim_keeps_prefix_space = spec.value("add_prefix_space", true);
  return out;
}

void trim_byte_level_offsets(std::string_view text, std::vector<Token>& tokens, bool keeps_prefix_space) {
  constexpr char32_t kSpaceChar = U'\u0120';  // 'Ġ', the byte-level character of ' '
  const auto is_char_start = [&](int64_t b) {
    return b >= static_cast<int64_t>(text.size()) ||
           (static_cast<unsigned char>(text[static_cast<size_t>(b)]) & 0xC0) != 0x80;
  };
  const auto forward = [&](int64_t b, int64_t chars) {  // `chars` characters after byte b
    for (; chars > 0 && b < static_cast<int64_t>(text.size()); --chars) {
      ++b;
      while (!is_char_start(b)) ++b;
    }
    return b;
  };
  const auto backward = [&](int64_t b, int64_t chars) {  // `chars` characters before byte b
    for (; chars > 0 && b > 0; --chars) {
      --b;
      while (b > 0 && !is_char_start(b)) --b;
    }
    return b;
  };
  // Whether at least `n` characters start before byte b: walks back at most n characters, so a
  // text of many space tokens stays linear (counting from the start was quadratic).
  const auto has_chars_before = [&](int64_t b, int64_t n) {
    for (int64_t i = b - 1; i >= 0 && n > 0; --i) n -= is_char_start(i);
    return n <= 0;
  };
  std::u32string chars;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Token& t = tokens[i];
    chars = unicode::decode_utf8(t.text, "token").chars;
    const auto is_space = [&](char32_t c) { return c == kSpaceChar || unicode::is_whitespace(c); };
    int64_t leading = 0, trailing = 0;
    while (leading < static_cast<int64_t>(chars.size()) && is_space(chars[static_cast<size_t>(leading)])) ++leading;
    while (trailing < static_cast<int64_t>(chars.size()) &&
           is_space(chars[chars.size() - 1 - static_cast<size_t>(trailing)])) {
      ++trailing;
    }
    if (leading > 0) {
      // The space added by add_prefix_space in front of the text is part of the first token.
      const bool is_first = i == 0 || t.begin == 0;
      if (is_first && keeps_prefix_space && leading == 1) leading = 0;
      t.begin = std::min(forward(t.begin, leading), t.end);
    }
    if (trailing > 0 && has_chars_before(t.end, trailing)) t.end = std::max(backward(t.end, trailing), t.begin);
  }
}

}  // namespace headscope::tokenizer
