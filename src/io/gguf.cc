// GGUF container parsing and validation (layout in gguf.h): header, metadata, tensor infos, the
// data section's layout, and to_f32 (dequantization itself is in gguf_quants.cc).
#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string_view>

namespace headscope::io {

static_assert(std::endian::native == std::endian::little, "GGUF stores little-endian data");

namespace {

constexpr const char* kGgufTypeNames[] = {"UINT8", "INT8",   "UINT16", "INT16",  "UINT32", "INT32",  "FLOAT32",
                                          "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64",  "FLOAT64"};
constexpr uint32_t kGgufTypeCount = 13;

// Bytes of one scalar of `t` in the file; 0 for STRING/ARRAY (variable length).
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
      return 8;
    default:
      return 0;
  }
}

bool is_int_type(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

bool is_unsigned_type(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 || t == GgufType::UINT64 ||
         t == GgufType::BOOL;
}

// Decodes one fixed-size scalar at p into the matching field(s) of v.
void decode_scalar(GgufType t, const uint8_t* p, GgufValue& v) {
  switch (t) {
    case GgufType::UINT8:
      v.u = load_unaligned<uint8_t>(p);
      break;
    case GgufType::INT8:
      v.i = load_unaligned<int8_t>(p);
      break;
    case GgufType::UINT16:
      v.u = load_unaligned<uint16_t>(p);
      break;
    case GgufType::INT16:
      v.i = load_unaligned<int16_t>(p);
      break;
    case GgufType::UINT32:
      v.u = load_unaligned<uint32_t>(p);
      break;
    case GgufType::INT32:
      v.i = load_unaligned<int32_t>(p);
      break;
    case GgufType::FLOAT32:
      v.f = load_unaligned<float>(p);
      break;
    case GgufType::BOOL:
      v.u = load_unaligned<uint8_t>(p) != 0;
      break;
    case GgufType::UINT64:
      v.u = load_unaligned<uint64_t>(p);
      break;
    case GgufType::INT64:
      v.i = load_unaligned<int64_t>(p);
      break;
    case GgufType::FLOAT64:
      v.f = load_unaligned<double>(p);
      break;
    default:
      break;
  }
}

// Smallest encodings, used to reject counts that could not fit in the rest of the file before
// anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims = 0, type, offset
constexpr uint32_t kMaxDims = 4;                         // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;               // GGUF_DEFAULT_ALIGNMENT

std::string dims_str(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

}  // namespace

// A bounds-checked read position in the mapped file. Every read first checks that the bytes
// exist, so a corrupt length or count produces an Error naming what was being read.
class GgufFile::Cursor {
 public:
  Cursor(const uint8_t* base, size_t size, const std::string& path) : base_(base), size_(size), path_(path) {}
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const std::string& what) const {
    if (n > remaining())
      throw Error(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                  std::to_string(pos_) + " but the file ends after " + std::to_string(remaining()) + " more");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v = load_unaligned<T>(base_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  const uint8_t* skip(uint64_t n, const std::string& what) {
    need(n, what);
    const uint8_t* p = base_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  std::string_view read_string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    const uint8_t* p = skip(len, what + " (" + std::to_string(len) + " bytes)");
    return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
};

// ---------------------------------------------------------------------------------------------
// Public type helpers

const char* gguf_type_name(GgufType t) {
  const auto i = static_cast<uint32_t>(t);
  return i < kGgufTypeCount ? kGgufTypeNames[i] : "unknown";
}

// ---------------------------------------------------------------------------------------------
// GgufTensorInfo

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

// ---------------------------------------------------------------------------------------------
// GgufFile: parsing, in the order of the file (layout in gguf.h)

GgufFile::GgufFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  Cursor in(file_->data(), file_->size(), file_->path());
  const Counts counts = read_header(in);
  read_metadata(in, counts.kvs);
  read_alignment();
  read_tensor_infos(in, counts.tensors);
  locate_tensor_data(in.pos());
  check_tensor_layout();
}

// Magic, version and the two counts; a count that could not fit in the rest of the file is
// refused here, before anything is allocated for it.
GgufFile::Counts GgufFile::read_header(Cursor& in) {
  const std::string& p = file_->path();
  if (file_->size() < 4 || std::memcmp(file_->data(), "GGUF", 4) != 0)
    throw Error(p + ": not a GGUF file (it does not start with the magic \"GGUF\")");
  in.skip(4, "magic");
  version_ = in.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3)
      throw Error(p + ": big-endian GGUF files are not supported; convert it with gguf-py's gguf-convert-endian");
    if (version_ == 1) throw Error(p + ": GGUF version 1 is obsolete; re-convert the model with a current llama.cpp");
    throw Error(p + ": unsupported GGUF version " + std::to_string(version_) + " (this reader handles 2 and 3)");
  }
  const uint64_t tensor_count = in.read<uint64_t>("tensor_count");
  const uint64_t kv_count = in.read<uint64_t>("metadata_kv_count");
  if (kv_count > in.remaining() / kMinKvBytes)
    throw Error(p + ": metadata_kv_count " + std::to_string(kv_count) + " cannot fit in the " +
                std::to_string(in.remaining()) + " bytes left (corrupt header)");
  if (tensor_count > in.remaining() / kMinTensorInfoBytes)
    throw Error(p + ": tensor_count " + std::to_string(tensor_count) + " cannot fit in the " +
                std::to_string(in.remaining()) + " bytes left (corrupt header)");
  return {tensor_count, kv_count};
}

