// libFuzzer target: a tokenizer.json (model, normalizers, pre-tokenizers, post-processor, added
// tokens) → Tokenizer, then a fixed multilingual text encoded and decoded with it.
#include "fuzz_support.h"
#include "headscope/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  fuzz::expect_ok_or_error([&] {
    auto tok = Tokenizer::from_json_string({reinterpret_cast<const char*>(data), size}, "tokenizer.json");
    EncodeOptions options;
    options.max_length = 64;
    options.truncate = true;
    const Encoding e = tok->encode("The trophy didn't fit in the suitcase. Ünïcödé 東京 123 !!", options);
    (void)tok->decode(e.ids());
    for (const Token& t : e.tokens) (void)tok->token_text(t.id);
  });
  return 0;
}
