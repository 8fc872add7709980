// headscope — a loaded transformer and what one forward pass captures.
//
// Shape vocabulary (used everywhere in headscope):
//   n_layer, n_head (query heads), n_kv_head (key/value heads; < n_head under GQA/MQA),
//   d_model, d_head, d_ff, T (tokens in the sequence).
// Capture axes: attention is [layer, head, q, k] — row q is the distribution of query token q
// over the keys k, rows sum to 1 over the keys that q may attend to.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope {

struct ModelConfig {
  std::string architecture;  // "bert", "llama", "gpt2", ... (family file in src/models/)
  std::string name;          // display name: the folder (or .gguf file) it was loaded from
  int n_layer = 0;
  int n_head = 0;
  int n_kv_head = 0;
  int d_model = 0;
  int d_head = 0;
  int d_ff = 0;
  int vocab_size = 0;
  int max_positions = 0;  // longest sequence the position embeddings allow
  bool causal = false;    // decoder: query q sees keys k <= q only
  // Per layer, the sliding window of a causal model: query q sees keys q − window + 1 .. q only
  // (Mistral, Gemma 2/3 local layers); 0 = every earlier key. Empty or all 0 without windows.
  std::vector<int64_t> window;
  float norm_eps = 1e-12f;
  int32_t eos_token_id = -1;  // end of text for generation (decoders); -1 when the files name none
};

// A head of the model: layer 0 .. n_layer − 1, query head 0 .. n_head − 1.
struct HeadRef {
  int layer = 0, head = 0;
  bool operator==(const HeadRef&) const = default;
};

// Head ablation inside the pass (docs/causal.md): the output o_h [T, d_head] of every listed head
// is replaced in the concatenation before W_O, so W_O's sum, the residual stream and (decoders)
// the keys and values of later layers in the KV cache are those of the ablated model. Only the
// listed query heads change: under GQA the other heads reading the same key/value head keep theirs.
struct Ablation {
  enum class Mode {
    kZero,      // o_h(t) = 0
    kMean,      // o_h(t) = mean[layer, head]: the head's mean output over a reference corpus
    kResample,  // o_h(t) = donor[layer, head, t] (another text's output at the same position), or at
                //          a donor position drawn from `seed` and t when the donor is shorter
  };
  Mode mode = Mode::kZero;
  std::vector<HeadRef> heads;
  // Not owned (shared by many ablations over a corpus); must outlive the runs.
  const Tensor* mean = nullptr;   // [n_layer, n_head, d_head] (kMean)
  const Tensor* donor = nullptr;  // [n_layer, n_head, T_donor, d_head] (kResample): the donor text's head outputs
  uint64_t seed = 0;

  bool empty() const { return heads.empty(); }
  // Replaces the listed heads of `layer` in concat [T, n_head · d_head] (row t = position first + t).
  void apply(int layer, int64_t first, int64_t T, int n_head, int d_head, float* concat) const;
  // The donor position resample ablation reads for position t of a text (t itself when t < T_donor).
  int64_t donor_position(int64_t t) const;
};

struct Capture;

// Activation patching inside the pass (docs/circuits.md): one activation of the run is replaced
// by the same activation of another run of a prompt with the same number of tokens (the
// `source`), at the point of the layer where the model computes it, so everything after it is
// what the model computes from the replaced value. Vocabulary of Wang et al. 2022 and Heimersheim
// & Nanda 2024: a corrupt run with clean values patched in is "denoising", the reverse "noising".
struct Patch {
  enum class Site {
    kHeadOutput,  // o_h [T, d_head], head h's output before W_O              source: head_outputs
    kQuery,       // q_h after its q-norm and RoPE, query head h                   source: queries
    kKey,         // k_g after its k-norm and RoPE, key/value head g (all of its GQA group reads it)   keys
    kValue,       // v_g, key/value head g                                         source: values
    kPattern,     // head h's attention probabilities; o_h = pattern · V of this run   source: attention
    kResidual,    // the residual stream entering the layer                        source: hidden_states[layer]
    kAttention,   // what the attention block adds to the stream (W_O's output + b_O, normalised
                  // afterwards by a post-attention norm where the family has one)   source: attn_output
    kMlp,         // what the feed-forward block adds (after a post-feed-forward norm)   source: mlp_outputs
  };
  Site site = Site::kHeadOutput;
  int layer = 0;
  int head = -1;          // query head (head output, query, pattern), key/value head (key, value); -1 otherwise
  int64_t position = -1;  // one position (pattern: one query row), or -1 = every position
  const Capture* source = nullptr;  // not owned; must outlive the run
};
// The name of a site as the CLI, the API and the docs write it ("head", "q", "k", "v", "pattern",
// "resid", "attn", "mlp").
const char* patch_site_name(Patch::Site site);

