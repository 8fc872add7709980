// safetensors parsing, validation and fp32 conversion; model-directory resolution (single file,
// sharded index, or a helpful error for PyTorch pickles). Format: see safetensors.h.
#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "headscope/limits.h"
#include "io/float_bits.h"

namespace headscope::io {

static_assert(std::endian::native == std::endian::little,
              "safetensors and GGUF store little-endian data; a big-endian host would need byte swaps");

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "F32", 4}, {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},       {DType::F64, "F64", 8},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4},         {DType::I16, "I16", 2},         {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},       {DType::U16, "U16", 2},         {DType::U32, "U32", 4},
    {DType::U64, "U64", 8}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeInfo* find_dtype(const std::string& name) {
  for (const auto& d : kDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string known_dtype_list() {
  std::string s;
  for (const auto& d : kDTypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string tensor_where(const std::string& file, const std::string& tensor) {
  return file + ": tensor '" + tensor + "'";
}

// Reads a JSON array of non-negative integers that each fit in int64.
std::vector<uint64_t> read_uint_array(const json& j, const std::string& where, const char* field) {
  if (!j.is_array()) throw Error(where + ": \"" + field + "\" must be an array of non-negative integers");
  std::vector<uint64_t> out;
  out.reserve(j.size());
  for (const auto& v : j) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(where + ": \"" + field + "\" contains " + v.dump() + ", expected a non-negative integer");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

std::string python_command_for_pickle(const fs::path& pickle, const fs::path& out) {
  // Loading the state dict directly keeps the checkpoint's tensor names exactly as transformers
  // would see them; clone() breaks storage sharing (tied embeddings), which save_file rejects.
  return "python -c \"import torch; from safetensors.torch import save_file; "
         "sd = torch.load('" +
         pickle.string() +
         "', map_location='cpu', weights_only=True); "
         "save_file({k: v.clone().contiguous() for k, v in sd.items()}, '" +
         out.string() + "', metadata={'format': 'pt'})\"";
}

}  // namespace

const char* dtype_name(DType d) {
  for (const auto& info : kDTypes)
    if (info.dtype == d) return info.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (const auto& info : kDTypes)
    if (info.dtype == d) return info.size;
  return 0;
}

Tensor to_f32(const RawTensor& raw) {
  const std::string where = tensor_where(raw.file, raw.name);
  int64_t numel = 1;
  for (int64_t d : raw.shape) {
    if (d < 0 || (d > 0 && numel > std::numeric_limits<int64_t>::max() / d))
      throw Error(where + ": invalid shape " + shape_str(raw.shape));
    numel *= d;
  }
  const size_t esize = dtype_size(raw.dtype);
  if (esize == 0 || static_cast<uint64_t>(numel) > std::numeric_limits<size_t>::max() / esize ||
      static_cast<size_t>(numel) * esize != raw.nbytes || (raw.nbytes > 0 && raw.data == nullptr))
    throw Error(where + ": " + std::to_string(raw.nbytes) + " bytes do not hold shape " + shape_str(raw.shape) +
                " of " + dtype_name(raw.dtype));

  Tensor out(raw.shape, Tensor::Uninitialized{});  // every element is written below (or we throw)
  float* dst = out.ptr();
  const size_t n = static_cast<size_t>(numel);
  switch (raw.dtype) {
    case DType::F32:
      if (n > 0) std::memcpy(dst, raw.data, n * sizeof(float));
      break;
    case DType::F16:
      f16_to_f32_row(raw.data, dst, n);
      break;
    case DType::BF16:
      bf16_to_f32_row(raw.data, dst, n);
      break;
    case DType::F64:
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, raw.data + 8 * i, sizeof v);
        dst[i] = static_cast<float>(v);  // round to nearest even; out-of-range -> ±inf, as torch does
      }
      break;
    default:
      throw Error(where + ": dtype " + dtype_name(raw.dtype) +
                  " is not a floating-point weight; only F32, F16, BF16 and F64 convert to fp32");
  }
  return out;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : file_(std::make_unique<MappedFile>(path)) {
  const uint8_t* base = file_->data();
  const size_t size = file_->size();
  if (size < 8)
    throw Error(path + ": not a safetensors file (" + std::to_string(size) +
                " bytes; it must start with an 8-byte header length)");
  uint64_t header_len;
  std::memcpy(&header_len, base, sizeof header_len);
  if (header_len > limits::kMaxSafetensorsHeaderBytes)
    throw Error(path + ": header length " + std::to_string(header_len) + " exceeds the format's limit of " +
                std::to_string(limits::kMaxSafetensorsHeaderBytes) +
                " bytes (corrupt file, or not a safetensors file)");
  if (header_len > size - 8)
    throw Error(path + ": header length " + std::to_string(header_len) + " exceeds the " + std::to_string(size - 8) +
                " bytes after the length field (truncated download, or not a safetensors file)");
  if (header_len < 2 || base[8] != '{')
    throw Error(path + ": the header does not start with '{' (corrupt header length, or not a safetensors file)");

  json header;
  try {
    header = json::parse(base + 8, base + 8 + header_len);
  } catch (const json::exception& e) {
    throw Error(path + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw Error(path + ": header must be a JSON object, got " + header.type_name());

  const uint8_t* buffer = base + 8 + header_len;
  const uint64_t buffer_size = size - 8 - header_len;

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(path + ": \"__metadata__\" must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw Error(path + ": \"__metadata__\" value for '" + k + "' must be a string");
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = tensor_where(path, name);
    if (!entry.is_object()) throw Error(where + ": entry must be an object with dtype, shape and data_offsets");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) throw Error(where + ": missing \"" + field + "\"");

    if (!entry["dtype"].is_string()) throw Error(where + ": \"dtype\" must be a string");
    const std::string dtype_str = entry["dtype"].get<std::string>();
    const DTypeInfo* dtype = find_dtype(dtype_str);
    if (dtype == nullptr)
      throw Error(where + ": unknown dtype \"" + dtype_str + "\" (known: " + known_dtype_list() + ")");

    const std::vector<uint64_t> dims = read_uint_array(entry["shape"], where, "shape");
    const std::vector<uint64_t> offsets = read_uint_array(entry["data_offsets"], where, "data_offsets");
    if (offsets.size() != 2) throw Error(where + ": \"data_offsets\" must be [begin, end]");
    const uint64_t begin = offsets[0], end = offsets[1];

    std::vector<int64_t> shape(dims.begin(), dims.end());
    uint64_t nbytes = dtype->size;
    for (uint64_t d : dims)
      if (__builtin_mul_overflow(nbytes, d, &nbytes))
        throw Error(where + ": shape " + shape_str(shape) + " overflows 64-bit byte count");
    if (begin > end)
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] has begin after end");
    if (end > buffer_size)
      throw Error(where + ": data_offsets end " + std::to_string(end) + " is past the end of the data buffer (" +
                  std::to_string(buffer_size) + " bytes; truncated file?)");
    if (end - begin != nbytes)
      throw Error(where + ": shape " + shape_str(shape) + " of " + dtype->name + " needs " + std::to_string(nbytes) +
                  " bytes but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] span " +
                  std::to_string(end - begin));

    RawTensor raw;
    raw.name = name;
    raw.dtype = dtype->dtype;
    raw.shape = std::move(shape);
    raw.data = buffer + begin;
    raw.nbytes = static_cast<size_t>(nbytes);
    raw.file = path;
    tensors_.emplace(name, std::move(raw));
  }

  // The tensors tile the byte buffer exactly, as the reference reader's Metadata::validate
  // demands: in order of data_offsets, each begins where the previous one ended (the first at 0),
  // and the last ends at the end of the file. A gap, an overlap or bytes left over mean the header
  // and the data disagree; a header length a few bytes short (the header is padded with spaces,
  // so its JSON still parses) shows up here as a buffer longer than the tensors.
  std::vector<const RawTensor*> by_offset;
  for (const auto& [name, raw] : tensors_) by_offset.push_back(&raw);
  std::sort(by_offset.begin(), by_offset.end(), [](const RawTensor* a, const RawTensor* b) {
    return a->data != b->data ? a->data < b->data : a->nbytes < b->nbytes;
  });
  uint64_t expected = 0;
  const RawTensor* prev = nullptr;
  for (const RawTensor* t : by_offset) {
    const uint64_t begin = static_cast<uint64_t>(t->data - buffer);
    const std::string after = prev ? "tensor '" + prev->name + "'" : std::string("the start of the data buffer");
    if (begin < expected)
      throw Error(tensor_where(path, t->name) + ": data overlaps tensor '" + prev->name + "' (begins at byte " +
                  std::to_string(begin) + ", before its end " + std::to_string(expected) + "; corrupt header)");
    if (begin > expected)
      throw Error(tensor_where(path, t->name) + ": data begins at byte " + std::to_string(begin) +
                  ", leaving a gap of " + std::to_string(begin - expected) + " bytes after " + after +
                  " (corrupt header)");
    expected = begin + t->nbytes;
    prev = t;
  }
  if (expected != buffer_size)
    throw Error(path + ": the tensors cover " + std::to_string(expected) + " bytes but the data buffer holds " +
                std::to_string(buffer_size) + " (corrupt header length, or a truncated or padded file)");
}

namespace {

std::shared_ptr<SafetensorsFile> open_shared(const fs::path& p) {
  return std::make_shared<SafetensorsFile>(p.string());
}

// Resolves the weight files of a sharded checkpoint from its index.
void open_index(const fs::path& index_path, std::vector<std::shared_ptr<SafetensorsFile>>& files,
                std::map<std::string, const RawTensor*>& index) {
  const std::string ipath = index_path.string();
  MappedFile mapped(ipath);
  json j;
  try {
    j = json::parse(mapped.data(), mapped.data() + mapped.size());
  } catch (const json::exception& e) {
    throw Error(ipath + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(ipath + ": expected a JSON object with a \"weight_map\" object {tensor: shard file}");

  const fs::path dir = index_path.parent_path();
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto& [tensor, shard_json] : j["weight_map"].items()) {
    if (!shard_json.is_string()) throw Error(ipath + ": weight_map entry for tensor '" + tensor + "' is not a string");
    const std::string shard = shard_json.get<std::string>();
    // Shards live next to the index; refuse names that would reach elsewhere.
    if (shard.empty() || shard.find('/') != std::string::npos || shard.find('\\') != std::string::npos ||
        shard == "." || shard == "..")
      throw Error(ipath + ": tensor '" + tensor + "' maps to invalid shard name '" + shard + "'");
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const fs::path shard_path = dir / shard;
      if (!fs::exists(shard_path))
        throw Error(ipath + ": tensor '" + tensor + "' is in shard '" + shard + "', which is missing from " +
                    dir.string() + " (incomplete download?)");
      it = shards.emplace(shard, open_shared(shard_path)).first;
      files.push_back(it->second);
    }
    const auto& stored = it->second->tensors();
    auto t = stored.find(tensor);
    if (t == stored.end())
      throw Error(ipath + ": tensor '" + tensor + "' is listed for shard '" + shard + "' but " + it->second->path() +
                  " does not contain it");
    index[tensor] = &t->second;
  }
  if (index.empty()) throw Error(ipath + ": weight_map is empty");
}

std::vector<fs::path> files_with_suffix(const fs::path& dir, const std::vector<std::string>& suffixes) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    for (const auto& s : suffixes)
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
        out.push_back(entry.path());
        break;
      }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void throw_pickle_only(const fs::path& dir, const std::vector<fs::path>& pickles) {
  std::string found;
  for (const auto& p : pickles) found += (found.empty() ? "" : ", ") + p.filename().string();
  const bool sharded = pickles.size() > 1 || fs::exists(dir / "pytorch_model.bin.index.json");
  std::string how;
  if (sharded) {
    how =
        "load it with transformers and save it back: python -c \"from transformers import AutoModelForCausalLM as M; "
        "M.from_pretrained('" +
        dir.string() + "').save_pretrained('" + dir.string() +
        "', safe_serialization=True)\" (use the Auto class from the model card)";
  } else {
    how = "convert it once: " + python_command_for_pickle(pickles.front(), dir / "model.safetensors") +
          " (or load it with transformers and call save_pretrained(dir, safe_serialization=True))";
  }
  throw Error(dir.string() + ": has only PyTorch pickle weights (" + found + "); headscope reads safetensors, so " +
              how);
}

}  // namespace

WeightStore WeightStore::open_dir(const std::string& dir_in) {
  WeightStore store;
  store.source_ = dir_in;
  const fs::path p(dir_in);
  std::error_code ec;
  if (!fs::exists(p, ec))
    throw Error(dir_in + ": no such file or directory (expected a model directory with model.safetensors)");

  auto add_single = [&store](const fs::path& file) {
    auto f = open_shared(file);
    store.files_.push_back(f);
    for (const auto& [name, raw] : f->tensors()) store.index_[name] = &raw;
  };

  if (fs::is_regular_file(p, ec)) {
    const std::string name = p.filename().string();
    if (ends_with(name, ".safetensors")) {
      add_single(p);
    } else if (ends_with(name, ".safetensors.index.json")) {
      open_index(p, store.files_, store.index_);
    } else if (ends_with(name, ".bin") || ends_with(name, ".pt") || ends_with(name, ".pth")) {
      throw_pickle_only(p.parent_path().empty() ? fs::path(".") : p.parent_path(), {p});
    } else {
      throw Error(dir_in + ": not a safetensors file or index (expected *.safetensors or *.safetensors.index.json)");
    }
    return store;
  }

  if (fs::exists(p / "model.safetensors")) {
    add_single(p / "model.safetensors");
    return store;
  }
  if (fs::exists(p / "model.safetensors.index.json")) {
    open_index(p / "model.safetensors.index.json", store.files_, store.index_);
    return store;
  }
  // Non-standard names: one index, or exactly one weights file, is unambiguous.
  const auto indexes = files_with_suffix(p, {".safetensors.index.json"});
  if (indexes.size() == 1) {
    open_index(indexes.front(), store.files_, store.index_);
    return store;
  }
  const auto singles = files_with_suffix(p, {".safetensors"});
  if (singles.size() == 1 && indexes.empty()) {
    add_single(singles.front());
    return store;
  }
  if (!singles.empty() || !indexes.empty())
    throw Error(dir_in +
                ": several safetensors files and no model.safetensors or model.safetensors.index.json; "
                "pass the path of the one to load");

  const auto pickles = files_with_suffix(p, {".bin", ".pt", ".pth"});
  if (!pickles.empty()) throw_pickle_only(p, pickles);
  const auto ggufs = files_with_suffix(p, {".gguf"});
  if (!ggufs.empty())
    throw Error(dir_in + ": has no safetensors weights but has " + ggufs.front().filename().string() +
                "; pass the .gguf file itself");
  throw Error(dir_in + ": no model weights found (expected model.safetensors or model.safetensors.index.json)");
}

bool WeightStore::has(const std::string& name) const { return index_.count(name) != 0; }

const RawTensor& WeightStore::raw(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return *it->second;
  // Suggest the stored name sharing the most leading plus trailing characters: a wrong prefix
  // ("model." vs none) or layer index leaves the rest of the name intact.
  std::string best;
  size_t best_len = 0;
  for (const auto& [stored, _] : index_) {
    const size_t pre = std::mismatch(name.begin(), name.end(), stored.begin(), stored.end()).first - name.begin();
    const size_t suf = std::mismatch(name.rbegin(), name.rend(), stored.rbegin(), stored.rend()).first - name.rbegin();
    const size_t n = std::min(pre + suf, name.size());
    if (n > best_len) best_len = n, best = stored;
  }
  throw Error(source_ + ": no tensor '" + name + "' among " + std::to_string(index_.size()) + " tensors" +
              (best.empty() ? std::string() : " (closest: '" + best + "')"));
}

Tensor WeightStore::get(const std::string& name, const std::vector<int64_t>& shape) const {
  const RawTensor& r = raw(name);
  if (!shape.empty() && shape != r.shape)
    throw Error(tensor_where(r.file, name) + ": stored shape " + shape_str(r.shape) + ", expected " + shape_str(shape) +
                " (config.json does not match the weights?)");
  return to_f32(r);
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(index_.size());
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

}  // namespace headscope::io
