// Hyper-parameters from config.json and GGUF metadata, read by the families' pure functions
// (models/families.h) with no weights: every hostile value — wrong JSON type, fraction where an
// integer belongs, zero, NaN/Inf, beyond a budget of limits.h — is an Error naming the file and
// the key (ResourceError beyond a budget), never a nlohmann exception or a silent truncation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "headscope/limits.h"
#include "headscope/model.h"
#include "io/gguf.h"
#include "models/config_values.h"
#include "models/families.h"
#include "test_support.h"

namespace {

using headscope::Error;
using headscope::ModelConfig;
using headscope::ResourceError;
using headscope::testing::expect_error;
using headscope::testing::TempDir;
using headscope::testing::write_raw;
using nlohmann::json;
namespace models = headscope::models;

const std::string kWhere = "m/config.json";

// all-MiniLM-L6-v2's config.json, as published.
json bert_json() {
  return json::parse(R"({"architectures": ["BertModel"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1, "hidden_size": 384, "initializer_range": 0.02, "intermediate_size": 1536,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
    "num_hidden_layers": 6, "pad_token_id": 0, "position_embedding_type": "absolute", "type_vocab_size": 2,
    "vocab_size": 30522})");
}

// A Llama config in the style of transformers 5 (rope_parameters), with GQA and a window list.
json llama_json() {
  return json::parse(R"({"model_type": "qwen2", "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 96,
    "max_position_embeddings": 256, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05, "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": true, "vocab_size": 320, "eos_token_id": [2, 3], "sliding_window": 16,
    "layer_types": ["full_attention", "sliding_attention"], "head_dim": 16})");
}

json gpt2_json() {
  return json::parse(R"({"model_type": "gpt2", "activation_function": "gelu_new", "n_embd": 64, "n_head": 4,
    "n_layer": 2, "n_positions": 128, "n_inner": null, "vocab_size": 300, "layer_norm_epsilon": 1e-05,
    "eos_token_id": 299, "scale_attn_weights": true})");
}

TEST(Config, ValidConfigsRead) {
  const ModelConfig b = models::bert_config(bert_json(), kWhere);
  EXPECT_EQ(b.n_layer, 6);
  EXPECT_EQ(b.n_head, 12);
  EXPECT_EQ(b.d_head, 32);
  EXPECT_EQ(b.vocab_size, 30522);
  EXPECT_FLOAT_EQ(b.norm_eps, 1e-12f);

  const models::DecoderHyper l = models::llama_config(llama_json(), kWhere);
  EXPECT_EQ(l.cfg.n_kv_head, 2);
  EXPECT_EQ(l.cfg.d_head, 16);
  EXPECT_EQ(l.cfg.eos_token_id, 2);
  EXPECT_EQ(l.window, (std::vector<int64_t>{0, 16}));
  EXPECT_TRUE(l.tied);

  const models::DecoderHyper g = models::gpt2_config(gpt2_json(), kWhere);
  EXPECT_EQ(g.cfg.d_ff, 256);  // n_inner null: 4 · n_embd
  EXPECT_EQ(g.cfg.eos_token_id, 299);
}

TEST(Config, IntegralFloatIsAnIntegerButAFractionIsNot) {
  json c = bert_json();
  c["num_attention_heads"] = 12.0;
  EXPECT_EQ(models::bert_config(c, kWhere).n_head, 12);
  c["num_attention_heads"] = 384.7;  // was read as 384 heads of width 1
  expect_error([&] { models::bert_config(c, kWhere); }, {kWhere, "\"num_attention_heads\"", "384.7", "whole number"});
}

struct Bad {
  const char* key;
  json value;
  std::vector<std::string> expect;
};

void expect_each_refused(json (*base)(), ModelConfig (*read)(const json&), const std::vector<Bad>& cases) {
  for (const Bad& b : cases) {
    SCOPED_TRACE(std::string(b.key) + " = " + b.value.dump());
    json c = base();
    c[b.key] = b.value;
    std::vector<std::string> expect = b.expect;
    expect.push_back(kWhere);
    expect_error([&] { read(c); }, expect);
  }
}

