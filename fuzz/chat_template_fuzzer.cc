// libFuzzer target: a chat template (the Jinja subset of tokenizer/chat_template.h, as found in
// tokenizer_config.json and GGUF metadata) rendered with a short conversation.
#include "fuzz_support.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headscope;
  const std::string source(reinterpret_cast<const char*>(data), size);
  static const std::vector<tokenizer::ChatMessage> messages = {
      {"system", "You are a helpful assistant."}, {"user", "What does a head do?"}, {"assistant", "It attends."}};
  fuzz::expect_ok_or_error(
      [&] { (void)tokenizer::render_chat_template(source, messages, size % 2 == 0, "<s>", "</s>"); });
  return 0;
}
