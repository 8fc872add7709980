// headscope — a small Jinja2 subset for chat templates (see chat_template.h). Rendering follows
// transformers' apply_chat_template, which compiles templates with trim_blocks and lstrip_blocks:
// the first newline after a {% %} / {# #} tag is dropped, and spaces/tabs before such a tag at
// the start of a line are stripped.
#include "tokenizer/chat_template.h"

#include <string.h>  // memmem

#include <charconv>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "headscope/error.h"
#include "headscope/limits.h"
#include "io/gguf.h"

namespace headscope::tokenizer {
namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("chat template: " + what); }

// What one rendering may spend (limits.h): steps (pieces, loop iterations, operands and operators),
// bytes of string work (built, copied, compared, scanned), the size of each string built and of the
// output. A hostile template (nested loops, a string doubled in a chain of {% set %}) is refused with
// ResourceError instead of running for hours or filling the memory.
class Budget {
 public:
  void step() {
    if (++steps_ > limits::kMaxTemplateSteps) {
      over("takes more than " + std::to_string(limits::kMaxTemplateSteps) + " evaluation steps (kMaxTemplateSteps)");
    }
  }
  void work(size_t bytes) {
    work_bytes_ += static_cast<int64_t>(std::min<size_t>(bytes, static_cast<size_t>(limits::kMaxTemplateWorkBytes)));
    if (work_bytes_ > limits::kMaxTemplateWorkBytes) {
      over("copies, compares or scans more than " + std::to_string(limits::kMaxTemplateWorkBytes) +
           " bytes of strings (kMaxTemplateWorkBytes)");
    }
  }
  // Before a string of `bytes` is built.
  void string_of(size_t bytes) {
    if (bytes > static_cast<size_t>(limits::kMaxTemplateStringBytes)) {
      over("builds a string of " + std::to_string(bytes) + " bytes, more than " +
           std::to_string(limits::kMaxTemplateStringBytes) + " (kMaxTemplateStringBytes)");
    }
    work(bytes);
  }
  // Appends to the rendered output.
  void emit(std::string& out, const std::string& text) {
    if (out.size() + text.size() > static_cast<size_t>(limits::kMaxTemplateOutputBytes)) {
      over("renders more than " + std::to_string(limits::kMaxTemplateOutputBytes) + " bytes (kMaxTemplateOutputBytes)");
    }
    work(text.size());
    out += text;
  }

 private:
  [[noreturn]] static void over(const std::string& what) { throw ResourceError("chat template: rendering " + what); }
  int64_t steps_ = 0;
  int64_t work_bytes_ = 0;
};

// Depth of a recursion (expression nesting, block nesting) with its limit; refuses beyond it.
class DepthGuard {
 public:
  DepthGuard(int& depth, int limit, const char* limit_name, const char* what) : depth_(depth) {
    if (depth_ >= limit) {
      fail(std::string(what) + " nested deeper than " + std::to_string(limit) + " levels (" + limit_name + ")");
    }
    ++depth_;
  }
  ~DepthGuard() { --depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int& depth_;
};

// ------------------------------------------------------------------ values

struct Value {
  enum Kind { kUndefined, kNone, kBool, kInt, kString, kList, kMap } kind = kUndefined;
  bool b = false;
  int64_t i = 0;
  std::shared_ptr<const std::string> s;  // kString; shared, so copying a value never copies its text
  std::shared_ptr<std::vector<Value>> list;
  std::shared_ptr<std::map<std::string, Value>> map;

