// BERT read from GGUF files that llama.cpp's own converter wrote (tests/reference/golden_bert_gguf.py):
// a tiny random BertModel and the default model all-MiniLM-L6-v2 (f32 and q8_0). Attention and
// hidden states must be transformers' own, and those of the same model loaded from safetensors;
// the WordPiece vocabulary rebuilt from the GGUF metadata must tokenize the tokenizer goldens as
// the tokenizers library does (ids, offsets, words). RoBERTa and DistilBERT, which the converter
// also writes as "bert", likewise from tiny random models, and XLM-RoBERTa (a SentencePiece Unigram
// vocabulary, "t5"). Hand-built BERT GGUFs check the refusals.
#include <gtest/gtest.h>

#include "test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "golden_util.h"
#include "headscope/limits.h"
#include "headscope/model.h"

namespace {

namespace fs = std::filesystem;
using headscope::Capture;
using headscope::Encoding;
using headscope::Model;
using headscope::Tensor;
using headscope::testing::expect_error;
using headscope::testing::read_f32;
using headscope::testing::TempDir;
using headscope::testing::write_raw;

fs::path goldens() { return headscope::testing::goldens_dir("bert_gguf"); }

float max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape) return INFINITY;
  float m = 0.0f;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const float d = std::abs(a.data[i] - b.data[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}
float max_abs(const Tensor& t) {
  float m = 0.0f;
  for (float v : t.data) m = std::max(m, std::abs(v));
  return m;
}

nlohmann::json manifest() {
  std::ifstream in(goldens() / "golden" / "manifest.json");
  if (!in) {
    ADD_FAILURE() << "missing " << goldens() / "golden" / "manifest.json"
                  << "; run `make goldens`";
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(in);
}

// Runs `gguf` (and `twin`, the same model from safetensors, when given) on the golden texts of
// manifest()[key]: the ids must be transformers' tokenizer's; attention within `attention_bound`
// of transformers and hidden states within `hidden_bound` of its largest |value|. Prints the
// differences, also against the twin, whose bounds are the same.
void check(const std::string& key, const Model& gguf, const Model* twin, float attention_bound, float hidden_bound,
           const std::string& architecture = "bert") {
  const nlohmann::json m = manifest();
  ASSERT_TRUE(m.contains(key)) << "no '" << key << "' in the bert_gguf goldens; run `make goldens`";
  EXPECT_EQ(gguf.config().architecture, architecture);
  EXPECT_FALSE(gguf.config().causal);
  for (size_t p = 0; p < m[key].size(); ++p) {
    const nlohmann::json& j = m[key][p];
    const Encoding enc = gguf.encode(j.at("text").get<std::string>());
    EXPECT_EQ(enc.ids(), j.at("ids").get<std::vector<int32_t>>()) << key << " prompt " << p;
    const std::string tag = key + "_p" + std::to_string(p) + "_";
    const Tensor attention = read_f32(goldens() / "golden", j["tensors"][tag + "attention"]);
    const Tensor hidden = read_f32(goldens() / "golden", j["tensors"][tag + "hidden_states"]);
    const Capture cap = gguf.run(enc, {});
    const float da = max_abs_diff(cap.attention, attention), dh = max_abs_diff(cap.hidden_states, hidden);
    std::printf("[ bert gguf ] %-12s prompt %zu T=%-3zu vs transformers: attention %.2e  hidden %.2e (relative %.2e)",
                (key + (twin ? "" : " q")).c_str(), p, enc.size(), da, dh, dh / max_abs(hidden));
    EXPECT_LE(da, attention_bound) << key << " prompt " << p;
    EXPECT_LE(dh, hidden_bound * max_abs(hidden)) << key << " prompt " << p;
    if (twin) {
      const Capture st = twin->run(twin->encode(j.at("text").get<std::string>()), {});
      const float ta = max_abs_diff(cap.attention, st.attention),
                  th = max_abs_diff(cap.hidden_states, st.hidden_states);
      std::printf("  vs safetensors: attention %.2e  hidden %.2e", ta, th);
      EXPECT_LE(ta, attention_bound) << key << " prompt " << p;
      EXPECT_LE(th, hidden_bound * max_abs(hidden)) << key << " prompt " << p;
    }
    std::printf("\n");
  }
}

TEST(BertGguf, TinyRandomBertFromConverterMatchesTransformers) {
  const auto gguf = Model::load((goldens() / "tiny_bert.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_bert").string());
  EXPECT_EQ(gguf->config().name, "tiny_bert");
  EXPECT_EQ(gguf->config().n_layer, 2);
  EXPECT_EQ(gguf->config().n_head, 4);
  EXPECT_EQ(gguf->config().d_head, 16);
  check("tiny_bert", *gguf, twin.get(), 1e-5f, 1e-4f);
}

TEST(BertGguf, MiniLmF32MatchesTransformersAndSafetensors) {
  const auto gguf = Model::load((goldens() / "minilm-f32.gguf").string());
  EXPECT_EQ(gguf->config().max_positions, 512);
  EXPECT_TRUE(gguf->warnings().empty());
  check("minilm", *gguf, &headscope::testing::default_model(), 1e-5f, 1e-4f);
}

// q8_0 rounds every weight matrix to 8 bits per value (a scale per 32): close, not equal. The
// bounds are five to ten times what this file gives (attention 2.2e-2, hidden 4.4e-3 relative).
TEST(BertGguf, MiniLmQ8_0IsClose) {
  const auto gguf = Model::load((goldens() / "minilm-q8_0.gguf").string());
  check("minilm", *gguf, nullptr, 0.1f, 0.05f);
}

// The WordPiece vocabulary rebuilt from GGUF metadata against the tokenizers library on every
// string of the tokenizer goldens for MiniLM (golden_tokenizer.py): ids, byte offsets, words.
TEST(BertGguf, VocabularyTokenizesAsTokenizerJson) {
  const auto gguf = Model::load((goldens() / "minilm-f32.gguf").string());
  const headscope::Tokenizer& tok = gguf->tokenizer();
  const headscope::Tokenizer& json = headscope::testing::default_model().tokenizer();
  ASSERT_EQ(tok.vocab_size(), json.vocab_size());
  int32_t same_pieces = 0;
  for (int32_t id = 0; id < json.vocab_size(); ++id) same_pieces += tok.token_text(id) == json.token_text(id);
  EXPECT_EQ(same_pieces, json.vocab_size());
  std::ifstream in(headscope::testing::goldens_dir("tokenizer") / "minilm.jsonl");
  ASSERT_TRUE(in) << "missing tokenizer goldens; run `make goldens`";
  size_t total = 0, agree = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json g = nlohmann::json::parse(line);
    const Encoding enc = tok.encode(g.at("text").get<std::string>(), {});
    const auto ids = g.at("ids").get<std::vector<int32_t>>();
    const auto offsets = g.at("offsets").get<std::vector<std::vector<int64_t>>>();
    const auto words = g.at("words").get<std::vector<int32_t>>();
    bool same = enc.ids() == ids;
    for (size_t i = 0; same && i < ids.size(); ++i) {
      const headscope::Token& t = enc.tokens[i];
      same = t.begin == offsets[i][0] && t.end == offsets[i][1] && t.word == words[i] && t.special == (words[i] == -1);
    }
    ++total;
    agree += same;
    if (!same && total - agree <= 5) ADD_FAILURE() << "differs on " << g.at("text").dump();
  }
  std::printf("[ bert gguf ] vocabulary pieces equal: %d/%d; strings tokenized alike: %zu/%zu\n", same_pieces,
              json.vocab_size(), agree, total);
  EXPECT_GE(total, 2000u);
  EXPECT_EQ(agree, total);
}

// RoBERTa as llama.cpp's converter writes it ("bert" with a byte-level BPE vocabulary and the
// position table cut past the padding index): a tiny random RobertaModel, against transformers and
// against the same folder loaded from safetensors (whose table keeps the rows before the cut).
TEST(RobertaGguf, TinyRandomRobertaFromConverterMatchesTransformers) {
  const auto gguf = Model::load((goldens() / "tiny_roberta.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_roberta").string());
  EXPECT_EQ(gguf->config().max_positions, twin->config().max_positions);  // 130 rows − (pad 1 + 1)
  EXPECT_EQ(gguf->config().max_positions, 128);
  check("tiny_roberta", *gguf, twin.get(), 1e-5f, 1e-4f, "roberta");
}

// The byte-level vocabulary and RoBERTa's template rebuilt from the GGUF metadata against the
// model's own tokenizer.json (RobertaProcessing, trimmed offsets) on the golden texts and every
// string of the tokenizer goldens: ids, byte offsets, words, special flags.
TEST(RobertaGguf, VocabularyTokenizesAsTokenizerJson) {
  const auto gguf = Model::load((goldens() / "tiny_roberta.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_roberta").string());
  const headscope::Tokenizer& tok = gguf->tokenizer();
  const headscope::Tokenizer& json = twin->tokenizer();
  ASSERT_EQ(tok.vocab_size(), json.vocab_size());
  std::vector<std::string> texts;
  const nlohmann::json golden = manifest();  // kept alive: a range-for over manifest()[...] reads a destroyed temporary
  for (const auto& p : golden.at("tiny_roberta")) texts.push_back(p.at("text").get<std::string>());
  std::ifstream in(headscope::testing::goldens_dir("tokenizer") / "minilm.jsonl");
  ASSERT_TRUE(in) << "missing tokenizer goldens; run `make goldens`";
  for (std::string line; std::getline(in, line);)
    texts.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
  texts.push_back("<s>a <mask> b</s>");  // special pieces written in the text match whole
  size_t agree = 0;
  for (const std::string& text : texts) {
    const Encoding a = tok.encode(text, {}), b = json.encode(text, {});
    bool same = a.ids() == b.ids();
    for (size_t i = 0; same && i < a.size(); ++i) {
      const headscope::Token &x = a.tokens[i], &y = b.tokens[i];
      same = x.begin == y.begin && x.end == y.end && x.word == y.word && x.special == y.special;
    }
    agree += same;
    if (!same && texts.size() - agree <= 5) ADD_FAILURE() << "differs on " << nlohmann::json(text).dump();
  }
  std::printf("[ roberta gguf ] strings tokenized as tokenizer.json does: %zu/%zu\n", agree, texts.size());
  EXPECT_GE(texts.size(), 2000u);
  EXPECT_EQ(agree, texts.size());
  const Encoding first = tok.encode("cat", {});
  ASSERT_GE(first.size(), 3u);
  EXPECT_EQ(first.ids().front(), 0);  // <s>
  EXPECT_EQ(first.ids().back(), 2);   // </s>
}

// The converter removed the padding token's position row, which transformers gives a padding
// token in the text; running one is refused, not given some other row.
TEST(RobertaGguf, PaddingTokenInTheTextIsRefused) {
  const auto gguf = Model::load((goldens() / "tiny_roberta.gguf").string());
  const Encoding enc = gguf->encode("a <pad> b");
  const std::vector<int32_t> ids = enc.ids();
  ASSERT_EQ(std::count(ids.begin(), ids.end(), 1), 1);
  expect_error([&] { gguf->run(enc, {}); }, {"padding token", "id 1", "Hugging Face folder"});
}

// DistilBERT as the converter writes it: "bert" with no token_types tensor and
// tokenizer.ggml.token_type_count 1 (tiny random DistilBertModel over MiniLM's vocabulary).
TEST(DistilBertGguf, TinyRandomDistilBertFromConverterMatchesTransformers) {
  const auto gguf = Model::load((goldens() / "tiny_distilbert.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_distilbert").string());
  EXPECT_EQ(gguf->config().n_layer, 2);
  check("tiny_distilbert", *gguf, twin.get(), 1e-5f, 1e-4f, "distilbert");
}

// XLM-RoBERTa as the converter writes it ("bert" with a "t5" Unigram vocabulary, the charsmap,
// and the position table cut past the padding index): a tiny random XLMRobertaModel over a
// sentencepiece model trained by golden_bert_gguf.py. Both files hold the same f32 weights and
// run through the same encoder, so the GGUF run equals the safetensors run bit for bit.
TEST(XlmrGguf, TinyRandomXlmrFromConverterMatchesTransformers) {
  const auto gguf = Model::load((goldens() / "tiny_xlmr.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_xlmr").string());
  EXPECT_EQ(gguf->config().max_positions, twin->config().max_positions);  // 130 rows − (pad 1 + 1)
  EXPECT_EQ(gguf->config().max_positions, 128);
  EXPECT_EQ(gguf->config().vocab_size, 1002);
  check("tiny_xlmr", *gguf, twin.get(), 1e-5f, 1e-4f, "xlm-roberta");
  const nlohmann::json golden = manifest();
  for (const auto& p : golden.at("tiny_xlmr")) {
    const std::string text = p.at("text").get<std::string>();
    const Capture a = gguf->run(gguf->encode(text), {}), b = twin->run(twin->encode(text), {});
    EXPECT_EQ(a.attention.data, b.attention.data) << text;
    EXPECT_EQ(a.hidden_states.data, b.hidden_states.data) << text;
  }
}

// The Unigram vocabulary, charsmap and template rebuilt from the GGUF metadata against the
// tokenizers library running the model's tokenizer.json (cases.json: golden_precompiled's ~2,400
// strings, hostile normalization cases included): ids, byte offsets, words, special flags.
TEST(XlmrGguf, VocabularyTokenizesAsTokenizerJson) {
  const auto gguf = Model::load((goldens() / "tiny_xlmr.gguf").string());
  const auto twin = Model::load((goldens() / "tiny_xlmr").string());
  const headscope::Tokenizer& tok = gguf->tokenizer();
  ASSERT_EQ(tok.vocab_size(), twin->tokenizer().vocab_size());
  int32_t same_pieces = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    same_pieces += tok.token_text(id) == twin->tokenizer().token_text(id);
  EXPECT_EQ(same_pieces, tok.vocab_size());  // <mask> included: the file spells it "[PAD1000]"
  std::ifstream in(goldens() / "tiny_xlmr" / "cases.json");
  ASSERT_TRUE(in) << "missing " << goldens() / "tiny_xlmr" / "cases.json"
                  << "; run `make goldens`";
  const nlohmann::json cases = nlohmann::json::parse(in);
  size_t agree = 0;
  for (const nlohmann::json& g : cases) {
    const Encoding enc = tok.encode(g.at("text").get<std::string>(), {});
    const auto ids = g.at("ids").get<std::vector<int32_t>>();
    const auto offsets = g.at("offsets").get<std::vector<std::vector<int64_t>>>();
    const auto words = g.at("words").get<std::vector<int32_t>>();
    bool same = enc.ids() == ids;
    for (size_t i = 0; same && i < ids.size(); ++i) {
      const headscope::Token& t = enc.tokens[i];
      same = t.begin == offsets[i][0] && t.end == offsets[i][1] && t.word == words[i];
    }
    agree += same;
    if (!same && cases.size() - agree <= 5) ADD_FAILURE() << "differs on " << g.at("text").dump();
  }
  std::printf("[ xlmr gguf ] vocabulary pieces equal: %d/%d; strings tokenized as tokenizer.json does: %zu/%zu\n",
              same_pieces, tok.vocab_size(), agree, cases.size());
  EXPECT_GE(cases.size(), 2000u);
  EXPECT_EQ(agree, cases.size());
  const Encoding masked = tok.encode("a<mask>", {});
  ASSERT_GE(masked.size(), 3u);
  EXPECT_EQ(masked.ids().front(), 0);                // <s>
  EXPECT_EQ(masked.ids()[masked.size() - 2], 1001);  // <mask>, matched whole
  EXPECT_EQ(masked.ids().back(), 2);                 // </s>
}

// ---- hand-built BERT GGUFs: d_model 4, 2 heads, 1 layer, d_ff 8, 8 positions, 6 pieces ----

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(const std::string& s) { return u64(s.size()) + s; }
std::string f32_array(const std::vector<float>& v) {  // ARRAY of FLOAT32, without the ARRAY type tag
  std::string out = u32(6) + u64(v.size());
  for (float x : v) out += std::string(reinterpret_cast<const char*>(&x), 4);
  return out;
}

struct TinyGguf {
  std::map<std::string, std::string> kv;                // key -> type + value bytes
  std::map<std::string, std::vector<int64_t>> tensors;  // name -> row-major shape (F32)

  TinyGguf() {
    const auto u32kv = [](uint32_t v) { return u32(4) + u32(v); };
    kv["general.architecture"] = u32(8) + str("bert");
    kv["bert.block_count"] = u32kv(1);
    kv["bert.context_length"] = u32kv(8);
    kv["bert.embedding_length"] = u32kv(4);
    kv["bert.feed_forward_length"] = u32kv(8);
    kv["bert.attention.head_count"] = u32kv(2);
    float eps = 1e-12f;
    kv["bert.attention.layer_norm_epsilon"] = u32(6) + std::string(reinterpret_cast<const char*>(&eps), 4);
    kv["bert.attention.causal"] = u32(7) + std::string(1, '\0');
    kv["bert.pooling_type"] = u32kv(1);  // mean pooling: not used, must not matter
    kv["tokenizer.ggml.model"] = u32(8) + str("bert");
    // As the converter spells vocab.txt [PAD] [UNK] [CLS] [SEP] the ##b: control pieces as they
    // are, word-initial pieces behind "▁", continuation pieces without "##".
    set_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581the", "b"});
    std::string types = u32(5) + u64(6);
    for (uint32_t t : {3, 3, 3, 3, 1, 1}) types += u32(t);
    kv["tokenizer.ggml.token_type"] = u32(9) + types;
    kv["tokenizer.ggml.unknown_token_id"] = u32kv(1);
    kv["tokenizer.ggml.bos_token_id"] = u32kv(2);
    kv["tokenizer.ggml.seperator_token_id"] = u32kv(3);
    kv["tokenizer.ggml.normalizer.lowercase"] = u32(7) + std::string(1, '\1');
    tensors = {{"token_embd.weight", {6, 4}},
               {"position_embd.weight", {8, 4}},
               {"token_types.weight", {2, 4}},
               {"token_embd_norm.weight", {4}},
               {"token_embd_norm.bias", {4}}};
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      tensors[std::string("blk.0.") + m + ".weight"] = {4, 4};
      tensors[std::string("blk.0.") + m + ".bias"] = {4};
    }
    tensors["blk.0.ffn_up.weight"] = {8, 4};
    tensors["blk.0.ffn_up.bias"] = {8};
    tensors["blk.0.ffn_down.weight"] = {4, 8};
    tensors["blk.0.ffn_down.bias"] = {4};
    for (const char* n : {"attn_output_norm", "layer_output_norm"}) {
      tensors[std::string("blk.0.") + n + ".weight"] = {4};
      tensors[std::string("blk.0.") + n + ".bias"] = {4};
    }
  }

  void set_tokens(const std::vector<std::string>& pieces) {  // six: the rows of token_embd
    std::string tokens = u32(8) + u64(pieces.size());
    for (const std::string& t : pieces) tokens += str(t);
    kv["tokenizer.ggml.tokens"] = u32(9) + tokens;
  }

  // The file: header, metadata, tensor infos (ne = shape reversed), data aligned to 32; every
  // value 0.01·(its index + 1), so LayerNorms see varied inputs.
  std::string bytes() const {
    std::string out = "GGUF" + u32(3) + u64(tensors.size()) + u64(kv.size());
    for (const auto& [k, v] : kv) out += str(k) + v;
    std::string data;
    for (const auto& [name, shape] : tensors) {
      out += str(name) + u32(uint32_t(shape.size()));
      int64_t n = 1;
      for (auto d = shape.rbegin(); d != shape.rend(); ++d) out += u64(uint64_t(*d)), n *= *d;
      out += u32(0) + u64(data.size());
      for (int64_t i = 0; i < n; ++i) {
        const float v = 0.01f * float(i + 1);
        data += std::string(reinterpret_cast<const char*>(&v), 4);
      }
      data.resize((data.size() + 31) / 32 * 32, '\0');
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out + data;
  }
  std::string write(const TempDir& dir) const {
    const std::string path = dir.file("tiny.gguf");
    write_raw(path, bytes());
    return path;
  }
};

TEST(BertGgufHandBuilt, LoadsRunsAndUndoesThePhantomSpaces) {
  TempDir dir;
  const auto model = Model::load(TinyGguf().write(dir));
  EXPECT_EQ(model->config().architecture, "bert");
  EXPECT_EQ(model->config().d_head, 2);
  // "THE theb" lowercased: [CLS] the the ##b [SEP]; "##b" is the converter's "b".
  const Encoding enc = model->encode("THE theb");
  EXPECT_EQ(enc.ids(), (std::vector<int32_t>{2, 4, 4, 5, 3}));
  EXPECT_EQ(model->tokenizer().token_text(5), "##b");
  EXPECT_EQ(model->tokenizer().token_text(4), "the");
  EXPECT_EQ(enc.tokens[3].begin, 7);
  EXPECT_EQ(enc.tokens[3].end, 8);
  const Capture cap = model->run(enc, {});
  EXPECT_EQ(cap.attention.shape, (std::vector<int64_t>{1, 2, 5, 5}));
  // Bidirectional: every row of every head sums to 1 over all five keys, the last included.
  for (int64_t r = 0; r < 10; ++r) {
    float sum = 0.0f;
    for (int64_t k = 0; k < 5; ++k) sum += cap.attention.data[size_t(r * 5 + k)];
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
    EXPECT_GT(cap.attention.data[size_t(r * 5 + 4)], 0.0f);
  }
}

// Files converted before tokenizer.ggml.normalizer.lowercase existed: an uncased vocabulary (no
// ASCII capital in any piece) lowercases, a cased one does not.
TEST(BertGgufHandBuilt, LowercaseInferredWhenTheKeyIsAbsent) {
  {
    TempDir dir;
    TinyGguf g;
    g.kv.erase("tokenizer.ggml.normalizer.lowercase");
    EXPECT_EQ(Model::load(g.write(dir))->encode("THE").ids(), (std::vector<int32_t>{2, 4, 3}));
  }
  {
    TempDir dir;
    TinyGguf g;
    g.kv.erase("tokenizer.ggml.normalizer.lowercase");
    g.set_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581the", "\u2581The"});
    const auto model = Model::load(g.write(dir));
    EXPECT_EQ(model->encode("The THE the").ids(), (std::vector<int32_t>{2, 5, 1, 4, 3}));
  }
}

// Two entries that spell the same WordPiece piece ("▁the" twice, as a damaged or hostile file may):
// the later id is the piece's, as when tokenizer.json lists a key twice; nothing breaks.
TEST(BertGgufHandBuilt, DuplicatePiecesKeepTheLaterId) {
  TempDir dir;
  TinyGguf g;
  g.set_tokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "\u2581the", "\u2581the"});
  EXPECT_EQ(Model::load(g.write(dir))->encode("the").ids(), (std::vector<int32_t>{2, 5, 3}));
}

