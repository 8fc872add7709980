// headscope — checked reading of hyper-parameters (see config_values.h).
#include "models/config_values.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "headscope/limits.h"
#include "io/gguf.h"

namespace headscope::models {

using nlohmann::json;

namespace {

std::string at(const std::string& where, const std::string& key) { return where + ": \"" + key + "\""; }

// `value` against [lo, hi]: below is a bad file, above `hi` a budget.
int64_t in_range(int64_t value, const std::string& what, int64_t lo, int64_t hi) {
  if (value < lo) throw Error(what + " is " + std::to_string(value) + ", expected at least " + std::to_string(lo));
  if (value > hi)
    throw ResourceError(what + " is " + std::to_string(value) + ", more than headscope's limit of " +
                        std::to_string(hi) + " (corrupt file?)");
  return value;
}

bool absent(const json& c, const char* key) { return !c.is_object() || !c.contains(key) || c[key].is_null(); }

int64_t integer_of(const json& v, const std::string& what, int64_t lo, int64_t hi) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    return in_range(
        u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u), what, lo,
        hi);
  }
  if (v.is_number_integer()) return in_range(v.get<int64_t>(), what, lo, hi);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || std::trunc(d) != d) throw Error(what + " is " + v.dump() + ", expected a whole number");
    // Clamped first: converting a double beyond int64 is undefined; the range check still fails.
    return in_range(static_cast<int64_t>(std::clamp(d, -9.0e18, 9.0e18)), what, lo, hi);
  }
  throw Error(what + " is " + std::string(v.type_name()) + " " + v.dump() + ", expected an integer");
}

}  // namespace

int64_t json_int(const json& c, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  if (absent(c, key)) throw Error(where + ": missing \"" + key + "\"");
  return integer_of(c[key], at(where, key), lo, hi);
}

int64_t json_int(const json& c, const char* key, const std::string& where, int64_t lo, int64_t hi, int64_t fallback) {
  return absent(c, key) ? fallback : integer_of(c[key], at(where, key), lo, hi);
}

double json_number(const json& c, const char* key, const std::string& where) {
  if (absent(c, key)) throw Error(where + ": missing \"" + key + "\"");
  const json& v = c[key];
  if (!v.is_number()) throw Error(at(where, key) + " is " + v.type_name() + " " + v.dump() + ", expected a number");
  const double d = v.get<double>();
  if (!std::isfinite(d)) throw Error(at(where, key) + " is " + v.dump() + ", expected a finite number");
  return d;
}

double json_number(const json& c, const char* key, const std::string& where, double fallback) {
  return absent(c, key) ? fallback : json_number(c, key, where);
}

bool json_bool(const json& c, const char* key, const std::string& where, bool fallback) {
  if (absent(c, key)) return fallback;
  if (!c[key].is_boolean())
    throw Error(at(where, key) + " is " + c[key].type_name() + " " + c[key].dump() + ", expected true or false");
  return c[key].get<bool>();
}

std::string json_string(const json& c, const char* key, const std::string& where, const std::string& fallback) {
  if (absent(c, key)) return fallback;
  if (!c[key].is_string())
    throw Error(at(where, key) + " is " + c[key].type_name() + " " + c[key].dump() + ", expected a string");
  return c[key].get<std::string>();
}

int64_t gguf_int(const io::GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  return in_range(f.get_int(key), f.path() + ": metadata '" + key + "'", lo, hi);
}

int64_t gguf_int(const io::GgufFile& f, const std::string& key, int64_t lo, int64_t hi, int64_t fallback) {
  return f.has(key) ? gguf_int(f, key, lo, hi) : fallback;
}

double gguf_number(const io::GgufFile& f, const std::string& key, double fallback) {
  const double d = f.get_float(key, fallback);
  if (!std::isfinite(d))
    throw Error(f.path() + ": metadata '" + key + "' is " + std::to_string(d) + ", expected a finite number");
  return d;
}

float norm_epsilon(double value, const std::string& what) {
  const float eps = static_cast<float>(value);
  if (!(eps >= std::numeric_limits<float>::min() && eps <= 1.0f))
    throw Error(what + " is " + std::to_string(value) +
                "; a normalisation epsilon must be a positive normal float "
                "no larger than 1 (typically 1e-5 to 1e-12)");
  return eps;
}