ModelConfig read_bert(const json& c) { return models::bert_config(c, kWhere); }
ModelConfig read_llama(const json& c) { return models::llama_config(c, kWhere).cfg; }
ModelConfig read_gpt2(const json& c) { return models::gpt2_config(c, kWhere).cfg; }

TEST(Config, BertValuesOutOfRangeOrOfTheWrongType) {
  expect_each_refused(bert_json, read_bert,
                      {
                          {"num_hidden_layers", 0, {"\"num_hidden_layers\"", "at least 1"}},
                          {"num_hidden_layers", -3, {"\"num_hidden_layers\""}},
                          {"hidden_size", "384", {"\"hidden_size\"", "string", "expected an integer"}},
                          {"vocab_size", true, {"\"vocab_size\"", "boolean"}},
                          {"vocab_size", 0, {"\"vocab_size\""}},
                          {"max_position_embeddings", json::array({512}), {"\"max_position_embeddings\"", "array"}},
                          {"intermediate_size", 1e300, {"\"intermediate_size\""}},
                          {"layer_norm_eps", 0, {"\"layer_norm_eps\"", "epsilon"}},
                          {"layer_norm_eps", -1e-12, {"\"layer_norm_eps\""}},
                          {"layer_norm_eps", 1e-40, {"\"layer_norm_eps\""}},  // denormal in fp32
                          {"layer_norm_eps",
                           std::numeric_limits<double>::infinity(),
                           {"\"layer_norm_eps\"", "finite"}},  // 1e400 in a file
                          {"layer_norm_eps", "1e-12", {"\"layer_norm_eps\"", "expected a number"}},
                          {"hidden_act", 5, {"\"hidden_act\"", "expected a string"}},
                          {"position_embedding_type", json::object(), {"\"position_embedding_type\""}},
                          {"hidden_size", 383, {"hidden_size 383", "multiple of num_attention_heads 12"}},
                      });
}

TEST(Config, HyperParametersBeyondTheBudgetsAreResourceErrors) {
  // 2^31 − 1 layers: refused before any per-layer storage is sized (the loader would touch 16 GB).
  for (const char* key : {"num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "vocab_size",
                          "max_position_embeddings"}) {
    SCOPED_TRACE(key);
    json c = bert_json();
    c[key] = 2147483647;
    EXPECT_THROW(models::bert_config(c, kWhere), ResourceError);
    expect_error([&] { models::bert_config(c, kWhere); }, {kWhere, key, "2147483647", "limit"});
  }
  json c = llama_json();
  c["num_hidden_layers"] = headscope::limits::kMaxLayers + 1;
  EXPECT_THROW(models::llama_config(c, kWhere), ResourceError);
  c["num_hidden_layers"] = headscope::limits::kMaxLayers;
  c.erase("layer_types");
  EXPECT_EQ(models::llama_config(c, kWhere).window.size(), size_t(headscope::limits::kMaxLayers));
}

