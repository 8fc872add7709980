// headscope — prompt pairs for patching: the IOI, induction and greater-than generators, the check
// of a pair against the model's tokenizer, and their JSON form (see include/headscope/circuits.h).
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "headscope/circuits.h"
#include "headscope/error.h"
#include "headscope/model.h"
#include "headscope/tokenizer.h"

namespace headscope {
namespace {

// Word lists, filtered per model to the words that are one token after a space.
const std::vector<std::string> kNames = {
    "Mary",  "John",   "Alice",  "Bob",   "Tom",   "James",  "David",  "Sarah",  "Emma",   "Michael",
    "Anna",  "Paul",   "Laura",  "Mark",  "Kate",  "Peter",  "Lisa",   "Daniel", "Jane",   "Chris",
    "Linda", "Steven", "Rachel", "Kevin", "Helen", "Brian",  "Susan",  "Eric",   "Julia",  "Robert",
    "Karen", "Jason",  "Amy",    "Ryan",  "Emily", "Adam",   "Grace",  "Jack",   "Lucy",   "Henry",
    "Ruth",  "George", "Diana",  "Frank", "Nancy", "Victor", "Sophie", "Simon",  "Claire", "Oscar"};
const std::vector<std::string> kPlaces = {"store",    "park",    "school",     "office", "garden", "station",
                                          "hospital", "library", "restaurant", "market", "beach",  "house"};
const std::vector<std::string> kObjects = {"drink", "book", "ball", "key", "letter", "bag",
                                           "ring",  "box",  "gift", "pen", "card",   "phone"};
// Own wording of the IOI sentence shapes: {A} {B} introduce the two names, {S} is the subject.
const std::vector<std::string> kIoiTemplates = {
    "When {A} and {B} went to the {P}, {S} gave a {O} to",
    "After {A} and {B} arrived at the {P}, {S} handed a {O} to",
    "While {A} and {B} were working at the {P}, {S} passed a {O} to",
    "Then, {A} and {B} spent the day at the {P}. {S} gave a {O} to",
    "Once {A} and {B} had left the {P}, {S} sent a {O} to",
    "While {A} and {B} were spending a quiet afternoon working together at the {P}, {S} passed a {O} to"};
const std::vector<std::string> kSpans = {"war", "drought", "reign", "expedition", "festival", "project", "strike"};

constexpr int kMaxPairs = 100000;

EncodeOptions plain() {
  EncodeOptions o;
  o.add_special_tokens = false;
  return o;
}

// The id of `text` when it is exactly one token without specials, else -1.
int32_t single_token(const Model& model, const std::string& text) {
  const Encoding e = model.tokenizer().encode(text, plain());
  return e.size() == 1 ? e.tokens[0].id : -1;
}

std::vector<std::string> one_token_words(const Model& model, const std::vector<std::string>& words) {
  std::vector<std::string> kept;
  for (const std::string& w : words)
    if (single_token(model, " " + w) >= 0) kept.push_back(w);
  return kept;
}

// A uniform index below n from the generator's raw output: the same sequence on every standard
// library (std::uniform_int_distribution is not specified bit for bit).
size_t pick(std::mt19937_64& rng, size_t n) { return static_cast<size_t>(rng() % n); }

std::string fill(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
    text.replace(at, key.size(), value);
  return text;
}

void check_count(int n) {
  if (n < 1 || n > kMaxPairs)
    throw Error("the number of prompt pairs must be between 1 and " + std::to_string(kMaxPairs) + ", got " +
                std::to_string(n));
}

// `k` different words drawn from `words` (which holds at least k different ones).
std::vector<std::string> distinct_words(std::mt19937_64& rng, const std::vector<std::string>& words, size_t k) {
  std::vector<std::string> out;
  while (out.size() < k) {
    const std::string& w = words[pick(rng, words.size())];
    if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  }
  return out;
}

// Words of the model's vocabulary that are one lowercase ASCII word of 3–10 letters after a space
// and encode back to themselves alone: the material of the induction sequences.
std::vector<std::string> vocabulary_words(const Model& model) {
  const Tokenizer& tok = model.tokenizer();
  std::vector<std::string> words;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    const std::string text = tok.decode({id});
    if (text.size() < 4 || text.size() > 11 || text[0] != ' ') continue;
    if (!std::all_of(text.begin() + 1, text.end(), [](unsigned char c) { return c >= 'a' && c <= 'z'; })) continue;
    if (single_token(model, text) == id) words.push_back(text);
  }
  return words;
}

}  // namespace

