// headscope — reading a text or data file a user names (a --file, standard input, a corpus, a
// treebank), with a bound on its size. The file is opened once and examined on that descriptor:
// anything but a regular file (a directory, FIFO, socket or device) is refused before a byte is
// read, and a regular file over the limit is refused from its size alone. Standard input ('-')
// may be a pipe, a terminal or a redirected file; it is read up to limit + 1 bytes at most and
// refused there, without reading on. What the reader holds is the text itself and one 64 KiB
// chunk, so its memory never exceeds the limit by more than that.
#pragma once
#include <cstdint>
#include <string>

#include "headscope/error.h"
#include "headscope/limits.h"

namespace headscope {

// A path that names something other than a regular file. Frontends treat it as a wrong argument
// (the CLI's usage exit code), not as a file with bad contents.
class NotAFileError : public Error {
 public:
  using Error::Error;
};

// The whole of `path` ('-' = standard input). `what` names the file in messages ("text file",
// "corpus"). Throws NotAFileError for directories, FIFOs, sockets and devices (standard input may
// be a pipe or a terminal), ResourceError when the contents exceed max_bytes, Error when the file
// cannot be opened or read.
std::string read_input_file(const std::string& path, const std::string& what = "text file",
                            uint64_t max_bytes = limits::kMaxTextFileBytes);

}  // namespace headscope
