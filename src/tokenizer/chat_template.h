// headscope — chat templates: the Jinja2 text a model's files carry (tokenizer_config.json
// "chat_template", GGUF "tokenizer.chat_template") that turns a list of messages into the prompt
// the model was trained on, as transformers' apply_chat_template renders it.
//
// A small subset of Jinja2 is implemented, enough for the ChatML-style templates of SmolLM2,
// Qwen2 and similar without tool calls:
//   {{ expr }}  {% for x in expr %}…{% endfor %}  {% if expr %}…{% elif expr %}…{% else %}…{% endif %}
//   {% set name = expr %}, whitespace control {%- -%} {{- -}}, {# comments #}
//   expr: 'strings' "strings", integers, true/false/none, names, x['key'], x.key, x[0], + and ~
//         (concatenation), == != and or not in, `is defined`, `is none`, parentheses, the filters
//         trim and length; loop.first/last/index/index0/length inside for.
// Anything else throws Error naming the construct, so a template is either rendered exactly or
// refused. Templates come from model files and may be hostile: nesting, integer arithmetic, steps,
// string sizes and the output are bounded (headscope/limits.h), and going past a bound is an Error
// (ResourceError for the budgets), never a crash or a runaway.
#pragma once
#include <string>
#include <vector>

namespace headscope::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Renders `source` with messages, add_generation_prompt, bos_token and eos_token defined.
// Throws Error on unsupported or malformed syntax, on integer overflow and on nesting deeper than
// limits.h allows, ResourceError when the rendering goes over a budget (steps, string sizes, output);
// messages start with `origin` (e.g. the file the template came from) when it is not empty.
std::string render_chat_template(const std::string& source, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, const std::string& bos_token = "",
                                 const std::string& eos_token = "", const std::string& origin = "");

// The chat template of a model: tokenizer_config.json "chat_template" (a string, or a list of
// {"name", "template"} of which "default" is taken) in a folder, "tokenizer.chat_template" in a GGUF
// (a .gguf path or a folder holding one). Empty when the files have none.
std::string read_chat_template(const std::string& model_path);

}  // namespace headscope::tokenizer
