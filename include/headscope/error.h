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

}  // namespace headscope