  static Value of(bool v) {
    Value x;
    x.kind = kBool;
    x.b = v;
    return x;
  }
  static Value of(int64_t v) {
    Value x;
    x.kind = kInt;
    x.i = v;
    return x;
  }
  static Value of(std::string v) {
    Value x;
    x.kind = kString;
    x.s = std::make_shared<const std::string>(std::move(v));
    return x;
  }
  bool truthy() const {
    switch (kind) {
      case kBool:
        return b;
      case kInt:
        return i != 0;
      case kString:
        return !s->empty();
      case kList:
        return !list->empty();
      case kMap:
        return !map->empty();
      default:
        return false;
    }
  }
  std::string str() const {
    switch (kind) {
      case kString:
        return *s;
      case kInt:
        return std::to_string(i);
      case kBool:
        return b ? "True" : "False";
      case kNone:
        return "None";
      case kUndefined:
        return "";
      default:
        fail("cannot print a list or a mapping");
    }
  }
};

bool equal(const Value& a, const Value& b) {
  if (a.kind != b.kind) {
    if ((a.kind == Value::kNone || a.kind == Value::kUndefined) &&
        (b.kind == Value::kNone || b.kind == Value::kUndefined))
      return a.kind == b.kind;
    return false;
  }
  switch (a.kind) {
    case Value::kBool:
      return a.b == b.b;
    case Value::kInt:
      return a.i == b.i;
    case Value::kString:
      return *a.s == *b.s;
    case Value::kNone:
    case Value::kUndefined:
      return true;
    default:
      return a.list == b.list && a.map == b.map;
  }
}

// ------------------------------------------------------------------ expressions

struct Token {
  enum Kind { kName, kString, kInt, kOp, kEnd } kind;
  std::string text;
};

std::vector<Token> lex_expression(const std::string& src) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < src.size()) {
    const char c = src[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < src.size() && (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_')) ++j;
      out.push_back({Token::kName, src.substr(i, j - i)});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
      out.push_back({Token::kInt, src.substr(i, j - i)});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string s;
      size_t j = i + 1;
      for (; j < src.size() && src[j] != c; ++j) {
        if (src[j] == '\\' && j + 1 < src.size()) {
          const char e = src[++j];
          s += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
        } else {
          s += src[j];
        }
      }
      if (j >= src.size()) fail("unterminated string in '" + src + "'");
      out.push_back({Token::kString, s});
      i = j + 1;
    } else {
      static const char* two[] = {"==", "!="};
      bool matched = false;
      for (const char* op : two) {
        if (src.compare(i, 2, op) == 0) {
          out.push_back({Token::kOp, op});
          i += 2;
          matched = true;
        }
      }
      if (matched) continue;
      if (std::string("()[].,+~|=").find(c) == std::string::npos)
        fail(std::string("unsupported character '") + c + "' in '" + src + "'");
      out.push_back({Token::kOp, std::string(1, c)});
      ++i;
    }
  }
  out.push_back({Token::kEnd, ""});
  return out;
}

// The variables of one block level; lookups go outwards. Each {% for %} iteration gets its own
// frame (its variable, `loop` and whatever {% set %} assigns in the body), as Jinja scopes loop
// bodies, so a loop never copies the variables around it.
struct Scope {
  std::map<std::string, Value> vars;
  const Scope* parent = nullptr;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      const auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

// Recursive-descent evaluation over the tokens of one expression. Parentheses and subscripts
// recurse, at most kMaxTemplateExpressionDepth deep; every operand and operator is a step.
class Expression {
 public:
  Expression(const std::vector<Token>& tokens, size_t& pos, const Scope& scope, Budget& budget)
      : t_(tokens), p_(pos), scope_(scope), budget_(budget) {}
  Value parse() { return or_expr(); }

