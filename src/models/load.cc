// headscope — Model::load: finds the model's files and hands them to the family's loader.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "headscope/limits.h"
#include "headscope/model.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/config_values.h"
#include "models/families.h"

namespace headscope {

namespace fs = std::filesystem;

namespace {

// A .gguf file, or a folder with no config.json that holds exactly one .gguf: that file; else "".
std::string gguf_file_of(const std::string& path) {
  if (fs::is_regular_file(path)) return fs::path(path).extension() == ".gguf" ? path : std::string();
  if (!fs::is_directory(path) || fs::exists(fs::path(path) / "config.json")) return {};
  std::string found;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() != ".gguf") continue;
    if (!found.empty()) throw Error(path + ": several .gguf files here; name the one to load by its file path");
    found = entry.path().string();
  }
  return found;
}

// The families, one row each: what config.json's model_type or a GGUF's general.architecture
// names, and the loader. The refusal of any other name lists these rows.
using HfLoader = std::unique_ptr<Model> (*)(const std::string&, const nlohmann::json&, models::WeightCheck&);
using GgufLoader = std::unique_ptr<Model> (*)(std::shared_ptr<const io::GgufFile>, const std::string&,
                                              models::WeightCheck&);
struct HfFamily {
  const char* model_type;
  HfLoader load;
};
struct GgufFamily {
  const char* architecture;
  GgufLoader load;
  bool keeps_stored = true;  // its matrices stay as the file stores them (decoders); false: converted to fp32
};
constexpr HfFamily kHfFamilies[] = {
    {"bert", models::load_bert},           {"roberta", models::load_roberta},
    {"xlm-roberta", models::load_roberta}, {"distilbert", models::load_distilbert},
    {"llama", models::load_llama},         {"mistral", models::load_llama},
    {"qwen2", models::load_llama},         {"qwen3", models::load_llama},
    {"gemma", models::load_gemma},         {"gemma2", models::load_gemma},
    {"gemma3_text", models::load_gemma},   {"gemma3", models::load_gemma},
    {"phi3", models::load_phi3},           {"olmo2", models::load_olmo2},
    {"gpt2", models::load_gpt2},
};
constexpr GgufFamily kGgufFamilies[] = {
    {"llama", models::load_llama_gguf},
    {"qwen2", models::load_llama_gguf},
    {"qwen3", models::load_llama_gguf},
    {"gemma", models::load_gemma_gguf},
    {"gemma2", models::load_gemma_gguf},
    {"gemma3", models::load_gemma_gguf},
    {"phi3", models::load_phi3_gguf},
    {"olmo2", models::load_olmo2_gguf},
    {"gpt2", models::load_gpt2_gguf},
    {"bert", models::load_bert_gguf, /*keeps_stored=*/false},  // the encoder computes in fp32 weights
};

// Families people ask for that headscope knows and does not implement: why, in a few words.
constexpr std::pair<const char*, const char*> kNotImplemented[] = {
    {"modernbert",
     "ModernBERT's rotary positions, alternating global/local attention and GeGLU feed-forward are "
     "not implemented"},
};

// The family of a GGUF's general.architecture, or null.
const GgufFamily* find_gguf_family(const std::string& arch) {
  for (const GgufFamily& family : kGgufFamilies)
    if (arch == family.architecture) return &family;
  return nullptr;
}

// GGUF files name their family in general.architecture (llama.cpp's LLM_ARCH names). The display
// name is the folder's name when a folder was given (the repository's name, as downloaded), else
// the file's name without ".gguf"; general.name is left aside (often a training run's name).
std::unique_ptr<Model> load_gguf(const std::string& file, const std::string& given, models::WeightCheck& check) {
  const fs::path g = fs::path(given).lexically_normal();
  const std::string name = fs::is_directory(given) ? (g.has_filename() ? g : g.parent_path()).filename().string()
                                                   : fs::path(file).stem().string();
  auto gguf = std::make_shared<const io::GgufFile>(file);
  const std::string arch = gguf->get_string("general.architecture");
  // Mixtral and other mixtures of experts are stored under a dense family's architecture name.
  if (const std::string key = arch + ".expert_count"; gguf->has(key) && gguf->get_int(key) != 0)
    throw Error(file + ": metadata '" + key + "' is " + std::to_string(gguf->get_int(key)) +
                ": a mixture of experts is not supported by headscope");
  if (const GgufFamily* family = find_gguf_family(arch)) return family->load(gguf, name, check);
  throw Error(file + ": GGUF architecture '" + arch +
              "' is not supported (supported: " + models::supported_gguf_architectures() + ")");
}