// The key/value pairs. Scalars and strings are decoded; arrays are length-checked and left in the
// mapped file (GgufValue::elems).
void GgufFile::read_metadata(Cursor& in, uint64_t kv_count) {
  const std::string& p = file_->path();
  key_order_.reserve(static_cast<size_t>(kv_count));
  for (uint64_t k = 0; k < kv_count; ++k) {
    const std::string kth = "metadata key #" + std::to_string(k);
    std::string key(in.read_string(kth));
    const std::string where = "metadata '" + key + "'";
    if (metadata_.count(key)) throw Error(p + ": duplicate " + where);
    const uint32_t raw_type = in.read<uint32_t>(where + " type");
    if (raw_type >= kGgufTypeCount)
      throw Error(p + ": " + where + " has unknown value type " + std::to_string(raw_type));
    GgufValue v;
    v.type = static_cast<GgufType>(raw_type);
    if (v.type == GgufType::STRING) {
      v.s = std::string(in.read_string(where));
    } else if (v.type == GgufType::ARRAY) {
      const uint32_t raw_elem = in.read<uint32_t>(where + " element type");
      if (raw_elem >= kGgufTypeCount)
        throw Error(p + ": " + where + " is an array of unknown type " + std::to_string(raw_elem));
      v.elem_type = static_cast<GgufType>(raw_elem);
      if (v.elem_type == GgufType::ARRAY)
        throw Error(p + ": " + where + " is an array of arrays, which GGUF readers do not support");
      v.count = in.read<uint64_t>(where + " element count");
      const size_t begin = in.pos();
      if (v.elem_type == GgufType::STRING) {
        if (v.count > in.remaining() / 8)
          throw Error(p + ": " + where + " claims " + std::to_string(v.count) + " strings, more than the " +
                      std::to_string(in.remaining()) + " bytes left can hold");
        for (uint64_t e = 0; e < v.count; ++e) in.read_string(where + " element " + std::to_string(e));
      } else {
        const size_t es = scalar_size(v.elem_type);
        if (v.count > in.remaining() / es)
          throw Error(p + ": " + where + " claims " + std::to_string(v.count) + " " + gguf_type_name(v.elem_type) +
                      " elements, more than the " + std::to_string(in.remaining()) + " bytes left can hold");
        in.skip(v.count * es, where + " elements");
      }
      v.elems = file_->data() + begin;
      v.elems_nbytes = in.pos() - begin;
    } else {
      decode_scalar(v.type, in.skip(scalar_size(v.type), where + " value"), v);
    }
    key_order_.push_back(key);
    metadata_.emplace(std::move(key), std::move(v));
  }
}