 private:
  const Token& peek() const { return t_[p_]; }
  bool is(const std::string& text) const {
    return (peek().kind == Token::kOp || peek().kind == Token::kName) && peek().text == text;
  }
  void expect(const std::string& text) {
    if (!is(text)) fail("expected '" + text + "', found '" + peek().text + "'");
    ++p_;
  }
  Value or_expr() {
    const DepthGuard guard(depth_, limits::kMaxTemplateExpressionDepth, "kMaxTemplateExpressionDepth",
                           "an expression (parentheses, subscripts)");
    Value v = and_expr();
    while (is("or")) {
      ++p_;
      budget_.step();
      const Value r = and_expr();
      v = Value::of(v.truthy() || r.truthy());
    }
    return v;
  }
  Value and_expr() {
    Value v = not_expr();
    while (is("and")) {
      ++p_;
      budget_.step();
      const Value r = not_expr();
      v = Value::of(v.truthy() && r.truthy());
    }
    return v;
  }
  // A run of `not` is counted, not recursed into: `not not x` is x's truth value.
  Value not_expr() {
    size_t nots = 0;
    for (; is("not"); ++p_) {
      budget_.step();
      ++nots;
    }
    const Value v = comparison();
    return nots == 0 ? v : Value::of(v.truthy() != (nots % 2 == 1));
  }
  Value comparison() {
    Value v = additive();
    for (;;) {
      if (is("==") || is("!=")) {
        const bool eq = peek().text == "==";
        ++p_;
        budget_.step();
        const Value r = additive();
        if (v.kind == Value::kString && r.kind == Value::kString) budget_.work(std::min(v.s->size(), r.s->size()));
        v = Value::of(equal(v, r) == eq);
      } else if (is("in") || (is("not") && t_[p_ + 1].text == "in")) {
        const bool negate = is("not");
        p_ += negate ? 2 : 1;
        budget_.step();
        const Value r = additive();
        bool found = false;
        if (r.kind == Value::kString) {
          // memmem is linear in the haystack (glibc's two-way search), std::string::find is not.
          const std::string needle = v.str();
          budget_.work(r.s->size() + needle.size());
          found = needle.empty() || memmem(r.s->data(), r.s->size(), needle.data(), needle.size()) != nullptr;
        } else if (r.kind == Value::kList) {
          for (const Value& x : *r.list) {
            budget_.step();
            found = found || equal(x, v);
          }
        } else if (r.kind == Value::kMap) {
          found = r.map->count(key_of(v)) != 0;
        } else {
          fail("'in' needs a string, list or mapping");
        }
        v = Value::of(found != negate);
      } else if (is("is")) {
        ++p_;
        budget_.step();
        bool negate = false;
        if (is("not")) {
          negate = true;
          ++p_;
        }
        if (peek().kind != Token::kName) fail("expected a test after 'is'");
        const std::string test = peek().text;
        ++p_;
        bool result;
        if (test == "defined")
          result = v.kind != Value::kUndefined;
        else if (test == "none")
          result = v.kind == Value::kNone;
        else if (test == "string")
          result = v.kind == Value::kString;
        else
          fail("unsupported test 'is " + test + "'");
        v = Value::of(result != negate);
      } else {
        return v;
      }
    }
  }
  Value additive() {
    Value v = postfix();
    while (is("+") || is("~")) {
      const bool tilde = is("~");
      ++p_;
      budget_.step();
      const Value r = postfix();
      if (!tilde && v.kind == Value::kInt && r.kind == Value::kInt) {
        int64_t sum = 0;
        if (__builtin_add_overflow(v.i, r.i, &sum)) {
          fail("integer overflow in " + std::to_string(v.i) + " + " + std::to_string(r.i) + " (beyond 64 bits)");
        }
        v = Value::of(sum);
      } else if (tilde || (v.kind == Value::kString && r.kind == Value::kString)) {
        const std::string a = v.str(), b = r.str();
        budget_.string_of(a.size() + b.size());
        v = Value::of(a + b);
      } else {
        fail("'+' needs two strings or two integers");
      }
    }
    return v;
  }
  Value postfix() {
    Value v = primary();
    for (;;) {
      if (is("[")) {
        ++p_;
        budget_.step();
        const Value key = or_expr();
        expect("]");
        v = index(v, key);
      } else if (is(".")) {
        ++p_;
        budget_.step();
        if (peek().kind != Token::kName) fail("expected a name after '.'");
        v = index(v, Value::of(peek().text));
        ++p_;
      } else if (is("|")) {
        ++p_;
        budget_.step();
        if (peek().kind != Token::kName) fail("expected a filter name after '|'");
        const std::string filter = peek().text;
        ++p_;
        if (filter == "trim") {
          const std::string s = v.str();
          budget_.work(s.size());
          const size_t a = s.find_first_not_of(" \t\n\r\f\v");
          const size_t b = s.find_last_not_of(" \t\n\r\f\v");
          v = Value::of(a == std::string::npos ? std::string() : s.substr(a, b - a + 1));
        } else if (filter == "length") {
          const size_t n = v.kind == Value::kList     ? v.list->size()
                           : v.kind == Value::kMap    ? v.map->size()
                           : v.kind == Value::kString ? v.s->size()
                                                      : v.str().size();
          v = Value::of(static_cast<int64_t>(n));
        } else {
          fail("unsupported filter '" + filter + "'");
        }
      } else {
        return v;
      }
    }
  }
  // The text of a mapping key, its bytes charged to the budget.
  std::string key_of(const Value& key) {
    std::string k = key.str();
    budget_.work(k.size());
    return k;
  }
  Value index(const Value& v, const Value& key) {
    if (v.kind == Value::kMap) {
      const auto it = v.map->find(key_of(key));
      return it == v.map->end() ? Value{} : it->second;
    }
    if (v.kind == Value::kList && key.kind == Value::kInt) {
      const int64_t size = static_cast<int64_t>(v.list->size());
      const int64_t k = key.i < 0 ? key.i + size : key.i;  // key.i >= INT64_MIN, size >= 0: no overflow
      if (k < 0 || k >= size) return Value{};
      return (*v.list)[static_cast<size_t>(k)];
    }
    if (v.kind == Value::kUndefined) fail("indexing an undefined value");
    fail("cannot index this value with '" + key.str() + "'");
  }
  Value primary() {
    const Token tok = peek();
    ++p_;
    budget_.step();
    switch (tok.kind) {
      case Token::kString:
        return Value::of(tok.text);
      case Token::kInt: {
        int64_t n = 0;
        const auto [end, ec] = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), n);
        if (ec != std::errc() || end != tok.text.data() + tok.text.size()) {
          fail("integer " + tok.text + " does not fit in 64 bits");
        }
        return Value::of(n);
      }
      case Token::kName: {
        if (tok.text == "true" || tok.text == "True") return Value::of(true);
        if (tok.text == "false" || tok.text == "False") return Value::of(false);
        if (tok.text == "none" || tok.text == "None") {
          Value n;
          n.kind = Value::kNone;
          return n;
        }
        const Value* found = scope_.find(tok.text);
        return found == nullptr ? Value{} : *found;
      }
      case Token::kOp:
        if (tok.text == "(") {
          Value v = or_expr();
          expect(")");
          return v;
        }
        [[fallthrough]];
      default:
        fail("unexpected '" + tok.text + "' in an expression");
    }
  }

  const std::vector<Token>& t_;
  size_t& p_;
  const Scope& scope_;
  Budget& budget_;
  int depth_ = 0;
};

