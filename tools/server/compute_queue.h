// headscope server — admission for heavy requests (run, attention, decompose, generate).
//
// A fixed number of slots may work at once and a fixed number of requests may wait for one;
// a request that finds every slot taken and the waiting room full, or that waits longer than the
// limit, is turned away (the API answers 503 with Retry-After) instead of queueing without bound.
// Light requests (health, model, static files) never enter, so they stay fast under load.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

namespace headscope::server {

class ComputeQueue {
 public:
  ComputeQueue(int slots, int max_waiters, std::chrono::milliseconds max_wait);

  // Holds a slot until destroyed.
  class Ticket {
   public:
    explicit Ticket(ComputeQueue* queue) : queue_(queue) {}
    Ticket(Ticket&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (queue_) queue_->leave();
    }

   private:
    ComputeQueue* queue_;
  };

  // A slot, after waiting if a place in the waiting room is free; std::nullopt when it is full
  // or the wait ran past max_wait.
  std::optional<Ticket> enter();

  int busy() const;
  int waiting() const;
  int turned_away() const;  // requests refused so far

 private:
  void leave();

  const int slots_, max_waiters_;
  const std::chrono::milliseconds max_wait_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  int busy_ = 0, waiting_ = 0, turned_away_ = 0;
};

}  // namespace headscope::server