std::unique_ptr<Model> load_family(const std::string& path, models::WeightCheck& check) {
  if (path.empty()) throw Error("no model given: the path is empty (a Hugging Face model directory or a .gguf file)");
  if (!fs::exists(path)) throw Error(path + ": no such file or directory");
  if (const std::string gguf = gguf_file_of(path); !gguf.empty()) return load_gguf(gguf, path, check);
  if (!fs::is_directory(path))
    throw Error(path + ": not a model directory (expected a folder with config.json, *.safetensors, tokenizer.json)");
  const fs::path config_path = fs::path(path) / "config.json";
  if (!fs::exists(config_path)) throw Error(path + ": no config.json (is this a Hugging Face model directory?)");
  std::error_code ec;
  if (const uintmax_t size = fs::file_size(config_path, ec); !ec && size > limits::kMaxConfigBytes)
    throw ResourceError(config_path.string() + ": " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(limits::kMaxConfigBytes) + " a config.json may have (is it the right file?)");
  std::ifstream in(config_path);
  nlohmann::json config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) throw Error(config_path.string() + ": not a valid JSON object");
  const std::string type = config.contains("model_type") && config["model_type"].is_string()
                               ? config["model_type"].get<std::string>()
                               : std::string();
  for (const HfFamily& family : kHfFamilies) {
    if (type != family.model_type) continue;
    models::check_unsupported_options(config, config_path.string());
    return family.load(path, config, check);
  }
  std::string why;
  for (const auto& [name, reason] : kNotImplemented)
    if (type == name) why = " (" + std::string(reason) + ")";
  throw Error(config_path.string() + ": model_type \"" + type + "\" is not supported" + why +
              "; supported: " + models::supported_model_types());
}

}  // namespace