TEST(BertGgufHandBuilt, RefusalsNameWhatIsWrong) {
  {
    TempDir dir;
    TinyGguf g;
    g.tensors.erase("blk.0.attn_k.weight");
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "blk.0.attn_k.weight"});
  }
  {
    TempDir dir;
    TinyGguf g;
    g.tensors["blk.0.attn_q.weight"] = {4, 3};
    expect_error([&] { Model::load(g.write(dir)); }, {"blk.0.attn_q.weight", "[4, 3]"});
  }
  {
    TempDir dir;
    TinyGguf g;  // a BERT that lost its token-type table: not taken for DistilBERT
    g.tensors.erase("token_types.weight");
    expect_error([&] { Model::load(g.write(dir)); },
                 {"tiny.gguf", "token_types.weight", "token_type_count is absent", "DistilBERT"});
    g.kv["tokenizer.ggml.token_type_count"] = u32(4) + u32(2);
    expect_error([&] { Model::load(g.write(dir)); }, {"token_types.weight", "token_type_count is 2", "DistilBERT"});
    g.kv["tokenizer.ggml.token_type_count"] = u32(4) + u32(1);
    EXPECT_EQ(Model::load(g.write(dir))->config().architecture, "distilbert");
  }
  {
    TempDir dir;
    TinyGguf g;
    g.tensors["token_types.weight"] = {2, 5};
    expect_error([&] { Model::load(g.write(dir)); }, {"token_types.weight"});
  }
  {
    TempDir dir;
    TinyGguf g;
    g.kv["bert.attention.causal"] = u32(7) + std::string(1, '\1');
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "bert.attention.causal", "true"});
  }
  {
    TempDir dir;
    TinyGguf g;
    g.kv["tokenizer.ggml.model"] = u32(8) + str("wpm");
    expect_error([&] { Model::load(g.write(dir)); },
                 {"tokenizer.ggml.model 'wpm'", "XLM-RoBERTa's 't5'", "Hugging Face folder"});
  }
  {
    TempDir dir;
    TinyGguf g;
    g.kv["tokenizer.ggml.model"] = u32(8) + str("gpt2");  // RoBERTa, with half of its template
    g.set_tokens({"<s>", "<pad>", "</s>", "a", "b", "c"});
    g.kv["tokenizer.ggml.add_bos_token"] = u32(7) + std::string(1, '\1');
    g.kv["tokenizer.ggml.add_eos_token"] = u32(7) + std::string(1, '\0');
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "add_bos_token", "add_eos_token", "<s>"});
  }
  {
    TempDir dir;
    TinyGguf g;
    g.kv["bert.attention.head_count"] = u32(4) + u32(3);
    expect_error([&] { Model::load(g.write(dir)); }, {"bert.embedding_length 4", "bert.attention.head_count 3"});
  }
}

