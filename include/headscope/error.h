// headscope — errors. Every failure the user can cause (bad files, bad text, bad requests)
// is reported as headscope::Error with a one-line message that names the file / tensor /
// argument and, where possible, what to do next. Frontends turn it into exit code 2 or HTTP 4xx.
#pragma once
#include <stdexcept>
#include <string>

namespace headscope {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A request that is well-formed but would need more than headscope allows or the machine has
// (memory estimated before allocating, a budget such as the template output size, a length
// limit). Frontends answer it like other errors (exit 2), the server with HTTP 413.
class ResourceError : public Error {
 public:
  explicit ResourceError(const std::string& what) : Error(what) {}
};

}  // namespace headscope