bool gguf_kept_as_stored(const std::string& name, io::GgmlType type) {
  // The GGUF names (llama.cpp's) of what the decoder families read with TensorReader::matrix:
  // Q, K, V (or fused QKV), W_O, gate, up, down, the token embedding and the output head.
  static constexpr std::string_view kMatrices[] = {".attn_q.weight",      ".attn_k.weight",   ".attn_v.weight",
                                                   ".attn_qkv.weight",    ".ffn_gate.weight", ".ffn_up.weight",
                                                   ".attn_output.weight", ".ffn_down.weight"};
  if (!QuantMatrix::keeps_stored(type)) return false;
  if (name == "token_embd.weight" || name == "output.weight") return true;
  for (std::string_view suffix : kMatrices)
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

LoadEstimate load_estimate(const std::string& path) {
  LoadEstimate e;
  if (path.empty() || !fs::exists(path))
    throw Error((path.empty() ? std::string("no model given") : path + ": no such file or directory"));
  if (const std::string gguf = gguf_file_of(path); !gguf.empty()) {
    const io::GgufFile file(gguf);
    // An architecture not in the table is refused by the loader anyway.
    const GgufFamily* family = find_gguf_family(file.get_string("general.architecture", ""));
    const bool keeps_stored = family == nullptr || family->keeps_stored;
    for (const auto& [name, t] : file.tensors()) {
      e.parameters += uint64_t(t.numel());
      e.file_bytes += t.nbytes;
      if (keeps_stored && gguf_kept_as_stored(name, t.type))
        e.stored_bytes += t.nbytes;
      else
        e.fp32_parameters += uint64_t(t.numel());
    }
  } else {
    const io::WeightStore store = io::WeightStore::open_dir(path);
    for (const std::string& name : store.names()) {
      const io::RawTensor& raw = store.raw(name);
      uint64_t n = 1;
      for (int64_t d : raw.shape) n *= uint64_t(d);
      e.parameters += n;
      e.file_bytes += raw.nbytes;
    }
    e.fp32_parameters = e.parameters;
  }
  // fp32 weights, plus what the loaders and kernels add on top: the fused Q|K|V copies and the
  // packed layouts of the linear layers (an eighth is above what the two real models of the tests
  // measure), and the vocabulary and tokenizer tables. A GGUF's linear layers and embeddings stay
  // as stored (tensor/quant_matrix.h): their bytes in the file, mapped.
  const uint64_t fp32 = 4 * e.fp32_parameters;
  e.bytes = e.stored_bytes + fp32 + fp32 / 8 + limits::kLoadOverheadBytes;
  return e;
}

namespace models {

std::string supported_model_types() {
  std::string out;
  for (const HfFamily& family : kHfFamilies) out += (out.empty() ? "" : ", ") + std::string(family.model_type);
  return out;
}

std::string supported_gguf_architectures() {
  std::string out;
  for (const GgufFamily& family : kGgufFamilies) out += (out.empty() ? "" : ", ") + std::string(family.architecture);
  return out;
}

void WeightCheck::warn(const std::string& message) {
  if (warnings_.size() < limits::kMaxLoadWarnings)
    warnings_.push_back(message);
  else
    ++more_;
}

void WeightCheck::operator()(const Tensor& t, const std::string& name, const std::string& file) {
  for (int64_t d : t.shape)
    if (d <= 0)
      throw Error(file + ": tensor '" + name + "' has shape " + t.shape_str() +
                  "; every dimension of a model weight must be positive (corrupt file?)");
  // One pass over the converted fp32 values (~0.1 s for a 135M-parameter model).
  size_t nan = 0, inf = 0;
  for (float v : t.data) {
    nan += std::isnan(v);
    inf += std::isinf(v);
  }
  count_non_finite(nan, inf, t.numel(), name, file);
}

void WeightCheck::operator()(const QuantMatrix& m, const std::string& name, const std::string& file) {
  // Dequantised panel by panel into one small buffer: the check must not hold the fp32 copy that
  // keeping the blocks as stored avoids.
  const int64_t step = std::max<int64_t>(1, (int64_t{1} << 20) / m.cols());  // ~4 MiB of fp32
  std::vector<float> panel(size_t(std::min(step, m.rows()) * m.cols()));
  size_t nan = 0, inf = 0;
  for (int64_t r0 = 0; r0 < m.rows(); r0 += step) {
    const int64_t n = std::min(step, m.rows() - r0);
    m.dequantize_rows(r0, n, panel.data());
    for (int64_t i = 0; i < n * m.cols(); ++i) {
      nan += std::isnan(panel[size_t(i)]);
      inf += std::isinf(panel[size_t(i)]);
    }
  }
  count_non_finite(nan, inf, m.rows() * m.cols(), name, file);
}

void WeightCheck::count_non_finite(size_t nan, size_t inf, int64_t numel, const std::string& name,
                                   const std::string& file) {
  if (nan + inf == 0) return;
  const std::string what = file + ": tensor '" + name + "' has " + std::to_string(nan + inf) + " non-finite values (" +
                           std::to_string(nan) + " NaN, " + std::to_string(inf) + " Inf) among " +
                           std::to_string(numel);
  if (strict_)
    throw Error(what + "; refused by the strict load check (the file is damaged, or was saved after a diverged run)");
  if (warnings_.size() < limits::kMaxLoadWarnings)
    warnings_.push_back(what + "; outputs that depend on it will be NaN");
  else
    ++more_;
}

std::vector<std::string> WeightCheck::warnings() const {
  std::vector<std::string> out = warnings_;
  if (more_ > 0)
    out.push_back(std::to_string(more_) +
                  " more load warnings (tensors with non-finite values, or the checkpoint's layout)");
  return out;
}

}  // namespace models

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& options) {
  check_load_memory(path, options);
  models::WeightCheck check(options.strict);
  std::unique_ptr<Model> model = load_family(path, check);
  model->warnings_ = check.warnings();
  model->options_ = options;
  return model;
}

Encoding Model::encode(std::string_view text, bool truncate) const {
  EncodeOptions options;
  options.add_special_tokens = true;
  options.max_length = config().max_positions;
  options.truncate = truncate;
  Encoding encoding = tokenizer().encode(text, options);
  const bool any_text =
      std::any_of(encoding.tokens.begin(), encoding.tokens.end(), [](const Token& t) { return !t.special; });
  if (!any_text)
    throw Error("the text is empty (nothing but whitespace or control characters): give some words to analyse");
  return encoding;
}

}  // namespace headscope
