// headscope — safetensors reader (memory-mapped, zero-copy until conversion to fp32).
//
// File layout (https://github.com/huggingface/safetensors, "Format"):
//   [0, 8)          N: little-endian u64, the byte length of the JSON header
//   [8, 8 + N)      UTF-8 JSON object: { "<tensor name>": {"dtype": "F32"|"F16"|"BF16"|...,
//                     "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
//                     optional "__metadata__": {string: string} }
//   [8 + N, EOF)    the byte buffer; data_offsets are relative to its start
// Validated on open, by the rules of the reference reader (safetensors/src/tensor.rs,
// SafeTensors::read_metadata and Metadata::validate): N <= 100 MB and fits in the file, the
// header starts with '{' and is a UTF-8 JSON object, every dtype is known, shape product × dtype
// size == end − begin (no overflow), and the tensors, in order of data_offsets, tile the data
// buffer exactly: the first begins at 0, each begins where the previous ended, the last ends at
// the end of the file. Every error names the file and the tensor.
//
// A model directory holds either model.safetensors or shards model-0000i-of-0000n.safetensors
// listed by model.safetensors.index.json ({"weight_map": {"<tensor>": "<shard file>"}}); every
// tensor the index lists must be present in its shard.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headscope/tensor.h"
#include "io/mapped_file.h"

namespace headscope::io {

// The dtypes the safetensors format names (its Rust `Dtype`), minus the sub-byte/exotic float
// formats no supported checkpoint uses. Only the float ones convert to fp32.
enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL, U16, U32, U64, F8_E4M3, F8_E5M2 };
const char* dtype_name(DType);  // the spelling used in safetensors headers, e.g. "BF16"
size_t dtype_size(DType);       // bytes per element

// One tensor as stored: a view into a mapped file (valid while its file is open). Row-major.
struct RawTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // no alignment guarantee
  size_t nbytes = 0;
  std::string file;  // for error messages
};

// Converts F32/F16/BF16/F64 storage to an owning fp32 Tensor of the same shape; throws Error
// (naming file and tensor) for other dtypes or if nbytes does not match the shape.
Tensor to_f32(const RawTensor& raw);

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // maps and validates; throws Error
  const std::string& path() const { return file_->path(); }
  const std::map<std::string, RawTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, RawTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All the weights of one model directory (single file or sharded), by tensor name.
class WeightStore {
 public:
  // Opens model.safetensors or model.safetensors.index.json in `dir` (a path to one .safetensors
  // file or to an index .json also works). If the directory has only pytorch_model.bin / *.bin /
  // *.pt, throws Error explaining how to convert to safetensors.
  static WeightStore open_dir(const std::string& dir);
  bool has(const std::string& name) const;
  const RawTensor& raw(const std::string& name) const;  // throws Error naming the tensor
  // Converted to fp32; if `shape` is non-empty, throws Error unless the stored shape matches.
  Tensor get(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  std::vector<std::string> names() const;                // sorted
  const std::string& source() const { return source_; }  // the path open_dir was given

 private:
  std::string source_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, const RawTensor*> index_;
};

}  // namespace headscope::io