struct CaptureOptions {
  bool attention = true;      // [n_layer, n_head, T, T]
  bool head_outputs = true;   // [n_layer, n_head, T, d_head]
  bool contributions = true;  // [n_layer, n_head, T, d_model]
  bool hidden_states = true;  // [n_layer + 1, T, d_model]
  bool queries_keys = false;  // queries [n_layer, n_head, T, d_head], keys [n_layer, n_kv_head, T, d_head]
  bool logits = false;        // [T, vocab_size]: the next-token logits after every row (decoders only)

  // Heads to ablate in this pass (null or empty: the plain model). Not owned; must outlive the run.
  const Ablation* ablation = nullptr;
  // [n_layer, n_head, Tk] ‖f_h(x_k)‖ = ‖v_k · W_O[:, h]ᵀ‖, the norm of what head h moves from key k
  // (Kobayashi et al. 2020); v_k is the value as attention reads it, its bias b_V included, b_O not.
  bool value_norms = false;
  bool mlp_outputs = false;  // [n_layer, T, d_model] what each feed-forward block adds (decoders: to the residual)
  bool values = false;       // [n_layer, n_kv_head, T, d_head] the values attention reads (after their bias)
  bool last_logits = false;  // with logits: the last row's only, [1, vocab_size]

  // Activations replaced in this pass (null or empty: none), in the order listed. Not owned; must
  // outlive the run. A patched run is a whole run (run() or resume()), not streamed and not an
  // extend() after earlier tokens; Model::run refuses it otherwise. Recorded tensors hold what
  // the patched model computed at each point: a patched site itself reads as the value patched in.
  const std::vector<Patch>* patches = nullptr;

  // Streaming, for long texts: when set and `attention` is false, every layer's probabilities are
  // handed over in blocks of query rows and then dropped, so no [n_layer, n_head, T, T] buffer
  // exists. Called once per block, in order: layer, query positions q0 .. q1 − 1, and
  //   probs [n_head, q1 − q0, width], row q of head h at ((h · (q1 − q0)) + q − q0) · width,
  // width = every key (bidirectional) or q1 (causal: the keys those rows may see).
  using AttentionSink = std::function<void(int layer, int64_t q0, int64_t q1, int64_t width, const float* probs)>;
  AttentionSink attention_sink;
  int64_t attention_block_rows = 128;  // query rows per block when streaming
  // Optional, with attention_sink: each block consumed head by head, in attention_head_parts
  // parts, as soon as that head's rows are computed (while they are still in cache) and by the
  // same threads: called once per head and part with that head's rows, probs [q1 − q0, width].
  // Parts of one head may run at once and must touch disjoint state. attention_sink then gets the
  // block as before, once every head's parts have run.
  using AttentionHeadSink =
      std::function<void(int layer, int64_t head, int part, int64_t q0, int64_t q1, int64_t width, const float* probs)>;
  AttentionHeadSink attention_head_sink;
  int attention_head_parts = 1;
  // With value_norms: called once per layer, before that layer's attention reaches attention_sink,
  // with norms [n_head, Tk] (row h = head h's value norms), so a streamed run can weigh its rows.
  using ValueNormSink = std::function<void(int layer, const float* norms)>;
  ValueNormSink value_norm_sink;

  // Attention maps only: what the statistics, the probe and generation steps read.
  static CaptureOptions attention_only() {
    CaptureOptions o;
    o.head_outputs = o.contributions = o.hidden_states = false;
    return o;
  }
};

