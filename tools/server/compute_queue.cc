// headscope server — admission for heavy requests (see compute_queue.h).
#include "server/compute_queue.h"

#include <algorithm>

namespace headscope::server {

ComputeQueue::ComputeQueue(int slots, int max_waiters, std::chrono::milliseconds max_wait)
    : slots_(std::max(1, slots)), max_waiters_(std::max(0, max_waiters)), max_wait_(max_wait) {}

std::optional<ComputeQueue::Ticket> ComputeQueue::enter() {
  std::unique_lock lock(mutex_);
  if (busy_ >= slots_) {
    if (waiting_ >= max_waiters_) {
      ++turned_away_;
      return std::nullopt;
    }
    ++waiting_;
    const bool got = freed_.wait_for(lock, max_wait_, [&] { return busy_ < slots_; });
    --waiting_;
    if (!got) {
      ++turned_away_;
      return std::nullopt;
    }
  }
  ++busy_;
  return Ticket(this);
}

void ComputeQueue::leave() {
  {
    std::lock_guard lock(mutex_);
    --busy_;
  }
  freed_.notify_one();
}

int ComputeQueue::busy() const {
  std::lock_guard lock(mutex_);
  return busy_;
}
int ComputeQueue::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}
int ComputeQueue::turned_away() const {
  std::lock_guard lock(mutex_);
  return turned_away_;
}

}  // namespace headscope::server
