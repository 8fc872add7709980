// headscope — the memory checks made before allocating: a model's weights before they are loaded
// (check_load_memory) and every run's buffers (Model::check_run_memory).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "headscope/limits.h"
#include "headscope/model.h"

namespace headscope {

namespace {

// MemAvailable from /proc/meminfo in bytes: the kernel's estimate of what can be allocated
// without swapping. 0 when it cannot be read (not Linux): then no check is made.
uint64_t mem_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1 << 30));
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", double(bytes) / double(1 << 20));
  return buf;
}

std::string millions(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  return buf;
}

}  // namespace

void check_load_memory(const std::string& path, const LoadOptions& options) {
  uint64_t budget = options.load_memory_budget;
  if (budget == 0) {
    const uint64_t available = mem_available();
    if (available == 0) return;  // unknown: let the allocator decide
    budget = available > limits::kRunMemoryMarginBytes ? available - limits::kRunMemoryMarginBytes : 0;
  }
  LoadEstimate e;
  try {
    e = load_estimate(path);
  } catch (const Error&) {
    return;  // not a model the estimate can read: the loader names what is wrong (config first)
  }
  if (e.bytes <= budget) return;
  const uint64_t per_weight = e.parameters > 0 ? std::max<uint64_t>(1, e.bytes / e.parameters) : 4;
  throw ResourceError(path + ": loading needs about " + gib(e.bytes) + " (" + millions(e.parameters) +
                      (e.stored_bytes > 0 ? " weights, linear layers kept quantized" : " weights, kept as fp32") +
                      ") but " + gib(budget) + " is available; a model of up to about " +
                      millions(budget / per_weight) + " weights would fit (free some memory, or pick a smaller model)");
}

uint64_t Model::run_memory_budget() const {
  if (options_.run_memory_budget > 0) return options_.run_memory_budget;
  if (const char* env = std::getenv("HEADSCOPE_MEMORY_BUDGET"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end == env || *end != '\0')
      throw Error(std::string("HEADSCOPE_MEMORY_BUDGET is '") + env + "', expected a number of bytes");
    if (v == 0)  // a budget of nothing refuses every run; unset the variable for the machine's memory
      throw Error(
          "HEADSCOPE_MEMORY_BUDGET is 0, which leaves nothing to run with; give a number of bytes above 0 "
          "or unset it to use what the machine has available");
    return v;
  }
  const uint64_t available = mem_available();
  if (available == 0) return UINT64_MAX;  // unknown: let the allocator decide
  return available > limits::kRunMemoryMarginBytes ? available - limits::kRunMemoryMarginBytes : 0;
}

namespace {
// The ResourceError of a pass over T tokens needing `bytes` over `budget`; `bytes_at(n)` grows with
// n, and the longest text that fits is found by bisection.
[[noreturn]] void refuse_run(const Model& m, int64_t T, uint64_t bytes, uint64_t budget, const char* what,
                             const std::function<uint64_t(int64_t)>& bytes_at) {
  int64_t lo = 0, hi = std::min<int64_t>(T, m.config().max_positions);
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (bytes_at(mid) <= budget)
      lo = mid;
    else
      hi = mid - 1;
  }
  const std::string fits =
      lo > 0 ? "the longest text that fits is about " + std::to_string(lo) + " tokens" : "not even one token fits";
  throw ResourceError(std::string(what) + " over " + std::to_string(T) + " tokens needs about " + gib(bytes) +
                      " (captured tensors and working memory) but " + gib(budget) + " is available; " + fits +
                      " (shorten the text, or capture less)");
}
}  // namespace

void Model::check_run_memory(int64_t T, uint64_t bytes, const CaptureOptions& options) const {
  const uint64_t budget = run_memory_budget();
  if (bytes <= budget) return;
  refuse_run(*this, T, bytes, budget, "a run", [&](int64_t n) { return run_bytes(n, options); });
}

void Model::check_gradient_memory(int64_t T, uint64_t bytes, const GradientOptions& options) const {
  const uint64_t budget = run_memory_budget();
  if (bytes <= budget) return;
  refuse_run(*this, T, bytes, budget, "a forward and backward pass",
             [&](int64_t n) { return gradient_bytes(n, options); });
}

Gradients Model::gradients(const Encoding&, const GradientSeed&, const GradientOptions&) const {
  throw Error(config().name + ": this model has no backward pass");
}

uint64_t Model::gradient_bytes(int64_t, const GradientOptions&) const {
  throw Error(config().name + ": this model has no backward pass");
}

}  // namespace headscope
