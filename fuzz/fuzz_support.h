// Helpers shared by the libFuzzer targets of fuzz/ (see docs/reliability.md, "Fuzzing").
//
// Every target feeds one input to one reader of headscope and accepts exactly two outcomes: the
// reader returns, or it throws headscope::Error (the one-line refusal users see). Anything else —
// another exception type (it would end as "internal error", exit 3), a crash, a sanitizer report,
// a leak, a hang or an allocation over libFuzzer's -malloc_limit_mb — is a finding.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "headscope/error.h"

namespace headscope::fuzz {

// An anonymous in-memory file holding `bytes`, reachable by path (/proc/self/fd/N) for readers
// that take a path and memory-map it. Removed when the object goes.
class MemFile {
 public:
  explicit MemFile(std::string_view bytes, const char* name = "fuzz") {
    fd_ = ::memfd_create(name, 0);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A real model folder for the targets that need one (tokenizer text, HTTP): $HEADSCOPE_MODEL, else
// models/all-MiniLM-L6-v2 below the current directory or its parents (make fuzz runs in build-fuzz/).
inline std::string default_model_dir() {
  if (const char* env = std::getenv("HEADSCOPE_MODEL"); env && *env) return env;
  std::filesystem::path dir = std::filesystem::current_path();
  for (int up = 0; up < 4; ++up, dir = dir.parent_path()) {
    const auto candidate = dir / "models" / "all-MiniLM-L6-v2";
    if (std::filesystem::exists(candidate / "config.json")) return candidate.string();
  }
  return "models/all-MiniLM-L6-v2";
}

// Runs `body`; a headscope::Error is the expected refusal of a bad input and is swallowed.
template <typename Body>
void expect_ok_or_error(Body&& body) {
  try {
    body();
  } catch (const headscope::Error&) {
  }
}

}  // namespace headscope::fuzz
