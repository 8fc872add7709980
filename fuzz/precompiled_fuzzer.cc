// libFuzzer target: SentencePiece's precompiled_charsmap (tokenizer/precompiled.h) as raw bytes,
// without the base64 and JSON around it, so that mutations land in the trie and its values.
//
//   bytes 0-1   n, little-endian: the blob's length (clipped to what is there)
//   n bytes     the blob: u32 trie size, the darts-clone units, the NUL-ended replacements
//   the rest    a text (as UTF-8; invalid text is refused before normalizing) normalised with it
//
// Also every prefix lookup of the text's bytes, and decode_base64 of the whole input read as text.
// A lying trie or value must throw Error, never read outside the blob, loop or grow without bound.
#include <algorithm>
#include <string>
#include <string_view>

#include "fuzz_support.h"
#include "tokenizer/normalized_string.h"
#include "tokenizer/precompiled.h"
#include "tokenizer/unicode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  using namespace headscope::tokenizer;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_error([&] { (void)decode_base64(input, "tokenizer.json"); });
  if (size < 2) return 0;
  const size_t n = std::min<size_t>(data[0] | (size_t(data[1]) << 8), size - 2);
  const std::string_view blob = input.substr(2, n), text = input.substr(2 + n);
  fuzz::expect_ok_or_error([&] {
    PrecompiledCharsmap charsmap(blob, "tokenizer.json");
    for (size_t i = 0; i < std::min<size_t>(text.size(), 64); ++i)
      fuzz::expect_ok_or_error([&] { (void)charsmap.lookup(text.substr(i)); });
    const PrecompiledNormalizer normalizer(std::move(charsmap));
    const unicode::DecodedText decoded = unicode::decode_utf8(text);
    NormalizedString s(decoded, 0, decoded.chars.size());
    normalizer.normalize(s);
    // Every character keeps an original span inside the text.
    for (size_t i = 0; i < s.size(); ++i)
      if (s.alignment(i).begin > s.alignment(i).end || s.alignment(i).end > int64_t(text.size())) std::abort();
  });
  return 0;
}
