// The server's memory under ever new texts: the free memory of malloc's arenas goes back to the
// system when the run cache asks for it (return_free_memory, after each new run).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "server/run_cache.h"

// Under AddressSanitizer malloc is the sanitizer's allocator, which has neither glibc's arenas nor
// malloc_trim: the test is about glibc's allocator and is skipped there.
#if defined(__SANITIZE_ADDRESS__)
#define HEADSCOPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HEADSCOPE_ASAN 1
#endif
#endif

namespace headscope::server {
namespace {

// Resident bytes of this process, read from /proc (not from the allocator being tested).
size_t rss_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) << 10;
  return 0;
}

#if defined(__GLIBC__)
TEST(ServerMemory, FreedArenaMemoryGoesBackToTheSystem) {
  // Four threads, as requests served in parallel, each fill their own arena with 64 MiB of small
  // blocks (below any mmap threshold) and free all but the last, which keeps the freed ones below
  // the arena's top where glibc never trims by itself.
#if defined(HEADSCOPE_ASAN)
  GTEST_SKIP() << "malloc is AddressSanitizer's allocator here, not glibc's";
#endif
  constexpr size_t kBlock = 32 << 10, kBlocks = 2048, kThreads = 4;
  std::vector<char*> pinned(kThreads);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&pinned, t] {
      std::vector<char*> blocks(kBlocks);
      for (char*& b : blocks) {
        b = static_cast<char*>(std::malloc(kBlock));
        for (size_t i = 0; i < kBlock; i += 4096) b[i] = 1;  // touched: resident
      }
      for (size_t i = 0; i + 1 < kBlocks; ++i) std::free(blocks[i]);
      pinned[t] = blocks.back();
    });
  for (std::thread& t : threads) t.join();
  const size_t held = rss_bytes();
  return_free_memory();
  const size_t after = rss_bytes();
  for (char* b : pinned) std::free(b);
  const size_t freed = kThreads * (kBlocks - 1) * kBlock;  // 256 MiB less four blocks
  EXPECT_GE(held, after + freed / 2) << "RSS " << (held >> 20) << " MiB before, " << (after >> 20) << " MiB after";
}
#endif

}  // namespace
}  // namespace headscope::server