// general.alignment (default 32): where the data section and every tensor in it start.
void GgufFile::read_alignment() {
  const std::string& p = file_->path();
  if (has("general.alignment")) {
    const GgufValue& a = value("general.alignment");
    if (!is_int_type(a.type) || !is_unsigned_type(a.type))
      throw Error(p + ": metadata 'general.alignment' must be an unsigned integer, got " + gguf_type_name(a.type));
    if (a.u == 0 || (a.u & (a.u - 1)) != 0 || a.u > (1u << 30))
      throw Error(p + ": metadata 'general.alignment' is " + std::to_string(a.u) + ", expected a power of two");
    alignment_ = a.u;
  } else {
    alignment_ = kDefaultAlignment;
  }
}

// Name, dims, type and offset of each tensor; its byte size follows from its type and dims.
void GgufFile::read_tensor_infos(Cursor& in, uint64_t tensor_count) {
  const std::string& p = file_->path();
  tensor_order_.reserve(static_cast<size_t>(tensor_count));
  for (uint64_t t = 0; t < tensor_count; ++t) {
    GgufTensorInfo info;
    info.name = std::string(in.read_string("name of tensor #" + std::to_string(t)));
    const std::string where = p + ": tensor '" + info.name + "'";
    if (tensors_.count(info.name)) throw Error(where + ": duplicate tensor name");
    const uint32_t n_dims = in.read<uint32_t>("n_dims of tensor '" + info.name + "'");
    if (n_dims > kMaxDims)
      throw Error(where + ": " + std::to_string(n_dims) + " dimensions, at most " + std::to_string(kMaxDims) +
                  " allowed");
    for (uint32_t i = 0; i < n_dims; ++i) {
      const uint64_t d = in.read<uint64_t>("dims of tensor '" + info.name + "'");
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw Error(where + ": dimension " + std::to_string(i) + " is " + std::to_string(d) + " (corrupt)");
      info.ne.push_back(static_cast<int64_t>(d));
    }
    const uint32_t raw_type = in.read<uint32_t>("type of tensor '" + info.name + "'");
    const GgmlTypeTraits* tr = find_ggml_type(raw_type);
    if (tr == nullptr)
      throw Error(where + ": unknown ggml type " + std::to_string(raw_type) +
                  " (a quantization newer than this reader; re-quantize to Q8_0, Q4_K or F16)");
    info.type = tr->type;
    info.offset = in.read<uint64_t>("offset of tensor '" + info.name + "'");

    int64_t numel = 1;
    for (int64_t d : info.ne)
      if (__builtin_mul_overflow(numel, d, &numel))
        throw Error(where + ": dims " + dims_str(info.ne) + " overflow a 64-bit element count");
    const int64_t row = info.ne.empty() ? 1 : info.ne[0];
    if (row % tr->block_size != 0)
      throw Error(where + ": ne[0] = " + std::to_string(row) + " is not a multiple of the " + tr->name +
                  " block size " + std::to_string(tr->block_size));
    uint64_t nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(numel / tr->block_size), static_cast<uint64_t>(tr->type_size),
                               &nbytes))
      throw Error(where + ": dims " + dims_str(info.ne) + " overflow a 64-bit byte count");
    info.nbytes = static_cast<size_t>(nbytes);
    tensor_order_.push_back(info.name);
    tensors_.emplace(info.name, std::move(info));
  }
}

uint64_t GgufFile::data_section_size() const { return file_->size() > data_offset_ ? file_->size() - data_offset_ : 0; }