void check_pairs(const Model& model, PromptPairs& set) {
  const Tokenizer& tok = model.tokenizer();
  set.model = model.config().name;
  for (size_t i = 0; i < set.pairs.size(); ++i) {
    PromptPair& p = set.pairs[i];
    const std::string where = "prompt pair " + std::to_string(i + 1) + " (\"" + p.clean + "\")";
    const int64_t clean = static_cast<int64_t>(model.encode(p.clean).size());
    const int64_t corrupt = static_cast<int64_t>(model.encode(p.corrupt).size());
    if (clean != corrupt)
      throw Error(where + ": the clean prompt is " + std::to_string(clean) + " tokens and the corrupted one " +
                  std::to_string(corrupt) +
                  "; patching needs the same number of tokens: change the corrupted "
                  "prompt's words for ones of the same length in tokens");
    p.n_tokens = clean;
    if (!model.config().causal) continue;  // an encoder's metric compares embeddings: no answer tokens
    for (auto [text, id, role] :
         {std::tuple{&p.answer, &p.answer_id, "answer"}, std::tuple{&p.wrong, &p.wrong_id, "wrong answer"}}) {
      const Encoding e = tok.encode(*text, plain());
      if (e.size() != 1)
        throw Error(where + ": the " + std::string(role) + " \"" + *text + "\" is " + std::to_string(e.size()) +
                    " tokens for this model; it must be one token (write it as it follows the prompt, usually "
                    "with its leading space)");
      *id = e.tokens[0].id;
      // The answer must be the token the prompt would continue with, not a different split.
      const Encoding joined = model.encode(p.clean + *text);
      if (static_cast<int64_t>(joined.size()) != clean + 1 || joined.tokens.back().id != *id)
        throw Error(where + ": after the prompt the " + std::string(role) + " \"" + *text +
                    "\" is not tokenised as the single token it is alone; check its leading space");
    }
  }
}

PromptPairs make_ioi_pairs(const Model& model, int n, uint64_t seed) {
  check_count(n);
  const std::vector<std::string> names = one_token_words(model, kNames);
  const std::vector<std::string> places = one_token_words(model, kPlaces);
  const std::vector<std::string> objects = one_token_words(model, kObjects);
  if (names.size() < 5 || places.empty() || objects.empty())
    throw Error("IOI needs at least 5 names, a place and an object that are one token each for this model; it has " +
                std::to_string(names.size()) + ", " + std::to_string(places.size()) + " and " +
                std::to_string(objects.size()) + ": write the pairs yourself (--pairs FILE)");
  std::mt19937_64 rng(seed);
  PromptPairs set{"ioi", seed, "", {}};
  for (int i = 0; i < n; ++i) {
    const std::string& shape = kIoiTemplates[pick(rng, kIoiTemplates.size())];
    const std::string place = places[pick(rng, places.size())], object = objects[pick(rng, objects.size())];
    // Five different names: the indirect object and the subject, then the three of the corruption.
    const std::vector<std::string> drawn = distinct_words(rng, names, 5);
    const bool abba = i % 2 == 0;  // balanced: ABBA on even pairs, BABA on odd ones
    const std::string &io = drawn[0], &s = drawn[1];
    std::string base = fill(fill(shape, "{P}", place), "{O}", object);
    std::string clean = fill(fill(fill(base, "{A}", abba ? io : s), "{B}", abba ? s : io), "{S}", s);
    std::string corrupt = fill(fill(fill(base, "{A}", drawn[2]), "{B}", drawn[3]), "{S}", drawn[4]);
    set.pairs.push_back({clean, corrupt, " " + io, " " + s, abba ? "ABBA" : "BABA"});
  }
  check_pairs(model, set);
  return set;
}

PromptPairs make_induction_pairs(const Model& model, int n, int length, uint64_t seed) {
  check_count(n);
  if (length < 2 || length > 256)
    throw Error("the induction sequence length must be between 2 and 256, got " + std::to_string(length));
  const std::vector<std::string> words = vocabulary_words(model);
  if (words.size() < static_cast<size_t>(3 * length))
    throw Error("this model's vocabulary has " + std::to_string(words.size()) +
                " one-token lowercase words; induction sequences of " + std::to_string(length) + " need " +
                std::to_string(3 * length));
  std::mt19937_64 rng(seed);
  PromptPairs set{"induction", seed, "", {}};
  for (int i = 0; i < n; ++i) {
    // 2·length + 1 different words: the first half, the corrupted second half, and the wrong answer.
    const std::vector<std::string> drawn = distinct_words(rng, words, size_t(2 * length + 1));
    std::string first, repeat, corrupt;
    for (int j = 0; j < length; ++j) first += drawn[j];
    for (int j = 0; j + 1 < length; ++j) {
      repeat += drawn[j];
      corrupt += drawn[length + j];
    }
    set.pairs.push_back({first + repeat, first + corrupt, drawn[length - 1], drawn[2 * length], ""});
  }
  check_pairs(model, set);
  return set;
}

