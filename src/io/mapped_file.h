// headscope — read-only memory mapping of a whole file (POSIX mmap), shared by the safetensors and
// GGUF readers. Weights stay in the page cache and are touched only when a tensor is converted.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace headscope::io {

// A read-only memory mapping of a whole file. Move-only; unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  const uint8_t* data() const { return data_; }  // nullptr for an empty file
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace headscope::io