TEST(Config, LlamaValues) {
  json rope_theta_zero = llama_json();
  rope_theta_zero["rope_parameters"]["rope_theta"] = 0.0;
  json rope_theta_denormal = llama_json();
  rope_theta_denormal["rope_parameters"]["rope_theta"] = 1e-310;
  json rope_theta_inf = llama_json();
  rope_theta_inf["rope_parameters"]["rope_theta"] = std::numeric_limits<double>::infinity();
  json llama3_equal = llama_json();
  llama3_equal["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                                     {"factor", 8.0},           {"low_freq_factor", 1.0},
                                     {"high_freq_factor", 1.0}, {"original_max_position_embeddings", 8192}};
  for (const auto& [label, c, expect] : std::vector<std::tuple<std::string, json, std::vector<std::string>>>{
           {"rope_theta 0", rope_theta_zero, {"\"rope_theta\"", "RoPE base"}},
           {"rope_theta denormal", rope_theta_denormal, {"\"rope_theta\"", "RoPE base"}},
           {"rope_theta inf", rope_theta_inf, {"\"rope_theta\"", "finite"}},
           {"llama3 high == low", llama3_equal, {"high_freq_factor > low_freq_factor"}},
       }) {
    SCOPED_TRACE(label);
    // c by an init-capture: clang 14 cannot capture a structured binding.
    expect_error([&c = c] { models::llama_config(c, kWhere); }, expect);
  }
  expect_each_refused(
      llama_json, read_llama,
      {
          {"num_key_value_heads", 3, {"4 attention heads cannot share 3"}},
          {"num_key_value_heads", 8, {"\"num_key_value_heads\"", "limit of 4"}},
          {"head_dim", 15, {"head width 15 is odd"}},
          {"head_dim", "16", {"\"head_dim\"", "expected an integer"}},
          {"rms_norm_eps", std::nan(""), {"\"rms_norm_eps\""}},  // nlohmann stores NaN as a null-dumping float
          {"rms_norm_eps", -1.0, {"\"rms_norm_eps\""}},
          {"rope_parameters", "default", {"\"rope_parameters\"", "expected an object"}},
          {"layer_types", json::array({"full_attention"}), {"\"layer_types\"", "2 strings"}},
          {"layer_types", json::array({"full_attention", 7}), {"\"layer_types\"[1]"}},
          {"sliding_window", -1, {"\"sliding_window\""}},
          {"tie_word_embeddings", "yes", {"\"tie_word_embeddings\"", "true or false"}},
          {"mlp_bias", 0, {"\"mlp_bias\"", "true or false"}},
          {"eos_token_id", 320, {"end-of-text token id 320", "vocabulary of 320"}},
          {"eos_token_id", json::array({"</s>"}), {"\"eos_token_id\"", "expected an integer"}},
          {"partial_rotary_factor", "half", {"\"partial_rotary_factor\""}},
          {"model_type", 7, {"\"model_type\""}},
      });
}

TEST(Config, Gpt2Values) {
  expect_each_refused(gpt2_json, read_gpt2,
                      {
                          {"n_head", 3, {"n_embd 64", "multiple of n_head 3"}},
                          {"n_inner", -1, {"\"n_inner\""}},
                          {"n_inner", 2.5, {"\"n_inner\"", "whole number"}},
                          {"layer_norm_epsilon", 0, {"\"layer_norm_epsilon\""}},
                          {"scale_attn_weights", "true", {"\"scale_attn_weights\""}},
                          {"scale_attn_by_inverse_layer_idx", 1, {"\"scale_attn_by_inverse_layer_idx\""}},
                          {"activation_function", json::array(), {"\"activation_function\""}},
                          {"eos_token_id", -5, {"\"eos_token_id\""}},
                      });
}

// Every key of each config set to each wrongly typed value: the reader either accepts it (a key
// it does not read) or throws headscope::Error — no other exception (the CLI's exit 3).
TEST(Config, EveryKeyWithEveryWrongTypeIsAnErrorOrIgnored) {
  const std::vector<json> values = {json("x"),         json(true), json(nullptr), json::array(), json::array({1, 2}),
                                    json::object(),    json(0.5),  json(-1),      json(0),       json(1e300),
                                    json(std::nan(""))};
  int refused = 0;
  for (auto [base, read] : std::vector<std::pair<json (*)(), ModelConfig (*)(const json&)>>{
           {bert_json, read_bert}, {llama_json, read_llama}, {gpt2_json, read_gpt2}}) {
    const json original = base();
    for (const auto& [key, _] : original.items()) {
      for (const json& v : values) {
        json c = base();
        c[key] = v;
        try {
          read(c);
        } catch (const Error& e) {
          ++refused;
          EXPECT_NE(std::string(e.what()).find(kWhere), std::string::npos) << e.what();
        } catch (const std::exception& e) {
          ADD_FAILURE() << key << " = " << v.dump() << ": " << e.what();
        }
      }
    }
  }
  EXPECT_GT(refused, 100);
}

// ---- GGUF metadata ----

std::string u32(uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }
std::string u64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::string str(const std::string& s) { return u64(s.size()) + s; }
std::string kv_u32(const std::string& k, uint32_t v) { return str(k) + u32(4) + u32(v); }
std::string kv_i32(const std::string& k, int32_t v) { return str(k) + u32(5) + u32(static_cast<uint32_t>(v)); }
std::string kv_f32(const std::string& k, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return str(k) + u32(6) + u32(bits);
}
std::string kv_str(const std::string& k, const std::string& v) { return str(k) + u32(8) + str(v); }