PromptPairs make_greater_than_pairs(const Model& model, int n, uint64_t seed) {
  check_count(n);
  const Encoding year = model.tokenizer().encode(" 1732", plain());
  const bool digits = year.size() == 5 || (year.size() == 4 && year.tokens[0].text != " ");
  if (!digits || single_token(model, "3") < 0)
    throw Error(
        "greater-than is generated for tokenizers that write a number one digit per token (Llama, Gemma); "
        "this model writes \" 1732\" as " +
        std::to_string(year.size()) + " tokens: write the pairs yourself");
  const std::vector<std::string> spans = one_token_words(model, kSpans);
  if (spans.empty()) throw Error("greater-than: none of its nouns is one token for this model");
  std::mt19937_64 rng(seed);
  PromptPairs set{"greater_than", seed, "", {}};
  for (int i = 0; i < n; ++i) {
    const int tens = 1 + static_cast<int>(pick(rng, 8)), units = static_cast<int>(pick(rng, 10));  // 17[1-8][0-9]
    const std::string noun = spans[pick(rng, spans.size())];
    const std::string head = "The " + noun + " lasted from the year 17";
    const std::string tail = " to the year 17";
    set.pairs.push_back({head + std::to_string(tens) + std::to_string(units) + tail,
                         head + "0" + std::to_string(units) + tail, std::to_string(tens + 1), std::to_string(tens - 1),
                         "tens " + std::to_string(tens)});
  }
  check_pairs(model, set);
  return set;
}

std::string prompt_pairs_to_json(const PromptPairs& set) {
  nlohmann::json pairs = nlohmann::json::array();
  for (const PromptPair& p : set.pairs)
    pairs.push_back(
        {{"clean", p.clean}, {"corrupt", p.corrupt}, {"answer", p.answer}, {"wrong", p.wrong}, {"variant", p.variant}});
  return nlohmann::json{{"task", set.task}, {"seed", set.seed}, {"model", set.model}, {"pairs", pairs}}.dump(1);
}

PromptPairs prompt_pairs_from_json(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not JSON (" + e.what() + ")");
  }
  const auto fail = [&](const std::string& what) { return Error(source + ": " + what); };
  if (!j.is_object() || !j.contains("pairs") || !j["pairs"].is_array())
    throw fail("expected an object with a \"pairs\" array");
  for (const auto& [key, value] : j.items())
    if (key != "task" && key != "seed" && key != "model" && key != "pairs") throw fail("unknown field \"" + key + "\"");
  PromptPairs set;
  set.task = j.value("task", "custom");
  set.seed = j.contains("seed") && j["seed"].is_number_unsigned() ? j["seed"].get<uint64_t>() : 0;
  set.model = j.contains("model") && j["model"].is_string() ? j["model"].get<std::string>() : "";
  if (j["pairs"].empty() || j["pairs"].size() > static_cast<size_t>(kMaxPairs))
    throw fail("\"pairs\" must hold 1 to " + std::to_string(kMaxPairs) + " pairs");
  for (size_t i = 0; i < j["pairs"].size(); ++i) {
    const nlohmann::json& p = j["pairs"][i];
    const std::string at = "pair " + std::to_string(i + 1);
    if (!p.is_object()) throw fail(at + " is not an object");
    PromptPair pair;
    for (const auto& [key, value] : p.items()) {
      if (!value.is_string()) throw fail(at + ": \"" + key + "\" must be a string");
      std::string* field = key == "clean"     ? &pair.clean
                           : key == "corrupt" ? &pair.corrupt
                           : key == "answer"  ? &pair.answer
                           : key == "wrong"   ? &pair.wrong
                           : key == "variant" ? &pair.variant
                                              : nullptr;
      if (field == nullptr) throw fail(at + ": unknown field \"" + key + "\"");
      *field = value.get<std::string>();
    }
    for (const char* required : {"clean", "corrupt", "answer", "wrong"})
      if (!p.contains(required)) throw fail(at + ": missing \"" + std::string(required) + "\"");
    set.pairs.push_back(std::move(pair));
  }
  return set;
}

}  // namespace headscope