struct Capture {
  int n_layer = 0, n_head = 0, n_kv_head = 0, T = 0, d_head = 0, d_model = 0;
  Tensor attention;             // [n_layer, n_head, T, T]        softmax(q·kᵀ/√d_head + mask)
  Tensor head_outputs;          // [n_layer, n_head, T, d_head]   attention · V, per head
  Tensor contributions;         // [n_layer, n_head, T, d_model]  head_output · W_O[:, h*d_head : (h+1)*d_head]ᵀ
  Tensor attn_output;           // [n_layer, T, d_model]          Σ_h contributions + b_O (= W_O · concat + b_O)
  Tensor hidden_states;         // [n_layer + 1, T, d_model]      embeddings, then the output of each layer
  Tensor queries;               // [n_layer, n_head, T, d_head]     (on request)
  Tensor keys;                  // [n_layer, n_kv_head, T, d_head]  (on request)
  Tensor logits;                // [T, vocab_size]                  (on request, decoders)
  Tensor value_norms;           // [n_layer, n_head, Tk]  ‖v_k W_O[:, h]ᵀ‖ (on request; Tk = T for a whole run)
  Tensor mlp_outputs;           // [n_layer, T, d_model]  the feed-forward block's output (on request)
  Tensor values;                // [n_layer, n_kv_head, T, d_head]  (on request)
  std::vector<int> kv_head_of;  // query head -> the key/value head it reads (identity without GQA)
};

// The keys and values a causal model has computed so far (its KV cache). Opaque; made by
// Model::start() and grown by Model::extend().
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  virtual int64_t length() const = 0;  // tokens processed so far
};

// What a causal model does after its last layer: logits = Norm_final(x) · unembeddingᵀ.
struct LogitReadout {
  const Tensor* norm_weight = nullptr;  // [d_model] γ
  const Tensor* norm_bias = nullptr;    // [d_model] β of a LayerNorm; null or empty for RMSNorm
  bool rms = true;                      // RMSNorm γ · x / rms(x); else LayerNorm γ · (x − mean) / std + β
  float eps = 0;                        // added to the mean square (or variance) under the root
  const Tensor* unembedding = nullptr;  // [vocab, d_model] (the token embedding when tied)
  float final_softcap = 0;              // > 0: logits = c · tanh(logits / c) (Gemma 2); 0: none
  // Sandwich norms (Gemma 2/3, OLMo 2): per layer, γ of the RMSNorm (eps as above) between the
  // attention block's output and the residual stream; empty for a pre-norm decoder. (The capture
  // records attn_output before this norm and mlp_outputs after the feed-forward one.)
  std::vector<const Tensor*> attention_gain;
};

// One layer's query, key and value weights as fp32 copies in nn.Linear layout (out, in), and the
// gains γ of the norms around the heads, for analyses of the weights alone (composition scores,
// circuits.h). Nothing is folded here: a norm's γ multiplies what it normalises, so a reader that
// drops the norms' scalar division (Elhage et al. 2021) folds each gain into the matrix beside it.
// Rows are in the order the forward pass multiplies by: Hugging Face's, except a Llama GGUF's Q
// and K, whose rows llama.cpp's converter permuted within each head for interleaved RoPE (the
// pass runs that layout, ops/rope.h). Q and K share the order, so q·k, and every product or norm
// of W_Qᵀ W_K, is the same in both.
struct AttentionWeights {
  Tensor w_q;  // [n_head·d_head, d_model]
  Tensor w_k;  // [n_kv_head·d_head, d_model]
  Tensor w_v;  // [n_kv_head·d_head, d_model]
  // [d_model] γ of the norm the heads read through (x ↦ γ ⊙ x / rms(x), or LayerNorm's, whose β
  // and centring are not linear in x and not given); empty when the heads read the residual
  // stream itself (post-norm encoders, OLMo 2).
  Tensor input_gain;
  // QK-norm's γ, on each head's query and key before RoPE: [d_head], the same for every head
  // (Qwen3, Gemma 3), or [n_head·d_head] and [n_kv_head·d_head] (OLMo 2); empty without QK-norm.
  Tensor q_gain, k_gain;
  // [d_model] γ of a norm on the attention output before it joins the residual stream (Gemma 2/3's
  // and OLMo 2's post-attention norm); empty when W_O writes into the stream directly.
  Tensor output_gain;
};