// XLM-RoBERTa's layout on the hand-built file: a "t5" Unigram vocabulary with scores, <unk> of
// type 2, <pad> the padding id (the position table then starts past it).
TinyGguf tiny_xlmr() {
  TinyGguf g;
  g.kv["tokenizer.ggml.model"] = u32(8) + str("t5");
  g.set_tokens({"<s>", "<pad>", "</s>", "<unk>", "\u2581the", "\u2581b"});
  std::string types = u32(5) + u64(6);
  for (uint32_t t : {3, 3, 3, 2, 1, 1}) types += u32(t);
  g.kv["tokenizer.ggml.token_type"] = u32(9) + types;
  g.kv["tokenizer.ggml.scores"] = u32(9) + f32_array({0, 0, 0, 0, -1, -2});
  g.kv["tokenizer.ggml.unknown_token_id"] = u32(4) + u32(3);
  g.kv["tokenizer.ggml.bos_token_id"] = u32(4) + u32(0);
  g.kv["tokenizer.ggml.seperator_token_id"] = u32(4) + u32(2);
  g.kv["tokenizer.ggml.padding_token_id"] = u32(4) + u32(1);
  g.kv.erase("tokenizer.ggml.normalizer.lowercase");
  return g;
}

TEST(XlmrGgufHandBuilt, LoadsWithoutACharsmap) {
  TempDir dir;
  const auto model = Model::load(tiny_xlmr().write(dir));
  EXPECT_EQ(model->config().architecture, "xlm-roberta");
  EXPECT_EQ(model->config().max_positions, 8);  // bert.context_length: the rows the converter kept
  // "the  b x": spaces runs folded, "▁" prepended; x is no piece: <unk>.
  const Encoding enc = model->encode("the  b x");
  EXPECT_EQ(enc.ids(), (std::vector<int32_t>{0, 4, 5, 3, 2}));
  EXPECT_EQ(enc.tokens[2].end, 6);
  EXPECT_EQ(enc.tokens[2].word, 1);
  EXPECT_EQ(model->run(enc, {}).attention.shape, (std::vector<int64_t>{1, 2, 5, 5}));
}