// A GGUF file with metadata only (no tensors): what the hyper-parameter readers look at.
std::string gguf_with(const std::map<std::string, std::string>& kvs) {
  std::string out = "GGUF" + u32(3) + u64(0) + u64(kvs.size());
  for (const auto& [_, kv] : kvs) out += kv;
  return out;
}

std::map<std::string, std::string> llama_metadata() {
  return {{"general.architecture", kv_str("general.architecture", "llama")},
          {"llama.block_count", kv_u32("llama.block_count", 2)},
          {"llama.attention.head_count", kv_u32("llama.attention.head_count", 4)},
          {"llama.attention.head_count_kv", kv_u32("llama.attention.head_count_kv", 2)},
          {"llama.embedding_length", kv_u32("llama.embedding_length", 64)},
          {"llama.feed_forward_length", kv_u32("llama.feed_forward_length", 96)},
          {"llama.context_length", kv_u32("llama.context_length", 256)},
          {"llama.vocab_size", kv_u32("llama.vocab_size", 320)},
          {"llama.attention.layer_norm_rms_epsilon", kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)},
          {"llama.rope.freq_base", kv_f32("llama.rope.freq_base", 10000.0f)}};
}

TEST(ConfigGguf, LlamaMetadata) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  write_raw(path, gguf_with(llama_metadata()));
  const models::DecoderHyper ok = models::llama_config(headscope::io::GgufFile(path));
  EXPECT_EQ(ok.cfg.n_layer, 2);
  EXPECT_EQ(ok.cfg.d_head, 16);
  EXPECT_TRUE(ok.tied);

  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      // The 4-byte edit of the attack: 2^31 − 1 blocks.
      {kv_u32("llama.block_count", 0x7FFFFFFF), {"'llama.block_count'", "2147483647", "limit"}},
      {kv_u32("llama.block_count", 0), {"'llama.block_count'", "at least 1"}},
      {kv_i32("llama.attention.head_count", -4), {"'llama.attention.head_count'"}},
      {kv_u32("llama.attention.head_count_kv", 3), {"4 attention heads cannot share 3"}},
      {kv_str("llama.embedding_length", "64"), {"'llama.embedding_length'", "STRING", "integer"}},
      {kv_u32("llama.vocab_size", 0xFFFFFFFF), {"'llama.vocab_size'", "limit"}},
      {kv_f32("llama.attention.layer_norm_rms_epsilon", std::nanf("")), {"'llama.attention.layer_norm_rms_epsilon'"}},
      {kv_f32("llama.attention.layer_norm_rms_epsilon", 0.0f), {"'llama.attention.layer_norm_rms_epsilon'"}},
      {kv_f32("llama.rope.freq_base", 0.0f), {"'llama.rope.freq_base'", "RoPE base"}},
      {kv_f32("llama.rope.freq_base", INFINITY), {"'llama.rope.freq_base'", "finite"}},
  };
  for (const auto& [kv, expect] : cases) {
    SCOPED_TRACE(expect.front());
    auto m = llama_metadata();
    const uint64_t key_len = *reinterpret_cast<const uint64_t*>(kv.data());
    m[kv.substr(8, key_len)] = kv;
    write_raw(path, gguf_with(m));
    const headscope::io::GgufFile f(path);
    std::vector<std::string> want = expect;
    want.push_back(path);
    expect_error([&] { models::llama_config(f); }, want);
  }
  auto m = llama_metadata();
  m["llama.block_count"] = kv_u32("llama.block_count", 0x7FFFFFFF);
  write_raw(path, gguf_with(m));
  EXPECT_THROW(models::llama_config(headscope::io::GgufFile(path)), ResourceError);
}