Value evaluate(const std::string& src, const Scope& scope, Budget& budget) {
  budget.work(src.size());  // the expression is lexed each time it is evaluated
  const std::vector<Token> tokens = lex_expression(src);
  size_t pos = 0;
  Value v = Expression(tokens, pos, scope, budget).parse();
  if (tokens[pos].kind != Token::kEnd) fail("unexpected '" + tokens[pos].text + "' in '" + src + "'");
  return v;
}

// ------------------------------------------------------------------ template structure

struct Piece {
  enum Kind { kText, kOutput, kTag } kind;
  std::string text;  // literal text, or the inside of the tag
};

// Splits the source into text and tags, applying whitespace control ({%- -%}), trim_blocks and
// lstrip_blocks as transformers configures Jinja.
std::vector<Piece> split_template(const std::string& src) {
  std::vector<Piece> out;
  size_t i = 0;
  bool trim_next_newline = false, strip_next_whitespace = false;
  while (i <= src.size()) {
    size_t tag = std::string::npos;
    for (size_t k = src.find('{', i); k != std::string::npos && k + 1 < src.size(); k = src.find('{', k + 1)) {
      if (src[k + 1] == '{' || src[k + 1] == '%' || src[k + 1] == '#') {
        tag = k;
        break;
      }
    }
    std::string text = src.substr(i, (tag == std::string::npos ? src.size() : tag) - i);
    if (strip_next_whitespace) {
      text.erase(0, text.find_first_not_of(" \t\n\r"));
      if (text.find_first_not_of(" \t\n\r") == std::string::npos) text.clear();
    } else if (trim_next_newline && !text.empty() && text[0] == '\n') {
      text.erase(0, 1);
    }
    trim_next_newline = strip_next_whitespace = false;
    if (tag == std::string::npos) {
      if (!text.empty()) out.push_back({Piece::kText, text});
      break;
    }
    const char kind = src[tag + 1];
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const size_t end = src.find(close, tag + 2);
    if (end == std::string::npos) fail("a tag opened at offset " + std::to_string(tag) + " is never closed");
    std::string inner = src.substr(tag + 2, end - tag - 2);
    const bool strip_before = !inner.empty() && inner[0] == '-';
    // A lone '-' ({{-}}) strips before only: the same character cannot mark both sides.
    const bool strip_after = inner.size() > (strip_before ? 1u : 0u) && inner.back() == '-';
    if (strip_before) inner.erase(0, 1);
    if (strip_after) inner.pop_back();
    if (strip_before) {
      const size_t last = text.find_last_not_of(" \t\n\r");
      text = last == std::string::npos ? std::string() : text.substr(0, last + 1);
    } else if (kind != '{') {
      // lstrip_blocks: the spaces and tabs between the start of a line (in the source) and a
      // block tag go.
      size_t k = tag;
      while (k > i && (src[k - 1] == ' ' || src[k - 1] == '\t')) --k;
      if ((k == 0 || src[k - 1] == '\n') && tag - k <= text.size()) text.erase(text.size() - (tag - k));
    }
    if (!text.empty()) out.push_back({Piece::kText, text});
    if (kind == '{') out.push_back({Piece::kOutput, inner});
    if (kind == '%') out.push_back({Piece::kTag, inner});
    strip_next_whitespace = strip_after;
    trim_next_newline = kind != '{';  // trim_blocks
    i = end + 2;
  }
  return out;
}

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n\r");
  const size_t b = s.find_last_not_of(" \t\n\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

std::string first_word(const std::string& s) {
  const std::string t = trimmed(s);
  return t.substr(0, t.find_first_of(" \t\n\r"));
}

class Renderer {
 public:
  explicit Renderer(std::vector<Piece> pieces) : pieces_(std::move(pieces)) {}
  std::string run(Scope& scope) {
    std::string out;
    size_t pos = 0;
    render(pos, scope, out, true, {});
    if (pos != pieces_.size()) fail("unexpected '" + trimmed(pieces_[pos].text) + "'");
    return out;
  }

 private:
  // Renders pieces from `pos` until a tag whose first word is in `stops`; leaves pos on it.
  // Recurses once per {% if %} / {% for %} level, at most kMaxTemplateBlockDepth deep.
  void render(size_t& pos, Scope& scope, std::string& out, bool emit, const std::vector<std::string>& stops) {
    const DepthGuard guard(depth_, limits::kMaxTemplateBlockDepth, "kMaxTemplateBlockDepth",
                           "{% if %} / {% for %} blocks");
    while (pos < pieces_.size()) {
      const Piece& p = pieces_[pos];
      budget_.step();
      if (p.kind == Piece::kText) {
        if (emit) budget_.emit(out, p.text);
        ++pos;
        continue;
      }
      if (p.kind == Piece::kOutput) {
        if (emit) {
          const Value v = evaluate(p.text, scope, budget_);
          budget_.emit(out, v.kind == Value::kString ? *v.s : v.str());
        }
        ++pos;
        continue;
      }
      budget_.work(p.text.size());
      const std::string word = first_word(p.text);
      for (const std::string& s : stops) {
        if (word == s) return;
      }
      const std::string rest = trimmed(trimmed(p.text).substr(word.size()));
      ++pos;
      if (word == "if") {
        bool taken = false;
        std::string cond = rest;
        for (;;) {
          const bool this_one = !taken && emit && (cond.empty() || evaluate(cond, scope, budget_).truthy());
          render(pos, scope, out, this_one, {"elif", "else", "endif"});
          taken = taken || this_one;
          if (pos >= pieces_.size()) fail("{% if %} without {% endif %}");
          const std::string w = first_word(pieces_[pos].text);
          const std::string r = trimmed(trimmed(pieces_[pos].text).substr(w.size()));
          ++pos;
          if (w == "endif") break;
          cond = w == "else" ? std::string() : r;
          if (w == "else") {
            render(pos, scope, out, emit && !taken, {"endif"});
            if (pos >= pieces_.size()) fail("{% else %} without {% endif %}");
            ++pos;
            break;
          }
        }
      } else if (word == "for") {
        const size_t in = rest.find(" in ");
        if (in == std::string::npos) fail("expected '{% for x in ... %}'");
        const std::string var = trimmed(rest.substr(0, in));
        const size_t body = pos;
        if (!emit) {
          render(pos, scope, out, false, {"endfor"});
        } else {
          const Value seq = evaluate(rest.substr(in + 4), scope, budget_);
          if (seq.kind != Value::kList) fail("{% for %} over something that is not a list");
          const size_t n = seq.list->size();
          if (n == 0) render(pos, scope, out, false, {"endfor"});
          for (size_t k = 0; k < n; ++k) {
            budget_.step();
            Scope inner;
            inner.parent = &scope;
            inner.vars[var] = (*seq.list)[k];
            Value loop;
            loop.kind = Value::kMap;
            loop.map = std::make_shared<std::map<std::string, Value>>();
            (*loop.map)["index0"] = Value::of(static_cast<int64_t>(k));
            (*loop.map)["index"] = Value::of(static_cast<int64_t>(k + 1));
            (*loop.map)["first"] = Value::of(k == 0);
            (*loop.map)["last"] = Value::of(k + 1 == n);
            (*loop.map)["length"] = Value::of(static_cast<int64_t>(n));
            inner.vars["loop"] = loop;
            pos = body;
            render(pos, inner, out, true, {"endfor"});
          }
        }
        if (pos >= pieces_.size()) fail("{% for %} without {% endfor %}");
        ++pos;
      } else if (word == "set") {
        const size_t eq = rest.find('=');
        if (eq == std::string::npos) fail("expected '{% set name = value %}'");
        if (emit) scope.vars[trimmed(rest.substr(0, eq))] = evaluate(rest.substr(eq + 1), scope, budget_);
      } else {
        fail("unsupported tag '{% " + word + " %}'");
      }
    }
  }

  std::vector<Piece> pieces_;
  Budget budget_;
  int depth_ = 0;
};

}  // namespace

