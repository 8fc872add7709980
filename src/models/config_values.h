// headscope — reading hyper-parameters from config.json and GGUF metadata, checked.
//
// Every value a family reads goes through one of these: the JSON type (or GGUF value type) must
// be right, the value in range, and a failure is an Error naming the file and the key, never a
// nlohmann type_error, a silent truncation (384.7 heads read as 384) or a NaN that reaches a
// kernel. A value beyond a budget of headscope/limits.h is a ResourceError, refused before any
// storage is sized from it.
//
// Integers: a JSON integer, or a float with an integral value (4096.0: Python's json writes
// floats for integers computed in floating point, and transformers accepts them); 384.7 is
// refused. Booleans are never numbers.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "headscope/model.h"

namespace headscope::io {
class GgufFile;
}

namespace headscope::models {

// ---- config.json; `where` is the file, for messages ----

// A required integer in [lo, hi]; above `hi` (a budget) is a ResourceError.
int64_t json_int(const nlohmann::json& c, const char* key, const std::string& where, int64_t lo, int64_t hi);
// The same, or `fallback` when the key is absent or null.
int64_t json_int(const nlohmann::json& c, const char* key, const std::string& where, int64_t lo, int64_t hi,
                 int64_t fallback);
// A finite number (integer or float), or `fallback` when absent or null.
double json_number(const nlohmann::json& c, const char* key, const std::string& where, double fallback);
// A required finite number.
double json_number(const nlohmann::json& c, const char* key, const std::string& where);
bool json_bool(const nlohmann::json& c, const char* key, const std::string& where, bool fallback);
std::string json_string(const nlohmann::json& c, const char* key, const std::string& where,
                        const std::string& fallback);

// ---- GGUF metadata (any integer width; range as above) ----

int64_t gguf_int(const io::GgufFile& f, const std::string& key, int64_t lo, int64_t hi);
int64_t gguf_int(const io::GgufFile& f, const std::string& key, int64_t lo, int64_t hi, int64_t fallback);
double gguf_number(const io::GgufFile& f, const std::string& key, double fallback);  // finite

// ---- checks shared by the families ----

// The sizes every Hugging Face config of the BERT and Llama families names the same way
// (num_hidden_layers, num_attention_heads, hidden_size, intermediate_size, vocab_size,
// max_position_embeddings), each an integer within its budget of limits.h, into `m`.
void read_hf_sizes(const nlohmann::json& c, const std::string& where, ModelConfig& m);

// A normalisation epsilon: a normal positive float no larger than 1 (0, NaN, Inf or a denormal
// would divide by zero or make every output NaN). `what` names the file and key.
float norm_epsilon(double value, const std::string& what);
// A RoPE base (rope_theta): finite and at least 1 (θ_i = base^(−2i/d) must not grow with i).
double rope_base(double value, const std::string& what);
// The shape of a loaded config: every size positive and within limits.h, n_kv_head divides
// n_head, d_model divisible by n_head where the family derives d_head from it. Throws Error
// (ResourceError beyond a budget) naming `where`.
void check_model_shape(const ModelConfig& m, const std::string& where);

// Refuses, by key, config.json options that change the computation and that no family implements,
// whatever the family: mixtures of experts (num_experts, num_local_experts, n_routed_experts, …),
// ALiBi, QK normalisation flags, encoder-decoder models, quantized checkpoints
// (quantization_config). A key that is absent, null, false or 0 is not an option in use.
void check_unsupported_options(const nlohmann::json& c, const std::string& where);
// The same for the encoder families: a decoder built from an encoder (is_decoder) or one with
// cross-attention to another model (add_cross_attention).
void check_encoder_options(const nlohmann::json& c, const std::string& where);

}  // namespace headscope::models