TEST(ConfigGguf, Gpt2Metadata) {
  TempDir dir;
  const std::string path = dir.file("g.gguf");
  std::map<std::string, std::string> m = {{"general.architecture", kv_str("general.architecture", "gpt2")},
                                          {"gpt2.block_count", kv_u32("gpt2.block_count", 2)},
                                          {"gpt2.attention.head_count", kv_u32("gpt2.attention.head_count", 4)},
                                          {"gpt2.embedding_length", kv_u32("gpt2.embedding_length", 64)},
                                          {"gpt2.feed_forward_length", kv_u32("gpt2.feed_forward_length", 256)},
                                          {"gpt2.context_length", kv_u32("gpt2.context_length", 128)},
                                          {"gpt2.vocab_size", kv_u32("gpt2.vocab_size", 300)}};
  write_raw(path, gguf_with(m));
  EXPECT_EQ(models::gpt2_config(headscope::io::GgufFile(path)).cfg.d_head, 16);
  m["gpt2.attention.head_count"] = kv_u32("gpt2.attention.head_count", 5);
  write_raw(path, gguf_with(m));
  expect_error([&] { models::gpt2_config(headscope::io::GgufFile(path)); }, {path, "multiple of head_count 5"});
  m["gpt2.attention.head_count"] = kv_u32("gpt2.attention.head_count", 4);
  m.erase("gpt2.vocab_size");  // and no tokenizer.ggml.tokens to count: no vocabulary at all
  write_raw(path, gguf_with(m));
  expect_error([&] { models::gpt2_config(headscope::io::GgufFile(path)); }, {path, "vocabulary size is 0"});
}

// ---- encoder families and options no family implements ----

// A RoBERTa config as transformers writes it (type_vocab_size 1, pad 1, 514 position rows).
json roberta_json() {
  json c = bert_json();
  c["model_type"] = "roberta";
  c["pad_token_id"] = 1;
  c["max_position_embeddings"] = 514;
  c["type_vocab_size"] = 1;
  return c;
}

json distilbert_json() {
  return json::parse(R"({"model_type": "distilbert", "activation": "gelu", "dim": 768, "hidden_dim": 3072,
    "n_heads": 12, "n_layers": 6, "max_position_embeddings": 512, "vocab_size": 30522, "pad_token_id": 0,
    "sinusoidal_pos_embds": false})");
}

TEST(Config, EncoderFamilies) {
  const models::RobertaHyper r = models::roberta_config(roberta_json(), kWhere);
  EXPECT_EQ(r.cfg.architecture, "roberta");
  EXPECT_EQ(r.padding_idx, 1);
  EXPECT_EQ(r.position_rows, 514);
  EXPECT_EQ(r.cfg.max_positions, 512);
  const ModelConfig d = models::distilbert_config(distilbert_json(), kWhere);
  EXPECT_EQ(d.n_layer, 6);
  EXPECT_EQ(d.d_head, 64);
  EXPECT_EQ(d.d_ff, 3072);
  EXPECT_FLOAT_EQ(d.norm_eps, 1e-12f);
  EXPECT_FALSE(d.causal);
}

ModelConfig read_roberta(const json& c) { return models::roberta_config(c, kWhere).cfg; }
ModelConfig read_distilbert(const json& c) { return models::distilbert_config(c, kWhere); }

TEST(Config, EncoderOptionsNotImplementedAreRefusedByName) {
  expect_each_refused(
      bert_json, read_bert,
      {
          {"position_embedding_type", "relative_key", {"position_embedding_type \"relative_key\" is not supported"}},
          {"is_decoder", true, {"\"is_decoder\" is true", "causal decoder", "not supported"}},
          {"add_cross_attention", true, {"\"add_cross_attention\" is true", "cross-attention"}},
      });
  expect_each_refused(roberta_json, read_roberta,
                      {
                          {"pad_token_id", 40000, {"\"pad_token_id\" is 40000", "limit"}},
                          {"pad_token_id", 600, {"pad_token_id 600 leaves no positions in the 514"}},
                          {"max_position_embeddings", 2, {"pad_token_id 1 leaves no positions in the 2"}},
                          {"is_decoder", true, {"\"is_decoder\""}},
                      });
  expect_each_refused(distilbert_json, read_distilbert,
                      {
                          {"activation", "relu", {"activation \"relu\" is not supported"}},
                          {"dim", 100, {"dim 100 is not a multiple of n_heads 12"}},
                          {"n_layers", 0, {"\"n_layers\"", "at least 1"}},
                          {"sinusoidal_pos_embds", "yes", {"\"sinusoidal_pos_embds\"", "true or false"}},
                          {"add_cross_attention", true, {"cross-attention"}},
                      });
  // false, 0 and null are options not in use.
  json c = bert_json();
  c["is_decoder"] = false;
  c["add_cross_attention"] = nullptr;
  EXPECT_NO_THROW(read_bert(c));
}

