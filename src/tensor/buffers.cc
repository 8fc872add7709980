// Storage for Tensor (include/headscope/tensor.h): huge pages for large buffers, and a small cache
// of released large buffers so that repeated runs of the same length reuse mapped memory.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>

#include "headscope/tensor.h"

namespace headscope::detail {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kPage = 4096;
// Below kLarge, plain operator new. Attribution patching of a prompt pair frees some sixty
// tensors of 1-4 MiB (two captures, the gradients, every layer's W_O): taken from malloc's arenas,
// their pages went back to the system when the arena's top was trimmed and were faulted in again
// by the next pair; kept here (up to kCacheEntries buffers) they are reused.
constexpr size_t kLarge = size_t(1) << 20;
// From kHuge on, buffers are whole huge pages; below, whole 4 KiB pages without the huge-page
// advice: a 2.4 MB weight matrix in two huge pages would hold 4 MB resident.
constexpr size_t kHuge = size_t(4) << 20;
constexpr size_t kCacheLimit = size_t(768) << 20;  // most bytes kept for reuse
constexpr size_t kCacheEntries = 128;
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

size_t round_up(size_t bytes) {
  const size_t unit = bytes >= kHuge ? kHugePage : kPage;
  return (bytes + unit - 1) / unit * unit;
}

// Large buffers are mapped from the kernel and unmapped on release, never taken from malloc's
// arenas: a server that runs texts of ever new lengths from many threads would otherwise leave
// arenas fragmented by freed blocks of every size (glibc also raises its mmap threshold after the
// first large free, so later blocks up to 32 MiB land in the arenas), and its RSS would keep
// growing although every buffer is released. From kHuge, `size` is a multiple of kHugePage; the
// mapping is made one huge page longer and trimmed so that it starts on a huge-page boundary.
void* map_aligned(size_t size) {
  if (size < kHuge) {  // whole 4 KiB pages (round_up): no alignment or advice
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  const size_t span = size + kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  const size_t head = aligned - start, tail = span - head - size;
  if (head != 0) munmap(raw, head);
  if (tail != 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void unmap(void* p, size_t size) noexcept { munmap(p, size); }

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
  return map_aligned(size);
}

void release_buffer(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (bytes < kLarge) {
    ::operator delete(p, kLineAligned);
    return;
  }
  const size_t size = round_up(bytes);
  if (size > kCacheLimit) {
    unmap(p, size);
    return;
  }
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.free.emplace_back(p, size);
  c.bytes += size;
  while (c.bytes > kCacheLimit || c.free.size() > kCacheEntries) {
    unmap(c.free.front().first, c.free.front().second);
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
