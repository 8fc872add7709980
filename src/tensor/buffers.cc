// Storage for Tensor (include/headscope/tensor.h): huge pages for large buffers, and a small cache
// of released large buffers so that repeated runs of the same length reuse mapped memory.
#include <sys/mman.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>

#include "headscope/tensor.h"

namespace headscope::detail {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kLarge = size_t(4) << 20;         // below this, plain operator new
constexpr size_t kCacheLimit = size_t(768) << 20;  // most bytes kept for reuse
constexpr size_t kCacheEntries = 16;
constexpr std::align_val_t kLineAligned{64};  // every buffer starts on a cache line (aligned SIMD loads)

struct Cache {
  std::mutex mutex;
  std::deque<std::pair<void*, size_t>> free;  // oldest first
  size_t bytes = 0;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: buffers may be released during static destruction
  return *c;
}

size_t round_up(size_t bytes) { return (bytes + kHugePage - 1) / kHugePage * kHugePage; }

}  // namespace

void* acquire_buffer(size_t bytes) {
  if (bytes < kLarge) return ::operator new(bytes, kLineAligned);
  const size_t size = round_up(bytes);
  {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto it = c.free.begin(); it != c.free.end(); ++it)
      if (it->second == size) {
        void* p = it->first;
        c.bytes -= size;
        c.free.erase(it);
        return p;
      }
  }
  void* p = std::aligned_alloc(kHugePage, size);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void release_buffer(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kLarge) {
    ::operator delete(p, kLineAligned);
    return;
  }
  const size_t size = round_up(bytes);
  if (size > kCacheLimit) {
    std::free(p);
    return;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.free.emplace_back(p, size);
  c.bytes += size;
  while (c.bytes > kCacheLimit || c.free.size() > kCacheEntries) {
    std::free(c.free.front().first);
    c.bytes -= c.free.front().second;
    c.free.pop_front();
  }
}

size_t cached_buffer_bytes() noexcept {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.bytes;
}

}  // namespace headscope::detail