TEST(Config, OptionsNoFamilyImplementsAreRefusedByName) {
  const std::vector<std::pair<json, std::vector<std::string>>> cases = {
      {{{"num_local_experts", 8}}, {"\"num_local_experts\" is 8", "mixture of experts"}},
      {{{"num_experts", 64}}, {"\"num_experts\" is 64", "mixture of experts"}},
      {{{"n_routed_experts", 256}}, {"\"n_routed_experts\"", "mixture of experts"}},
      {{{"num_experts_per_tok", 2}}, {"\"num_experts_per_tok\"", "mixture of experts"}},
      {{{"alibi", true}}, {"\"alibi\" is true", "ALiBi"}},
      {{{"use_qk_norm", true}}, {"\"use_qk_norm\"", "normalising queries and keys"}},
      {{{"is_encoder_decoder", true}}, {"\"is_encoder_decoder\"", "encoder-decoder"}},
      {json::parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})"),
       {"\"quantization_config\" names quant_method \"gptq\"", "quantized safetensors", "GGUF"}},
  };
  for (const auto& [c, parts] : cases) {
    std::vector<std::string> want = parts;
    want.push_back(kWhere);
    // c by an init-capture: clang 14 cannot capture a structured binding.
    expect_error([&c = c] { models::check_unsupported_options(c, kWhere); }, want);
  }
  EXPECT_NO_THROW(models::check_unsupported_options(json::parse(R"({"num_experts": 0, "num_local_experts": null,
      "alibi": false, "moe_intermediate_size": 0})"),
                                                    kWhere));
  EXPECT_NO_THROW(models::check_unsupported_options(llama_json(), kWhere));
}

// Rope scalings other than default and llama3, in both spellings transformers has written.
TEST(Config, UnknownRopeScalingRefusedByName) {
  for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
    SCOPED_TRACE(type);
    json v5 = llama_json();
    v5["rope_parameters"] = {{"rope_type", type}, {"rope_theta", 10000.0}, {"factor", 4.0}};
    expect_error([&] { models::llama_config(v5, kWhere); },
                 {kWhere, std::string("rope type \"") + type + "\" is not supported", "default and llama3"});
    json v4 = llama_json();
    v4.erase("rope_parameters");
    v4["rope_scaling"] = {{"type", type}, {"factor", 4.0}};
    expect_error([&] { models::llama_config(v4, kWhere); }, {std::string("rope type \"") + type + "\""});
  }
}

TEST(ConfigGguf, UnknownArchitectureListsTheDispatchTable) {
  TempDir dir;
  const std::string path = dir.file("m.gguf");
  write_raw(path, gguf_with({{"general.architecture", kv_str("general.architecture", "falcon")}}));
  expect_error([&] { headscope::Model::load(path); },
               {path, "GGUF architecture 'falcon' is not supported",
                "supported: llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2, gpt2, bert"});
  EXPECT_EQ(models::supported_gguf_architectures(),
            "llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, olmo2, gpt2, bert");
  // Mixtral is stored as "llama" with an expert count.
  auto m = llama_metadata();
  m["llama.expert_count"] = kv_u32("llama.expert_count", 8);
  write_raw(path, gguf_with(m));
  expect_error([&] { headscope::Model::load(path); }, {path, "'llama.expert_count' is 8", "mixture of experts"});
}

}  // namespace

// Found by config_fuzzer: a model_type that is not a string made the Gemma loader throw
// nlohmann's type_error instead of a one-line Error.
TEST(ConfigHostile, GemmaLoaderRefusesANumericModelType) {
  const nlohmann::json c = {{"model_type", 0.1}, {"hidden_size", 64}, {"num_hidden_layers", 2}};
  headscope::models::WeightCheck weights(/*strict=*/true);
  EXPECT_THROW(headscope::models::load_gemma("/nonexistent-headscope-test", c, weights), headscope::Error);
}