// ---- Reverse mode (docs/gradients.md) ----
//
// The scalar a backward pass differentiates, read from the model's output: a decoder's logits
// (the last row's [1, vocab], or every row's [T, vocab] with all_rows), an encoder's last hidden
// states [T, d_model]. `metric(out, rows, width, d_out)` returns the metric and writes its
// gradient with respect to `out` into d_out (same shape, zeroed before the call).
struct GradientSeed {
  bool all_rows = false;
  std::function<double(const float* out, int64_t rows, int64_t width, float* d_out)> metric;
};

struct GradientOptions {
  bool attention = true;            // d/d attention probabilities [n_layer, n_head, T, T]
  bool queries_keys_values = true;  // d/d queries, keys, values (after QK-norm and RoPE, as captured)
  // d/d the residual stream entering each layer through one head's query, key or value path only
  // (the receivers of edge attribution patching): [n_layer, n_head + 2·n_kv_head, T, d_model],
  // slot h < n_head the query of head h, n_head + g the key of key/value head g, n_head + n_kv_head
  // + g its value. The slots of a layer sum to what its attention block sends back to its input.
  bool receivers = false;
  // Token embeddings to run instead of the encoding's own [T, d_model] (integrated gradients'
  // interpolations); the encoding still gives positions and token types. Not owned.
  const Tensor* embeddings = nullptr;
  CaptureOptions forward;  // what the forward pass keeps besides hidden states (returned in `forward`)
  // Another text of the same length run forward beside this one (its capture in
  // Gradients::companion, as run() records it with `forward`), with no backward: attribution
  // patching's source prompt. A short pair shares the pass (each weight read once for both); a
  // longer one runs it on its own. Not owned.
  const Encoding* companion = nullptr;
};

// ∂metric/∂(every activation the forward pass captures), from one forward and one backward pass.
// Shapes as in Capture; every tensor is empty unless asked for (GradientOptions) or always given.
struct Gradients {
  double metric = 0;
  Capture forward;          // the forward pass's own capture (hidden states always)
  Capture companion;        // GradientOptions::companion's forward capture, if any
  Tensor token_embeddings;  // [T, d_model] the token embeddings the pass ran (E[id], × √d_model for Gemma)
  Tensor embeddings;        // [T, d_model] ∂/∂ token_embeddings (always)
  Tensor hidden_states;     // [n_layer + 1, T, d_model] ∂/∂ Capture::hidden_states (always)
  // [T, d_model] ∂/∂ the residual stream after the last layer: before a decoder's final norm (what
  // the logits read), an encoder's last hidden state (= hidden_states' last slot). Always.
  Tensor final_residual;
  Tensor head_outputs;  // [n_layer, n_head, T, d_head] (always)
  Tensor attn_output;   // [n_layer, T, d_model] ∂/∂ Capture::attn_output (always)
  Tensor mlp_outputs;   // [n_layer, T, d_model] ∂/∂ Capture::mlp_outputs (always)
  Tensor attention;     // [n_layer, n_head, T, T]
  Tensor queries;       // [n_layer, n_head, T, d_head]
  Tensor keys, values;  // [n_layer, n_kv_head, T, d_head]
  Tensor receivers;     // [n_layer, n_head + 2·n_kv_head, T, d_model]
};

// How Model::load treats what it reads.
struct LoadOptions {
  // Weights holding NaN or ±Inf: by default the model loads and warnings() names each such
  // tensor; strict refuses the model with an Error instead.
  bool strict = false;
  // Bytes one run (Model::run / extend) may allocate; 0 = what the system has available
  // (MemAvailable in /proc/meminfo, less limits::kRunMemoryMarginBytes), or the environment
  // variable HEADSCOPE_MEMORY_BUDGET (bytes) when it is set.
  uint64_t run_memory_budget = 0;
  // Bytes the loaded weights may take; 0 = what the system has available (MemAvailable less
  // limits::kRunMemoryMarginBytes). Model::load estimates the weights' size from the file headers
  // before reading any weight (load_estimate) and refuses a model over it with a ResourceError
  // that gives the estimate and the largest model that would fit, instead of being killed by
  // the kernel halfway through.
  uint64_t load_memory_budget = 0;
};