double rope_base(double value, const std::string& what) {
  if (!(std::isfinite(value) && value >= 1.0))
    throw Error(what + " is " + std::to_string(value) +
                "; the RoPE base must be a finite number of at least 1 "
                "(typically 10000 to 1000000)");
  return value;
}

void read_hf_sizes(const nlohmann::json& c, const std::string& where, ModelConfig& m) {
  m.n_layer = int(json_int(c, "num_hidden_layers", where, 1, limits::kMaxLayers));
  m.n_head = int(json_int(c, "num_attention_heads", where, 1, limits::kMaxHeads));
  m.d_model = int(json_int(c, "hidden_size", where, 1, limits::kMaxModelWidth));
  m.d_ff = int(json_int(c, "intermediate_size", where, 1, limits::kMaxFeedForward));
  m.vocab_size = int(json_int(c, "vocab_size", where, 1, limits::kMaxVocabulary));
  m.max_positions = int(json_int(c, "max_position_embeddings", where, 1, limits::kMaxPositions));
}

void check_model_shape(const ModelConfig& m, const std::string& where) {
  in_range(m.n_layer, where + ": the number of layers", 1, limits::kMaxLayers);
  in_range(m.n_head, where + ": the number of attention heads", 1, limits::kMaxHeads);
  in_range(m.n_kv_head, where + ": the number of key/value heads", 1, m.n_head);
  if (m.n_head % m.n_kv_head != 0)
    throw Error(where + ": " + std::to_string(m.n_head) + " attention heads cannot share " +
                std::to_string(m.n_kv_head) + " key/value heads evenly");
  in_range(m.d_model, where + ": the model width (hidden size)", 1, limits::kMaxModelWidth);
  in_range(m.d_head, where + ": the head width (hidden size / heads, or head_dim)", 1, limits::kMaxHeadWidth);
  in_range(int64_t(m.n_head) * m.d_head, where + ": heads x head width", 1, limits::kMaxModelWidth);
  in_range(m.d_ff, where + ": the feed-forward width", 1, limits::kMaxFeedForward);
  in_range(m.vocab_size, where + ": the vocabulary size", 1, limits::kMaxVocabulary);
  in_range(m.max_positions, where + ": the position limit", 1, limits::kMaxPositions);
  if (m.eos_token_id < -1 || m.eos_token_id >= m.vocab_size)
    throw Error(where + ": end-of-text token id " + std::to_string(m.eos_token_id) + " is outside the vocabulary of " +
                std::to_string(m.vocab_size));
  norm_epsilon(m.norm_eps, where + ": the normalisation epsilon");
}

namespace {

// An option is in use unless absent, null, false, 0 or an empty string / list / object.
bool in_use(const json& c, const char* key) {
  if (absent(c, key)) return false;
  const json& v = c[key];
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  return !v.empty();
}

void refuse_keys(const json& c, const std::string& where, std::initializer_list<const char*> keys, const char* what) {
  for (const char* key : keys)
    if (in_use(c, key))
      throw Error(at(where, key) + " is " + c[key].dump() + ": " + what + " is not supported by headscope");
}

}  // namespace

void check_unsupported_options(const json& c, const std::string& where) {
  if (!c.is_object()) return;
  refuse_keys(c, where,
              {"num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok",
               "moe_intermediate_size", "n_shared_experts"},
              "a mixture of experts");
  refuse_keys(c, where, {"alibi", "use_alibi", "alibi_bias_max"}, "ALiBi (linear attention biases)");
  refuse_keys(c, where, {"use_qk_norm", "qk_layernorm", "qk_norm"}, "normalising queries and keys");
  refuse_keys(c, where, {"is_encoder_decoder"}, "an encoder-decoder model");
  // GPTQ, AWQ, bitsandbytes, FP8, …: the weights are stored packed under other tensor names.
  if (in_use(c, "quantization_config")) {
    const json& q = c["quantization_config"];
    const std::string method = q.is_object() && q.contains("quant_method") ? q["quant_method"].dump() : q.dump();
    throw Error(at(where, "quantization_config") + " names quant_method " + method +
                ": quantized safetensors checkpoints are not supported; load the unquantized model, or a GGUF of it");
  }
}

void check_encoder_options(const json& c, const std::string& where) {
  if (!c.is_object()) return;
  refuse_keys(c, where, {"is_decoder"}, "an encoder run as a causal decoder");
  refuse_keys(c, where, {"add_cross_attention"}, "cross-attention");
}

}  // namespace headscope::models
