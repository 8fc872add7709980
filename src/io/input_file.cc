// headscope — read_input_file (headscope/input.h): a user-named file or standard input, bounded.
// The file is opened with O_NONBLOCK so that opening a FIFO with no writer returns at once (it is
// refused on its type right after); the type and size come from fstat on that same descriptor, so
// nothing can swap the file between the check and the read.
#include "headscope/input.h"

#include <fcntl.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace headscope {
namespace {

// Closes the descriptor it owns (not standard input).
struct Descriptor {
  int fd = -1;
  bool owned = false;
  ~Descriptor() {
    if (owned && fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

std::string mib(uint64_t bytes) {
  if (bytes % (uint64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Standard input may be a pipe, a socket, a terminal or a redirected regular file; a redirected
// directory or device (`< /dev/zero`) is refused like a named one.
bool stdin_allowed(mode_t mode, int fd) {
  return S_ISREG(mode) || S_ISFIFO(mode) || S_ISSOCK(mode) || (S_ISCHR(mode) && ::isatty(fd) == 1);
}

// Reads until end of file or until more than max_bytes have arrived; the string's capacity is
// reserved up front (pages are touched only as they fill), so it never reallocates.
std::string read_bounded(int fd, const std::string& name, const std::string& what, uint64_t max_bytes,
                         uint64_t expected) {
  std::string text;
  text.reserve(static_cast<size_t>(std::min(max_bytes, expected) + 1));
  char chunk[1 << 16];
  for (;;) {
    const uint64_t room = max_bytes + 1 - text.size();  // one byte past the limit tells it is over
    const ssize_t n = ::read(fd, chunk, static_cast<size_t>(std::min<uint64_t>(sizeof chunk, room)));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      // A non-blocking standard input with nothing yet: wait for it rather than spin.
      fd_set set;
      FD_ZERO(&set);
      FD_SET(fd, &set);
      ::select(fd + 1, &set, nullptr, nullptr, nullptr);
      continue;
    }
    if (n < 0) throw Error(name + ": cannot read the " + what + ": " + std::strerror(errno));
    if (n == 0) return text;
    text.append(chunk, static_cast<size_t>(n));
    if (text.size() > max_bytes)
      throw ResourceError(name + ": the " + what + " is larger than " + mib(max_bytes) + "; nothing beyond was read");
  }
}

}  // namespace

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "standard input" : path;
  Descriptor d;
  if (from_stdin) {
    d.fd = STDIN_FILENO;
  } else {
    d.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (d.fd < 0) throw Error(path + ": cannot open the " + what + ": " + std::strerror(errno));
    d.owned = true;
  }
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) throw Error(name + ": cannot examine the " + what + ": " + std::strerror(errno));
  if (from_stdin ? !stdin_allowed(st.st_mode, d.fd) : !S_ISREG(st.st_mode))
    throw NotAFileError(name + " is " + kind_of(st.st_mode) + ", not a " + what + "; give a regular file" +
                        (from_stdin ? "" : " (or '-' and pipe the text in)"));
  uint64_t expected = max_bytes;
  if (S_ISREG(st.st_mode)) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size > max_bytes)
      throw ResourceError(name + ": the " + what + " is " + std::to_string(size) + " bytes, more than the " +
                          mib(max_bytes) + " allowed");
    expected = size;
    // Reads of a regular file do not block; clearing O_NONBLOCK keeps network file systems honest.
    if (d.owned) ::fcntl(d.fd, F_SETFL, ::fcntl(d.fd, F_GETFL) & ~O_NONBLOCK);
  }
  return read_bounded(d.fd, name, what, max_bytes, expected);
}

}  // namespace headscope
