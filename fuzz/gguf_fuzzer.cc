// libFuzzer target: a .gguf file (header, metadata of every value type, tensor infos, data) →
// GgufFile, every metadata value read through the typed getters, every small tensor dequantized,
// every family's hyper-parameters read from it (BERT, Llama, GPT-2, Phi-3), the WordPiece
// tokenizer.json rebuilt from a 'bert' vocabulary, and the tokenizer rebuilt from the metadata.
#include "fuzz_support.h"
#include "io/gguf.h"
#include "models/families.h"
#include "tokenizer/gguf_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  fuzz::MemFile file({reinterpret_cast<const char*>(data), size}, "model.gguf");
  fuzz::expect_ok_or_error([&] {
    io::GgufFile gguf(file.path());
    for (const std::string& key : gguf.keys()) {
      fuzz::expect_ok_or_error([&] { (void)gguf.get_string(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_int(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_float(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_bool(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_string_array(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_int_array(key); });
      fuzz::expect_ok_or_error([&] { (void)gguf.get_float_array(key); });
    }
    for (const std::string& name : gguf.tensor_names()) {
      fuzz::expect_ok_or_error([&] {
        const io::GgufTensorInfo& info = gguf.tensor(name);
        int64_t numel = 1;
        for (int64_t d : info.ne) numel = d > 0 && numel <= (int64_t{1} << 20) / d ? numel * d : (int64_t{1} << 21);
        if (numel <= (int64_t{1} << 18)) (void)gguf.to_f32(name);
      });
    }
    fuzz::expect_ok_or_error([&] { (void)models::llama_config(gguf); });
    fuzz::expect_ok_or_error([&] { (void)models::gpt2_config(gguf); });
    fuzz::expect_ok_or_error([&] { (void)models::phi3_config(gguf); });
    fuzz::expect_ok_or_error([&] { (void)models::bert_config(gguf); });
    fuzz::expect_ok_or_error([&] { (void)tokenizer::wordpiece_json_from_gguf(gguf); });
    fuzz::expect_ok_or_error([&] {
      auto tok = tokenizer::tokenizer_from_gguf(gguf);
      EncodeOptions options;
      (void)tok->encode("Hello world, 12345 héllo", options);
    });
  });
  return 0;
}