// The data section starts at the first multiple of the alignment after the tensor infos; every
// tensor's offset is aligned and its bytes lie inside the section.
void GgufFile::locate_tensor_data(uint64_t end_of_infos) {
  const std::string& p = file_->path();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t data_size = data_section_size();
  for (auto& [name, info] : tensors_) {
    const std::string where = p + ": tensor '" + name + "'";
    if (info.offset % alignment_ != 0)
      throw Error(where + ": offset " + std::to_string(info.offset) + " is not a multiple of the alignment " +
                  std::to_string(alignment_));
    if (info.offset > data_size || info.nbytes > data_size - info.offset)
      throw Error(where + ": data [" + std::to_string(info.offset) + ", +" + std::to_string(info.nbytes) +
                  ") lies past the end of the data section (" + std::to_string(data_size) +
                  " bytes; truncated download?)");
    info.data = file_->data() + data_offset_ + info.offset;
  }
}

void GgufFile::check_tensor_layout() const {
  const std::string& p = file_->path();
  const uint64_t data_size = data_section_size();
  // Writers (gguf-py, llama.cpp) place the tensors one after another, each padded to the
  // alignment. So in order of offset, a tensor's bytes (from its type and shape) must fill the
  // space up to the next tensor but for less than `alignment` bytes of padding: a type changed to
  // a smaller one, or a wrong dimension, leaves a larger gap and would be read as garbage; a
  // larger one overlaps the next tensor. The file ends at the last tensor's end, or at that end
  // rounded up to the alignment (both writers pad after every tensor, the last included).
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& [name, info] : tensors_)
    if (info.nbytes > 0) by_offset.push_back(&info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const GgufTensorInfo& t = *by_offset[i];
    const uint64_t end = t.offset + t.nbytes;  // <= data_size, checked above
    const bool last = i + 1 == by_offset.size();
    const uint64_t next = last ? data_size : by_offset[i + 1]->offset;
    const std::string next_name = last ? std::string("the end of the file") : "tensor '" + by_offset[i + 1]->name + "'";
    if (!last && end > next)
      throw Error(p + ": tensor '" + by_offset[i + 1]->name + "': data overlaps tensor '" + t.name +
                  "' (corrupt tensor offsets)");
    const uint64_t padded_end = (end + alignment_ - 1) / alignment_ * alignment_;
    if (last ? next != end && next != padded_end : next - end >= alignment_)
      throw Error(p + ": tensor '" + t.name + "': its " + ggml_type_name(t.type) + " data of shape " +
                  dims_str(t.shape()) + " is " + std::to_string(t.nbytes) + " bytes, but " + next_name + " is " +
                  std::to_string(next - t.offset) + " bytes after its start (not just the padding to the alignment; " +
                  "corrupt type or dimensions)");
  }
}

// ---------------------------------------------------------------------------------------------
// GgufFile: metadata access

const GgufValue& GgufFile::value(const std::string& key) const {
  auto it = metadata_.find(key);
  if (it == metadata_.end()) throw Error(path() + ": no metadata key '" + key + "'");
  return it->second;
}

namespace {

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  std::string got = gguf_type_name(v.type);
  if (v.type == GgufType::ARRAY) got += std::string(" of ") + gguf_type_name(v.elem_type);
  throw Error(path + ": metadata '" + key + "' is " + got + ", expected " + want);
}