std::string render_chat_template(const std::string& source, const std::vector<ChatMessage>& messages,
                                 bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                                 const std::string& origin) {
  try {
    if (source.size() > static_cast<size_t>(limits::kMaxChatTemplateBytes)) {
      throw ResourceError("chat template: " + std::to_string(source.size()) + " bytes, more than the " +
                          std::to_string(limits::kMaxChatTemplateBytes) + " allowed (kMaxChatTemplateBytes)");
    }
    Scope scope;
    Value list;
    list.kind = Value::kList;
    list.list = std::make_shared<std::vector<Value>>();
    for (const ChatMessage& m : messages) {
      Value msg;
      msg.kind = Value::kMap;
      msg.map = std::make_shared<std::map<std::string, Value>>();
      (*msg.map)["role"] = Value::of(m.role);
      (*msg.map)["content"] = Value::of(m.content);
      list.list->push_back(msg);
    }
    scope.vars["messages"] = list;
    scope.vars["add_generation_prompt"] = Value::of(add_generation_prompt);
    scope.vars["bos_token"] = Value::of(bos_token);
    scope.vars["eos_token"] = Value::of(eos_token);
    return Renderer(split_template(source)).run(scope);
  } catch (const ResourceError& e) {
    if (origin.empty()) throw;
    throw ResourceError(origin + ": " + e.what());
  } catch (const Error& e) {
    if (origin.empty()) throw;
    throw Error(origin + ": " + e.what());
  }
}