// Hostile vocabularies: each refused with the key that is wrong, never read past its end.
TEST(XlmrGgufHandBuilt, RefusalsNameWhatIsWrong) {
  const auto bytes = [](const std::string& b) { return u32(9) + u32(0) + u64(b.size()) + b; };  // ARRAY of UINT8
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();  // the header says a 64-byte trie; 4 bytes follow
    g.kv["tokenizer.ggml.precompiled_charsmap"] = bytes(u32(64) + "abcd");
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "tokenizer.ggml.precompiled_charsmap"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();  // shorter than its own header
    g.kv["tokenizer.ggml.precompiled_charsmap"] = bytes("ab");
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "tokenizer.ggml.precompiled_charsmap"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();  // no bytes at all
    g.kv["tokenizer.ggml.precompiled_charsmap"] = bytes("");
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "tokenizer.ggml.precompiled_charsmap"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv["tokenizer.ggml.precompiled_charsmap"] = u32(9) + u32(8) + u64(1) + str("x");  // strings, not bytes
    expect_error([&] { Model::load(g.write(dir)); }, {"tokenizer.ggml.precompiled_charsmap", "not an array of bytes"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();  // well-formed but over the budget
    g.kv["tokenizer.ggml.precompiled_charsmap"] =
        bytes(std::string(size_t(headscope::limits::kMaxPrecompiledCharsmapBytes) + 1, '\0'));
    expect_error([&] { Model::load(g.write(dir)); },
                 {"tokenizer.ggml.precompiled_charsmap has 16777217 entries", "16777216 allowed"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv["tokenizer.ggml.scores"] = u32(9) + f32_array({0, 0, 0, 0, -1});
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "tokenizer.ggml.scores has 5 entries for 6 tokens"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv.erase("tokenizer.ggml.scores");
    expect_error([&] { Model::load(g.write(dir)); }, {"tiny.gguf", "needs tokenizer.ggml.scores"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv["tokenizer.ggml.scores"] = u32(9) + f32_array({0, 0, 0, 0, -1, std::nanf("")});
    expect_error([&] { Model::load(g.write(dir)); }, {"tokenizer.ggml.scores entry 5", "not a finite number"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv["tokenizer.ggml.unknown_token_id"] = u32(4) + u32(99);
    expect_error([&] { Model::load(g.write(dir)); },
                 {"tiny.gguf", "tokenizer.ggml.unknown_token_id is 99", "6 tokens"});
  }
  {
    TempDir dir;
    TinyGguf g = tiny_xlmr();
    g.kv["tokenizer.ggml.mask_token_id"] = u32(4) + u32(6);
    expect_error([&] { Model::load(g.write(dir)); }, {"tokenizer.ggml.mask_token_id is 6", "6 tokens"});
  }
}

}  // namespace