// What loading a model will hold, from its files' headers alone (no weight is read).
struct LoadEstimate {
  uint64_t parameters = 0;       // numbers stored in the weight tensors
  uint64_t file_bytes = 0;       // the weight files' size on disk (mapped, read once)
  uint64_t bytes = 0;            // resident bytes after loading: weights as held (below), plus copies
  uint64_t stored_bytes = 0;     // of a GGUF's linear layers and embeddings, kept as stored (mapped)
  uint64_t fp32_parameters = 0;  // numbers held as fp32 (all of them for safetensors)
};
// Throws Error for a path that is not a model (the loader's own messages).
LoadEstimate load_estimate(const std::string& path);
// Throws ResourceError when load_estimate(path).bytes is over options.load_memory_budget (0: what
// the system has available), naming the estimate and the largest model that would fit.
// Model::load calls it first.
void check_load_memory(const std::string& path, const LoadOptions& options);

class Model {
 public:
  virtual ~Model() = default;
  // Loads a Hugging Face model directory (config.json, *.safetensors, tokenizer.json) or a
  // .gguf file. Throws Error with a message naming the file and what to do. Every hyper-parameter
  // is checked (type, range, the budgets of headscope/limits.h) before anything is sized from
  // it, and every weight once for NaN/Inf.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options = {});
  // What the load found suspect but not fatal (one line each, e.g. a tensor with NaN values).
  std::vector<std::string> warnings() const { return warnings_; }
  // The bytes a run over T tokens allocates: the capture tensors `options` asks for plus the
  // pass's working memory (activations, attention scratch, the KV cache). Model::run and extend
  // throw ResourceError before allocating when this exceeds the run memory budget.
  virtual uint64_t run_bytes(int64_t T, const CaptureOptions& options = {}) const = 0;
  // The bytes a DecoderState from start() holds once it has T tokens (the KV cache of every
  // layer, grown by doubling); 0 for encoders. run_bytes does not count it: run() keeps no state.
  virtual uint64_t state_bytes(int64_t /*T*/) const { return 0; }

  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  // Encodes with the model's template and its position limit (max_length = max_positions).
  Encoding encode(std::string_view text, bool truncate = false) const;
  // One forward pass over the whole encoding. Throws Error if it is empty or too long.
  virtual Capture run(const Encoding& encoding, const CaptureOptions& options = {}) const = 0;
  // Incremental decoding for causal models (config().causal); encoders throw Error. start() gives
  // an empty state; extend() runs `ids` after the tokens already in `state` and returns what the
  // new rows capture: T = ids.size(), attention [n_layer, n_head, T, past + T] (every token so far
  // is a key), head outputs, contributions and hidden states for the new rows only. When
  // `next_logits` is given it receives the logits [vocab_size] that follow the last id.
  virtual std::unique_ptr<DecoderState> start() const;
  virtual Capture extend(DecoderState& state, const std::vector<int32_t>& ids, const CaptureOptions& options,
                         std::vector<float>* next_logits) const;
  // Attention rows q0 .. q1 − 1 over keys k0 .. k1 − 1 of head `head` of `layer`, computed again
  // from a capture that holds the queries and keys (CaptureOptions::queries_keys) the way run()
  // computed them: probs [q1 − q0, k1 − k0]. What a streamed run offers instead of stored maps.
  // Throws Error when the capture has no queries and keys or the layer, head, rows or keys are
  // out of range.
  virtual void attention_from_qk(const Capture& capture, int layer, int head, int64_t q0, int64_t q1, int64_t k0,
                                 int64_t k1, float* probs) const;

  // The pass again from layer `first_layer` (0 .. n_layer − 1) on, reusing an earlier run's prefix:
  // `prefix` is the hidden_states [n_layer + 1, T, d_model] of a run of the same encoding, whose
  // slot first_layer is the residual stream entering that layer. Layers first_layer .. n_layer − 1
  // run as run() runs them (with options.ablation), so when nothing before first_layer differs the
  // result equals run()'s. Heads of layer l change only layers ≥ l: ablation over a corpus and
  // activation patching (options.patches) restart there. Records hidden states (slots ≤
  // first_layer copied from `prefix`), logits, and the queries, keys, values, head outputs (with
  // the attention output) and feed-forward outputs of layers ≥ first_layer (earlier layers' slots
  // are 0); options asking for attention maps, contributions or value norms throw Error, as do
  // families without this pass.
  virtual Capture resume(const Encoding& encoding, int first_layer, const Tensor& prefix,
                         const CaptureOptions& options) const;