std::string read_chat_template(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::string gguf;
  if (fs::is_regular_file(model_path) && fs::path(model_path).extension() == ".gguf") gguf = model_path;
  if (fs::is_directory(model_path)) {
    const fs::path config = fs::path(model_path) / "tokenizer_config.json";
    if (fs::exists(config)) {
      std::error_code ec;
      const auto size = fs::file_size(config, ec);
      if (!ec && size > static_cast<uintmax_t>(limits::kMaxTokenizerFileBytes)) {
        throw ResourceError(config.string() + ": " + std::to_string(size) + " bytes, more than the " +
                            std::to_string(limits::kMaxTokenizerFileBytes) + " a tokenizer file may have");
      }
      std::ifstream in(config);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
      if (j.is_discarded()) throw Error(config.string() + ": not valid JSON");
      if (!j.contains("chat_template")) return {};
      const nlohmann::json& t = j["chat_template"];
      if (t.is_string()) return t.get<std::string>();
      if (t.is_array()) {
        for (const nlohmann::json& e : t) {
          if (e.value("name", "") == "default") return e.value("template", "");
        }
      }
      return {};
    }
    for (const auto& entry : fs::directory_iterator(model_path)) {
      if (entry.path().extension() == ".gguf") gguf = entry.path().string();
    }
  }
  if (gguf.empty()) return {};
  const io::GgufFile file(gguf);
  return file.get_string("tokenizer.chat_template", "");
}

}  // namespace headscope::tokenizer
