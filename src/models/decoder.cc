// headscope — the shared causal decoder (see decoder.h for the forward pass it implements).
#include "models/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "capture/capture.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/families.h"
#include "ops/attention.h"
#include "ops/decoder_pointwise.h"
#include "ops/matmul.h"
#include "ops/norm.h"

namespace headscope {

// Encoders have no incremental mode (Model's defaults; decoders override both).
std::unique_ptr<DecoderState> Model::start() const {
  throw Error(config().name + " is not a causal model: incremental decoding needs a decoder (Llama, GPT-2, ...)");
}
Capture Model::extend(DecoderState&, const std::vector<int32_t>&, const CaptureOptions&, std::vector<float>*) const {
  throw Error(config().name + " is not a causal model: incremental decoding needs a decoder (Llama, GPT-2, ...)");
}

namespace models {

Tensor concat_rows(const std::vector<const Tensor*>& parts) {
  std::vector<int64_t> shape = parts.front()->shape;
  shape[0] = 0;
  for (const Tensor* p : parts) shape[0] += p->shape[0];
  Tensor out(shape);
  float* dst = out.ptr();
  for (const Tensor* p : parts) dst = std::copy(p->data.begin(), p->data.end(), dst);
  return out;
}

Tensor transpose(const Tensor& t) {
  const int64_t R = t.dim(0), C = t.dim(1);
  Tensor out({C, R});
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) out.data[size_t(c * R + r)] = t.data[size_t(r * C + c)];
  return out;
}

namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(const std::string& dir, WeightCheck& check)
      : WeightSource(check), dir_(dir), store_(io::WeightStore::open_dir(dir)) {}
  bool has(const std::string& name) const override { return store_.has(name); }
  std::string describe() const override { return dir_; }

 private:
  Tensor read(const std::string& name, const std::vector<int64_t>& shape) const override { return store_.get(name, shape); }
  std::string file_of(const std::string& name) const override { return store_.raw(name).file; }
  std::string dir_;
  io::WeightStore store_;
};

class GgufSource final : public WeightSource {
 public:
  GgufSource(std::shared_ptr<const io::GgufFile> file, WeightCheck& check) : WeightSource(check), file_(std::move(file)) {}
  bool has(const std::string& name) const override { return file_->has_tensor(name); }
  std::string describe() const override { return file_->path(); }

 private:
  Tensor read(const std::string& name, const std::vector<int64_t>& shape) const override { return file_->to_f32(name, shape); }
  std::string file_of(const std::string&) const override { return file_->path(); }
  std::shared_ptr<const io::GgufFile> file_;
};

// The KV cache: for every layer, keys and values of all tokens so far, rows of n_kv_head·d_head
// (keys after RoPE). Grows by doubling.
class Cache final : public DecoderState {
 public:
  Cache(int n_layer, int64_t width) : k(size_t(n_layer)), v(size_t(n_layer)), width(width) {}
  int64_t length() const override { return n; }
  void reserve(int64_t rows) {
    if (rows <= capacity) return;
    capacity = std::max(rows, 2 * capacity);
    for (auto& x : k) x.resize(size_t(capacity * width));
    for (auto& x : v) x.resize(size_t(capacity * width));
  }
  std::vector<std::vector<float>> k, v;  // [n_layer][capacity · width]
  int64_t width = 0;
  int64_t n = 0, capacity = 0;
};

}  // namespace

Tensor WeightSource::get(const std::string& name, const std::vector<int64_t>& shape) const {
  Tensor t = read(name, shape);
  check_(t, name, file_of(name));
  return t;
}

std::unique_ptr<WeightSource> safetensors_source(const std::string& dir, WeightCheck& check) {
  return std::make_unique<SafetensorsSource>(dir, check);
}
std::unique_ptr<WeightSource> gguf_source(std::shared_ptr<const io::GgufFile> file, WeightCheck& check) {
  return std::make_unique<GgufSource>(std::move(file), check);
}

DecoderModel::DecoderModel(ModelConfig config, DecoderArch arch, DecoderWeights weights, std::unique_ptr<Tokenizer> tokenizer)
    : cfg_(std::move(config)), arch_(std::move(arch)), w_(std::move(weights)), tokenizer_(std::move(tokenizer)) {
  const int64_t H = cfg_.n_head, Hkv = cfg_.n_kv_head;
  if (H <= 0 || Hkv <= 0 || H % Hkv != 0) {
    throw Error(cfg_.name + ": " + std::to_string(H) + " query heads cannot share " + std::to_string(Hkv) +
                " key/value heads evenly");
  }
  // Query head h reads key/value head h / (n_head / n_kv_head), as repeat_kv in transformers and
  // llama.cpp's GQA broadcast: consecutive query heads form a group.
  kv_head_of_.resize(size_t(H));
  for (int64_t h = 0; h < H; ++h) kv_head_of_[size_t(h)] = static_cast<int>(h / (H / Hkv));
  if (arch_.rope) inv_freq_ = ops::rope_inverse_frequencies(arch_.rope_config);
  for (auto& layer : w_.layers) {
    if (layer.b_o.empty()) layer.b_o = Tensor({cfg_.d_model});  // the API always offers a bias
  }
}