  // Several texts in one pass, packed: their tokens follow one another in the rows of the pass,
  // each text's queries read only its own keys (a block-diagonal mask, applied by running each
  // text's attention on its own block of rows) and its positions count from 0, so capture i is
  // what run(encodings[i], options[i]) records. The linear layers (Q|K|V, W_O, the feed-forward
  // block, the unembedding) run once over all the rows, which reads (and, for a GGUF's blocks,
  // dequantises) every weight once per batch instead of once per text. The results equal run()'s
  // to float rounding: a GEMM over more rows may sum in other blocks (tests/unit/batch_test.cc
  // bounds the difference). `options` holds one entry per encoding, or one for all of them; each
  // text may stream (attention_sink), be ablated or patched as its own run would. The memory of
  // the whole batch is checked before anything is allocated. Families without a packed pass run
  // the texts one by one.
  virtual std::vector<Capture> run_batch(std::span<const Encoding> encodings,
                                         std::span<const CaptureOptions> options) const;
  // resume() of several texts in one packed pass: prefixes[i] is the hidden_states of a run of
  // encodings[i] (as resume() takes it).
  virtual std::vector<Capture> resume_batch(std::span<const Encoding> encodings, int first_layer,
                                            std::span<const Tensor* const> prefixes,
                                            std::span<const CaptureOptions> options) const;

  // W_O of `layer` as stored by nn.Linear: [d_model, n_head * d_head] (out, in), and its bias.
  // W_O comes as an fp32 copy (a GGUF's W_O stays in its stored blocks, dequantised here): read it
  // once per use, not per element.
  virtual Tensor output_projection(int layer) const = 0;
  virtual const Tensor& output_bias(int layer) const = 0;
  // W_Q, W_K, W_V of `layer` and the norm gains around them (AttentionWeights), as fp32 copies
  // (a GGUF's blocks dequantised here). Throws Error for a layer out of range, and for a model
  // that does not give them.
  virtual AttentionWeights attention_weights(int layer) const;

  // The final norm, the unembedding, a final soft-cap and the sandwich norms of a causal model:
  // what the logit lens and direct logit attribution read (the lens applies final_softcap; the
  // attribution linearises every norm, analysis/attribution.h). Encoders throw Error.
  virtual LogitReadout final_readout() const;
  // LogitReadout::attention_gain alone (each layer's sandwich-norm γ after attention: Gemma 2/3,
  // OLMo 2; empty for other models): what edge attribution needs, without the fp32 unembedding a
  // GGUF's final_readout() dequantises on first use (113 MB for SmolLM2, 671 MB for Gemma 3 270M).
  virtual std::vector<const Tensor*> attention_output_gains() const { return {}; }

  // Reverse mode: one forward pass (keeping the residual stream entering every layer) and one
  // backward pass that recomputes each layer's activations from it (docs/gradients.md). Throws
  // ResourceError before allocating when gradient_bytes is over the run memory budget, and Error
  // for a model without a backward pass, an empty or too long encoding, or embeddings of the
  // wrong shape.
  virtual Gradients gradients(const Encoding& encoding, const GradientSeed& seed,
                              const GradientOptions& options = {}) const;
  // What gradients() allocates for T tokens: the forward capture, the gradients asked for, one
  // layer's recomputed activations and their gradients, and the seed's output rows.
  virtual uint64_t gradient_bytes(int64_t T, const GradientOptions& options = {}) const;

  // The run memory budget in bytes (see LoadOptions::run_memory_budget), resolved per call so
  // that a long-lived server follows what the system has free.
  uint64_t run_memory_budget() const;
  // Throws ResourceError when `bytes` (what a run up to `T` tokens in all would allocate) exceeds
  // the budget, with the estimate, what is available and the longest text that would fit. run()
  // and extend() call it; so does anything else that sizes buffers by T (generation's capture).
  void check_run_memory(int64_t T, uint64_t bytes, const CaptureOptions& options) const;
  // The same for gradients() (the longest text found with gradient_bytes).
  void check_gradient_memory(int64_t T, uint64_t bytes, const GradientOptions& options) const;

 private:
  std::vector<std::string> warnings_;
  LoadOptions options_;
};

}  // namespace headscope
