// headscope — errors. Every failure the user can cause (bad files, bad text, bad requests)
// is reported as headscope::Error with a one-line message that names the file / tensor /
// argument and says what is wrong, with the figures that matter (the limit, the estimate, what
// would fit). The core speaks in its own terms; where a different request would succeed, the
// error carries that Remedy, and each frontend says how to ask for it in its own terms (a flag, a
// request field, a keyword argument). Frontends turn an Error into exit code 2 or HTTP 4xx.
#pragma once
#include <stdexcept>
#include <string>

namespace headscope {

// What would let a refused request through, as the core's options name it.
enum class Remedy {
  kNone,
  kTruncate,     // cut the text to the model's position limit (EncodeOptions::truncate)
  kStreamMaps,   // analyse with streamed attention maps (AnalyseOptions::Maps::kStream)
  kDenseMaps,    // analyse with dense attention maps kept (AnalyseOptions::Maps::kDense)
  kShorterText,  // a shorter text, or a larger memory budget for a run (LoadOptions::run_memory_budget)
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, Remedy remedy = Remedy::kNone) : std::runtime_error(what), remedy_(remedy) {}
  Remedy remedy() const { return remedy_; }

 private:
  Remedy remedy_;
};

// A request that is well-formed but would need more than headscope allows or the machine has
// (memory estimated before allocating, a budget such as the template output size, a length
// limit). Frontends answer it like other errors (exit 2), the server with HTTP 413.
class ResourceError : public Error {
 public:
  explicit ResourceError(const std::string& what, Remedy remedy = Remedy::kNone) : Error(what, remedy) {}
};

}  // namespace headscope
