// headscope — how a family names its tensors and where it reads them from.
//
// Every family declares its tensors once, in a table of TensorName rows indexed by role: the
// Hugging Face name, the GGUF name (llama.cpp's convention; null where the family has no GGUF
// form) and how the tensor is stored. "%d" in a name is the layer. The loader reads each row
// through a TensorReader, which applies the family's storage quirks (a checkpoint prefix, GPT-2's
// Conv1D transposes, optional biases) so that model code never branches on them.
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "headscope/tensor.h"
#include "tensor/quant_matrix.h"

namespace headscope::io {
class GgufFile;
}

namespace headscope::models {

class WeightCheck;  // families.h

enum TensorFlags : unsigned {
  kRequired = 0,
  kOptional = 1u << 0,  // may be absent (e.g. biases some checkpoints of the family lack)
  kConv1d = 1u << 1,    // stored (in, out) in Hugging Face files (GPT-2's Conv1D): transposed at load
};

struct TensorName {
  const char* hf;    // Hugging Face name, after the family's optional checkpoint prefix
  const char* gguf;  // GGUF name, or nullptr when the family is not read from GGUF
  unsigned flags = kRequired;
};

// `pattern` with "%d" replaced by `layer` (a pattern without "%d" is returned as it is).
std::string layer_name(const char* pattern, int layer);

// Where a family's tensors come from: a Hugging Face safetensors folder or a GGUF file. Both
// return fp32 in PyTorch's row-major layout, check the shape they are asked for, and pass every
// tensor through the load's WeightCheck (zero dimensions, NaN/Inf).
class WeightSource {
 public:
  explicit WeightSource(WeightCheck& check) : check_(check) {}
  virtual ~WeightSource() = default;
  virtual bool has(const std::string& name) const = 0;
  Tensor get(const std::string& name, const std::vector<int64_t>& shape) const;
  // A linear layer's weight [rows, cols]: a GGUF source keeps quantized and half-precision blocks as
  // stored (values checked panel by panel, nothing copied); otherwise get() as fp32.
  QuantMatrix matrix(const std::string& name, const std::vector<int64_t>& shape) const;
  virtual std::string describe() const = 0;  // the file or folder, for messages

 protected:
  // The blocks as stored, or an empty matrix when this source converts to fp32 (the default).
  virtual QuantMatrix read_stored(const std::string&, const std::vector<int64_t>&) const { return {}; }
  virtual Tensor read(const std::string& name, const std::vector<int64_t>& shape) const = 0;
  virtual std::string file_of(const std::string& name) const = 0;  // the file holding `name`

 private:
  WeightCheck& check_;
};
std::unique_ptr<WeightSource> safetensors_source(const std::string& dir, WeightCheck& check);
std::unique_ptr<WeightSource> gguf_source(std::shared_ptr<const io::GgufFile> file, WeightCheck& check);

// The checkpoint prefix in front of a family's Hugging Face names: `prefix` when `first` is stored
// with it (a task-head class: "model.", "bert.", "roberta.", …), "" when it is stored bare (the
// base class: LlamaModel, BertModel, …). When neither holds, `prefix`, so that the error for the
// missing tensor names it as the usual checkpoints do.
std::string checkpoint_prefix(const WeightSource& source, const TensorName& first, const std::string& prefix);

// Reads table rows from one source, by their GGUF names or by their Hugging Face names behind
// `hf_prefix` (checkpoints saved from a task head carry "bert.", "transformer.", ...).
class TensorReader {
 public:
  TensorReader(const WeightSource& source, bool gguf, std::string hf_prefix = "")
      : src_(source), gguf_(gguf), prefix_(std::move(hf_prefix)) {}

  const WeightSource& source() const { return src_; }
  bool gguf() const { return gguf_; }
  std::string name(const TensorName& t, int layer = 0) const;
  bool has(const TensorName& t, int layer = 0) const { return src_.has(name(t, layer)); }
  // The tensor in nn.Linear layout, of shape `shape` (empty: any). A kConv1d row is read from a
  // Hugging Face file as [shape[1], shape[0]] and transposed; an absent kOptional row gives an
  // empty Tensor; an absent required row is an Error naming it.
  Tensor get(const TensorName& t, int layer, const std::vector<int64_t>& shape) const;
  Tensor get(const TensorName& t, const std::vector<int64_t>& shape) const { return get(t, 0, shape); }
  // The same for the weight of a linear layer or an embedding: from a GGUF file, kept as stored
  // (ops/quant_linear.h); from safetensors, get() as fp32.
  QuantMatrix matrix(const TensorName& t, int layer, const std::vector<int64_t>& shape) const;
  QuantMatrix matrix(const TensorName& t, const std::vector<int64_t>& shape) const { return matrix(t, 0, shape); }
  // Error unless the last declared layer (n_layer − 1) has each of `rows`: the layers the
  // hyper-parameters declare must all be in the file before storage is sized for them.
  void expect_layers(int n_layer, std::initializer_list<TensorName> rows) const;

 private:
  const WeightSource& src_;
  bool gguf_;
  std::string prefix_;
};

}  // namespace headscope::models