std::unique_ptr<DecoderState> DecoderModel::start() const {
  return std::make_unique<Cache>(cfg_.n_layer, int64_t(cfg_.n_kv_head) * cfg_.d_head);
}

// What extend() allocates, in fp32 values:
//   capture          capture::capture_bytes(T rows over Tk = past + T keys)
//   activations      x, h, attention output [T, d_model] each; qkv [T, (n_head + 2·n_kv_head)·d_head];
//                    concat [T, n_head·d_head]; up and gate [T, d_ff]
//   probabilities    [n_head, T, Tk] scratch when attention is not captured
//   KV cache         when Tk exceeds `capacity`, keys and values of every layer are reallocated to
//                    max(Tk, 2·capacity) rows of n_kv_head·d_head (the old rows are kept while
//                    they are copied, so both count)
//   RoPE table       cos and sin [T, d_head/2]
//   logits           [vocab]
uint64_t DecoderModel::extend_bytes(int64_t past, int64_t capacity, int64_t T, const CaptureOptions& options) const {
  const uint64_t t = uint64_t(T), tk = uint64_t(past + T), L = uint64_t(cfg_.n_layer), D = uint64_t(cfg_.d_model),
                 F = uint64_t(cfg_.d_ff), H = uint64_t(cfg_.n_head), Dh = uint64_t(cfg_.d_head),
                 KV = uint64_t(cfg_.n_kv_head) * Dh;
  uint64_t floats = t * (3 * D + (H + 2 * uint64_t(cfg_.n_kv_head)) * Dh + H * Dh + 2 * F);
  if (!options.attention) floats += H * t * tk;
  if (int64_t(tk) > capacity) floats += 2 * L * KV * (std::max(tk, 2 * uint64_t(capacity)) + uint64_t(capacity));
  if (arch_.rope) floats += t * Dh;
  floats += uint64_t(cfg_.vocab_size);
  return capture::capture_bytes(cfg_, T, past + T, options) + floats * sizeof(float);
}

Capture DecoderModel::run(const Encoding& encoding, const CaptureOptions& options) const {
  auto state = start();
  return extend(*state, encoding.ids(), options, nullptr);
}

