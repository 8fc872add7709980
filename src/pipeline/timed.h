// headscope — the wall and CPU seconds of one call, as the pipeline's documents report them.
#pragma once
#include <chrono>
#include <ctime>

#include "headscope/pipeline.h"

namespace headscope {

// Runs f() and returns its wall and CPU seconds.
template <class F>
Seconds timed(F&& f) {
  const auto wall = std::chrono::steady_clock::now();
  const std::clock_t cpu = std::clock();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count(),
          double(std::clock() - cpu) / CLOCKS_PER_SEC};
}

}  // namespace headscope
