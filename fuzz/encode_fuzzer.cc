// libFuzzer target: arbitrary bytes as the text to encode with the default model's real tokenizer
// (WordPiece, BERT normalizer): invalid UTF-8, control characters, combining marks, very long
// words. Encodings must be refused with Error or be consistent (spans inside the text, in order).
#include <cstdlib>

#include "fuzz_support.h"
#include "headscope/tokenizer.h"

namespace {
const headscope::Tokenizer& tokenizer() {
  static const auto tok = headscope::Tokenizer::from_model_dir(headscope::fuzz::default_model_dir());
  return *tok;
}
}  // namespace

// The tokenizer is read once here, before libFuzzer starts timing inputs.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz::expect_ok_or_error([&] {
    EncodeOptions options;
    options.max_length = 512;
    options.truncate = (size % 2) == 0;
    const Encoding e = tokenizer().encode(text, options);
    int64_t last_end = 0;
    for (const Token& t : e.tokens) {
      if (t.special) continue;
      // Every piece covers bytes of the text, in order, and ids are inside the vocabulary.
      if (t.begin < 0 || t.end < t.begin || t.end > static_cast<int64_t>(size) || t.begin < last_end - 64) std::abort();
      if (t.id < 0 || t.id >= tokenizer().vocab_size()) std::abort();
      last_end = t.end;
    }
    (void)tokenizer().decode(e.ids());
  });
  return 0;
}