int64_t as_int(const std::string& path, const std::string& key, GgufType t, const GgufValue& v) {
  if (is_unsigned_type(t)) {
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(path + ": metadata '" + key + "' value " + std::to_string(v.u) + " does not fit in int64");
    return static_cast<int64_t>(v.u);
  }
  return v.i;
}

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::STRING) wrong_type(path(), key, v, "STRING");
  return v.s;
}
std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!is_int_type(v.type)) wrong_type(path(), key, v, "an integer");
  return as_int(path(), key, v.type, v);
}
int64_t GgufFile::get_int(const std::string& key, int64_t fallback) const { return has(key) ? get_int(key) : fallback; }

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type == GgufType::FLOAT32 || v.type == GgufType::FLOAT64) return v.f;
  if (is_int_type(v.type)) return is_unsigned_type(v.type) ? static_cast<double>(v.u) : static_cast<double>(v.i);
  wrong_type(path(), key, v, "a number");
}
double GgufFile::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::BOOL) wrong_type(path(), key, v, "BOOL");
  return v.u != 0;
}
bool GgufFile::get_bool(const std::string& key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING) wrong_type(path(), key, v, "ARRAY of STRING");
  // The element bytes were length-checked on open, so walking them again cannot overrun.
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(v.count));
  const uint8_t* q = v.elems;
  for (uint64_t e = 0; e < v.count; ++e) {
    const uint64_t len = load_unaligned<uint64_t>(q);
    out.emplace_back(reinterpret_cast<const char*>(q + 8), static_cast<size_t>(len));
    q += 8 + len;
  }
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY || !(is_int_type(v.elem_type) || v.elem_type == GgufType::BOOL))
    wrong_type(path(), key, v, "ARRAY of integers");
  const size_t es = scalar_size(v.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(v.count));
  for (size_t e = 0; e < out.size(); ++e) {
    GgufValue tmp;
    decode_scalar(v.elem_type, v.elems + e * es, tmp);
    out[e] = as_int(path(), key, v.elem_type, tmp);
  }
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::ARRAY ||
      !(v.elem_type == GgufType::FLOAT32 || v.elem_type == GgufType::FLOAT64 || is_int_type(v.elem_type)))
    wrong_type(path(), key, v, "ARRAY of numbers");
  const size_t es = scalar_size(v.elem_type);
  std::vector<float> out(static_cast<size_t>(v.count));
  for (size_t e = 0; e < out.size(); ++e) {
    GgufValue tmp;
    decode_scalar(v.elem_type, v.elems + e * es, tmp);
    if (v.elem_type == GgufType::FLOAT32 || v.elem_type == GgufType::FLOAT64)
      out[e] = static_cast<float>(tmp.f);
    else
      out[e] = is_unsigned_type(v.elem_type) ? static_cast<float>(tmp.u) : static_cast<float>(tmp.i);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// GgufFile: tensors

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    throw Error(path() + ": no tensor '" + name + "' among " + std::to_string(tensors_.size()) + " tensors");
  return it->second;
}

// The tensor `name`, checked to have `shape` (unless empty) and a type headscope can dequantize.
const GgufTensorInfo& GgufFile::tensor(const std::string& name, const std::vector<int64_t>& shape) const {
  const GgufTensorInfo& t = tensor(name);
  const std::vector<int64_t> stored = t.shape();
  if (!shape.empty() && shape != stored)
    throw Error(path() + ": tensor '" + name + "': shape " + dims_str(stored) + " (ggml ne " + dims_str(t.ne) +
                "), expected " + dims_str(shape));
  if (!ggml_can_dequantize(t.type))
    throw Error(path() + ": tensor '" + name + "' is stored as " + ggml_type_name(t.type) +
                ", which headscope cannot dequantize (supported: F32 F16 BF16 F64 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K "
                "Q4_K Q5_K Q6_K)");
  return t;
}

Tensor GgufFile::to_f32(const std::string& name, const std::vector<int64_t>& shape) const {
  const GgufTensorInfo& t = tensor(name, shape);
  const std::vector<int64_t> stored = t.shape();
  Tensor out(stored, Tensor::Uninitialized{});  // dequantize_row writes every value
  // One sequential pass: conversion runs near memory speed (about 3 ns per value on the
  // reference machine for a whole Q4_1 model, half of it first-touch page faults of `out`), so
  // threads would buy little at load time and contend with everything else on two cores.
  dequantize_row(t.type, t.data, out.ptr(), t.numel());
  return out;
}

}  // namespace headscope::io