Capture DecoderModel::extend(DecoderState& state, const std::vector<int32_t>& ids, const CaptureOptions& options,
                             std::vector<float>* next_logits) const {
  Cache* cache = dynamic_cast<Cache*>(&state);
  if (cache == nullptr) throw Error("extend: the state was not made by this model's start()");
  const int64_t T = static_cast<int64_t>(ids.size());  // new rows
  if (T == 0) throw Error("nothing to run: no tokens");
  const int64_t past = cache->n, Tk = past + T;      // keys after this call
  if (Tk > cfg_.max_positions) {
    throw Error("the sequence would be " + std::to_string(Tk) + " tokens; " + cfg_.name + " allows at most " +
                std::to_string(cfg_.max_positions));
  }
  const int64_t L = cfg_.n_layer, D = cfg_.d_model, F = cfg_.d_ff, H = cfg_.n_head, Hkv = cfg_.n_kv_head;
  const int64_t Dh = cfg_.d_head, Q = H * Dh, KV = Hkv * Dh, QKV = Q + 2 * KV, V = cfg_.vocab_size;
  for (int32_t id : ids) {
    if (id < 0 || id >= V) throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." + std::to_string(V - 1) + ")");
  }
  check_run_memory(Tk, extend_bytes(past, cache->capacity, T, options), options);
  cache->reserve(Tk);

  // What this call records: T query rows, Tk keys (model.h, Model::extend).
  Capture cap;
  cap.n_layer = int(L), cap.n_head = int(H), cap.n_kv_head = int(Hkv), cap.T = int(T), cap.d_head = int(Dh),
  cap.d_model = int(D);
  cap.kv_head_of = kv_head_of_;
  if (options.attention) cap.attention = Tensor({L, H, T, Tk});
  if (options.head_outputs) cap.head_outputs = Tensor({L, H, T, Dh});
  if (options.contributions) cap.contributions = Tensor({L, H, T, D});
  if (options.contributions || options.head_outputs) cap.attn_output = Tensor({L, T, D});
  if (options.hidden_states) cap.hidden_states = Tensor({L + 1, T, D});
  if (options.queries_keys) {
    cap.queries = Tensor({L, H, T, Dh});
    cap.keys = Tensor({L, Hkv, T, Dh});
  }

  std::vector<float> x(size_t(T * D)), h(size_t(T * D)), qkv(size_t(T * QKV)), concat(size_t(T * Q)),
      attn(size_t(T * D)), up(size_t(T * F)), gate(size_t(T * F)), probs_scratch;
  const auto norm = [&](const Tensor& g, const Tensor& b, const float* in, float* out) {
    if (arch_.norm == DecoderArch::Norm::kRms) {
      ops::rms_norm(in, T, D, g.ptr(), cfg_.norm_eps, out);
    } else {
      ops::layer_norm(in, T, D, g.ptr(), b.ptr(), cfg_.norm_eps, out);
    }
  };

  // Embeddings.                                                         x: [T, D]
  for (int64_t t = 0; t < T; ++t) {
    const float* e = w_.token_embedding.ptr() + int64_t(ids[size_t(t)]) * D;
    std::copy(e, e + D, x.data() + t * D);
    if (!w_.position_embedding.empty()) {
      const float* p = w_.position_embedding.ptr() + (past + t) * D;
      for (int64_t i = 0; i < D; ++i) x[size_t(t * D + i)] += p[i];
    }
  }
  capture::record_hidden(cap, 0, x.data());
  const ops::RopeTable rope = arch_.rope ? ops::rope_table(inv_freq_, past, T) : ops::RopeTable{};

  for (int64_t l = 0; l < L; ++l) {
    const DecoderLayerWeights& b = w_.layers[size_t(l)];
    // Attention.
    norm(b.attn_norm, b.attn_norm_bias, x.data(), h.data());
    ops::linear(h.data(), T, D, b.w_qkv.ptr(), b.b_qkv.empty() ? nullptr : b.b_qkv.ptr(), QKV, qkv.data());  // [T, Q|K|V]
    float* q = qkv.data();
    float* k = qkv.data() + Q;
    float* v = qkv.data() + Q + KV;
    if (arch_.rope) {
      ops::rope_apply(q, QKV, T, H, Dh, rope, arch_.rope_config.d_rot, arch_.rope_config.layout);
      ops::rope_apply(k, QKV, T, Hkv, Dh, rope, arch_.rope_config.d_rot, arch_.rope_config.layout);
    }
    float* K = cache->k[size_t(l)].data();  // [Tk, KV]
    float* Vc = cache->v[size_t(l)].data();
    for (int64_t t = 0; t < T; ++t) {
      std::memcpy(K + (past + t) * KV, k + t * QKV, sizeof(float) * size_t(KV));
      std::memcpy(Vc + (past + t) * KV, v + t * QKV, sizeof(float) * size_t(KV));
    }
    if (!cap.queries.empty()) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t hh = 0; hh < H; ++hh)
          std::memcpy(cap.queries.ptr() + ((l * H + hh) * T + t) * Dh, q + t * QKV + hh * Dh, sizeof(float) * size_t(Dh));
        for (int64_t g = 0; g < Hkv; ++g)
          std::memcpy(cap.keys.ptr() + ((l * Hkv + g) * T + t) * Dh, k + t * QKV + g * Dh, sizeof(float) * size_t(Dh));
      }
    }
    float* probs;  // [H, T, Tk]
    if (!cap.attention.empty()) {
      probs = cap.attention.ptr() + l * H * T * Tk;
    } else {
      probs_scratch.resize(size_t(H * T * Tk));
      probs = probs_scratch.data();
    }
    float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
    if (arch_.scale_by_inverse_layer) scale /= static_cast<float>(l + 1);
    const ops::AttentionDims dims{T, Tk, H, Hkv, Dh, scale};
    ops::KeyMask mask;
    mask.causal = true;
    mask.window = b.window;
    ops::attention(q, QKV, K, KV, Vc, KV, kv_head_of_.data(), dims, mask, past, probs, concat.data(), Q);
    capture::project_heads(cap, int(l), concat.data(), b.w_o, b.b_o.ptr(), attn.data());  // [T, D]
    ops::add_inplace(x.data(), attn.data(), T * D);                                       // residual

    // Feed-forward.
    norm(b.ffn_norm, b.ffn_norm_bias, x.data(), h.data());
    if (arch_.mlp == DecoderArch::Mlp::kSwiGlu) {
      ops::linear(h.data(), T, D, b.w_gate.ptr(), nullptr, F, gate.data());  // [T, F]
      ops::linear(h.data(), T, D, b.w_up.ptr(), nullptr, F, up.data());      // [T, F]
      ops::silu_mul(gate.data(), up.data(), T * F);
      ops::linear(gate.data(), T, F, b.w_down.ptr(), nullptr, D, attn.data());  // [T, D]
    } else {
      ops::linear(h.data(), T, D, b.w_up.ptr(), b.b_up.ptr(), F, up.data());
      ops::gelu_tanh(up.data(), T * F);
      ops::linear(up.data(), T, F, b.w_down.ptr(), b.b_down.ptr(), D, attn.data());
    }
    ops::add_inplace(x.data(), attn.data(), T * D);
    // As transformers reports them: the output of every layer but the last, and then the final
    // normalised stream in the last slot (LlamaModel / GPT2Model append it after the final norm).
    if (l + 1 < L) capture::record_hidden(cap, int(l + 1), x.data());
  }
  cache->n = Tk;

  norm(w_.final_norm, w_.final_norm_bias, x.data(), h.data());
  capture::record_hidden(cap, int(L), h.data());
  if (next_logits != nullptr) {
    const Tensor& out = w_.lm_head.empty() ? w_.token_embedding : w_.lm_head;
    next_logits->assign(size_t(V), 0.0f);
    ops::linear(h.data() + (T - 1) * D, 1, D, out.ptr(), nullptr, V, next_logits->data());  // [V]
  }
  return cap;
}

}  // namespace models
}  // namespace headscope
