#include "models/tensor_table.h"

#include <cstdio>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "models/families.h"
#include "tensor/tensor_ops.h"

namespace headscope::models {
namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(const std::string& dir, WeightCheck& check)
      : WeightSource(check), dir_(dir), store_(io::WeightStore::open_dir(dir)) {}
  bool has(const std::string& name) const override { return store_.has(name); }
  std::string describe() const override { return dir_; }

 private:
  Tensor read(const std::string& name, const std::vector<int64_t>& shape) const override {
    return store_.get(name, shape);
  }
  std::string file_of(const std::string& name) const override { return store_.raw(name).file; }
  std::string dir_;
  io::WeightStore store_;
};

class GgufSource final : public WeightSource {
 public:
  GgufSource(std::shared_ptr<const io::GgufFile> file, WeightCheck& check)
      : WeightSource(check), file_(std::move(file)) {}
  bool has(const std::string& name) const override { return file_->has_tensor(name); }
  std::string describe() const override { return file_->path(); }

 private:
  Tensor read(const std::string& name, const std::vector<int64_t>& shape) const override {
    return file_->to_f32(name, shape);
  }
  QuantMatrix read_stored(const std::string& name, const std::vector<int64_t>& shape) const override {
    const io::GgufTensorInfo& t = file_->tensor(name, shape);  // refuses a type without a dequantizer, by name
    if (!QuantMatrix::keeps_stored(t.type)) return {};
    if (t.ne.size() != 2) throw Error(file_->path() + ": tensor '" + name + "' is not a matrix");
    return QuantMatrix::stored(t.type, t.ne[1], t.ne[0], t.data, file_);  // the matrix keeps the file mapped
  }
  std::string file_of(const std::string&) const override { return file_->path(); }
  std::shared_ptr<const io::GgufFile> file_;
};

}  // namespace

std::string layer_name(const char* pattern, int layer) {
  char buf[160];
  std::snprintf(buf, sizeof buf, pattern, layer);
  return buf;
}

Tensor WeightSource::get(const std::string& name, const std::vector<int64_t>& shape) const {
  Tensor t = read(name, shape);
  check_(t, name, file_of(name));
  return t;
}

QuantMatrix WeightSource::matrix(const std::string& name, const std::vector<int64_t>& shape) const {
  QuantMatrix m = read_stored(name, shape);
  if (m.empty()) return get(name, shape);
  check_(m, name, file_of(name));
  return m;
}

std::unique_ptr<WeightSource> safetensors_source(const std::string& dir, WeightCheck& check) {
  return std::make_unique<SafetensorsSource>(dir, check);
}
std::unique_ptr<WeightSource> gguf_source(std::shared_ptr<const io::GgufFile> file, WeightCheck& check) {
  return std::make_unique<GgufSource>(std::move(file), check);
}

std::string checkpoint_prefix(const WeightSource& source, const TensorName& first, const std::string& prefix) {
  return !source.has(prefix + first.hf) && source.has(first.hf) ? "" : prefix;
}

std::string TensorReader::name(const TensorName& t, int layer) const {
  if (gguf_) {
    if (t.gguf == nullptr) throw Error(src_.describe() + ": tensor '" + layer_name(t.hf, layer) + "' has no GGUF name");
    return layer_name(t.gguf, layer);
  }
  return prefix_ + layer_name(t.hf, layer);
}

Tensor TensorReader::get(const TensorName& t, int layer, const std::vector<int64_t>& shape) const {
  const std::string n = name(t, layer);
  if ((t.flags & kOptional) && !src_.has(n)) return Tensor();
  if (!gguf_ && (t.flags & kConv1d)) return transpose(src_.get(n, {shape.at(1), shape.at(0)}));
  return src_.get(n, shape);
}

QuantMatrix TensorReader::matrix(const TensorName& t, int layer, const std::vector<int64_t>& shape) const {
  const std::string n = name(t, layer);
  if ((t.flags & kOptional) && !src_.has(n)) return {};
  if (!gguf_) return get(t, layer, shape);
  return src_.matrix(n, shape);
}

void TensorReader::expect_layers(int n_layer, std::initializer_list<TensorName> rows) const {
  for (const TensorName& t : rows)
    if (!has(t, n_layer - 1))
      throw Error(src_.describe() + ": the hyper-parameters declare " + std::to_string(n_layer) +
                  " layers but there is no tensor '" + name(t, n_layer - 1) + "'");
}

}  // namespace headscope::models
