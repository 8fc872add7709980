// headscope — GGUF reader (memory-mapped; tensors dequantized to fp32 on request, or read in
// place by a QuantMatrix, tensor/quant_matrix.h).
//
// Byte layout (ggml docs/gguf.md; all integers little-endian, no padding between fields):
//
//   u32   magic               "GGUF" = bytes 47 47 55 46
//   u32   version             2 or 3 (1 used u32 counts and is no longer produced)
//   u64   tensor_count
//   u64   metadata_kv_count
//   metadata_kv_count × {
//     string key              string = { u64 length; u8 bytes[length] }  (UTF-8, no terminator)
//     u32    value_type       0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool (1 byte),
//                             8 string, 9 array, 10 u64, 11 i64, 12 f64
//     value                   scalars as their width; array = { u32 elem_type; u64 count;
//                             count × value of elem_type } (arrays of arrays are not used)
//   }
//   tensor_count × {
//     string name
//     u32    n_dims           <= 4
//     u64    ne[n_dims]       ne[0] is the fastest-varying (contiguous) axis, so the PyTorch
//                             shape is ne reversed: a [rows, cols] matrix is stored as ne = {cols, rows}
//     u32    type             ggml_type (GgmlType below): F32, F16, Q4_0, ..., BF16
//     u64    offset           from the start of the data section; a multiple of the alignment
//   }
//   padding to `alignment`    alignment = metadata "general.alignment" (u32, power of two), default 32
//   data section              tensor bytes; a quantized row of ne[0] values is ne[0] / block_size
//                             blocks of type_size bytes (layouts in gguf_quants.h, after ggml-common.h)
//
// Validated on open: magic, version, every count/length against the bytes left (so a corrupt
// count cannot cause a huge allocation), known value and tensor types, dims (ne[0] a multiple
// of the block size, no overflow), offsets aligned and inside the file, and, in order of offset,
// each tensor's bytes (from its type and shape) reach the next tensor but for the padding to the
// alignment, the last one the end of the file (so a type or a dimension changed in the infos is
// caught); no duplicate keys or names. Every error names the file, and the key or tensor.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headscope/tensor.h"
#include "io/gguf_quants.h"  // GgmlType, dequantize_row
#include "io/mapped_file.h"

namespace headscope::io {

// GGUF metadata value types (gguf.h `enum gguf_type`).
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* gguf_type_name(GgufType);

// One metadata value. Scalars are decoded on open; array elements stay in the mapped file and
// are decoded by GgufFile::get_*_array (a 150k-entry vocabulary costs nothing until asked for).
struct GgufValue {
  GgufType type = GgufType::UINT8;
  uint64_t u = 0;                        // UINT8/16/32/64, and BOOL (0 or 1)
  int64_t i = 0;                         // INT8/16/32/64
  double f = 0.0;                        // FLOAT32 (widened exactly) / FLOAT64
  std::string s;                         // STRING
  GgufType elem_type = GgufType::UINT8;  // ARRAY: element type (never ARRAY)
  uint64_t count = 0;                    // ARRAY: number of elements
  const uint8_t* elems = nullptr;        // ARRAY: first element's bytes in the mapped file
  size_t elems_nbytes = 0;               // ARRAY: bytes of all elements
};

// One tensor as stored: a view into the mapped file.
struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;        // dims as stored, ne[0] fastest-varying
  uint64_t offset = 0;            // from the start of the data section
  const uint8_t* data = nullptr;  // aligned to the file's alignment relative to the data section
  size_t nbytes = 0;
  int64_t numel() const;
  std::vector<int64_t> shape() const;  // row-major (PyTorch) order: ne reversed
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // maps and validates; throws Error

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  // ---- metadata ----
  const std::vector<std::string>& keys() const { return key_order_; }  // file order
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const GgufValue& value(const std::string& key) const;  // throws Error naming the key
  // Typed getters throw Error naming the key if it is absent (unless a fallback is given) or
  // holds an incompatible type. Integers convert between widths when the value fits.
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  int64_t get_int(const std::string& key) const;  // any integer type
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;  // FLOAT32/FLOAT64, or any integer type
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::vector<std::string> get_string_array(const std::string& key) const;  // e.g. tokenizer.ggml.tokens
  std::vector<int64_t> get_int_array(const std::string& key) const;         // e.g. tokenizer.ggml.token_type
  std::vector<float> get_float_array(const std::string& key) const;         // e.g. tokenizer.ggml.scores

  // ---- tensors ----
  const std::map<std::string, GgufTensorInfo>& tensors() const { return tensors_; }
  const std::vector<std::string>& tensor_names() const { return tensor_order_; }  // file order
  bool has_tensor(const std::string& name) const { return tensors_.count(name) != 0; }
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws Error naming the tensor
  // Dequantized to fp32 with the row-major shape (ne reversed). If `shape` is non-empty, throws
  // Error unless it equals that row-major shape.
  Tensor to_f32(const std::string& name, const std::vector<int64_t>& shape = {}) const;
  // The tensor as stored, after the checks of to_f32 (shape, a type headscope can dequantize):
  // what a reader that keeps the blocks as they are (QuantMatrix) starts from.
  const GgufTensorInfo& tensor(const std::string& name, const std::vector<int64_t>& shape) const;

 private:
  // Parsing, one step per part of the file (gguf.cc), in the order the constructor calls them.
  class Cursor;
  struct Counts {
    uint64_t tensors = 0, kvs = 0;
  };
  Counts read_header(Cursor& in);
  void read_metadata(Cursor& in, uint64_t kv_count);
  void read_alignment();
  void read_tensor_infos(Cursor& in, uint64_t tensor_count);
  void locate_tensor_data(uint64_t end_of_infos);
  void check_tensor_layout() const;
  uint64_t data_section_size() const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::string> key_order_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<std::string> tensor_order_;
  std::map<std::string, GgufTensorInfo> tensors_;
};

}  // namespace headscope::io
