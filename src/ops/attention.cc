#include "ops/attention.h"

#include <atomic>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "ops/matmul.h"

namespace headscope::ops {
namespace {

// One head: P_h = softmax(scale · Q_h K_gᵀ + mask) into probs, then O_h = P_h V_g into out.
void attend_head(int64_t h, const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
                 const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
                 const ProbsOut& probs, float* out, int64_t ldo) {
  const int64_t g = kv_head_of[h];
  float* P = probs.data + h * probs.head_stride;           // [T_q, T_k], row stride probs.ld
  const float* Qh = q + h * d.d_head;                      // [T_q, d_head], stride ldq
  const float* Kg = k + g * d.d_head;                      // [T_k, d_head], stride ldk
  const float* Vg = v == nullptr ? nullptr : v + g * d.d_head;  // [T_k, d_head], stride ldv
  matmul(Qh, ldq, Kg, ldk, P, probs.ld, d.T_q, d.T_k, d.d_head, /*trans_b=*/true, d.scale);  // scale · Q Kᵀ
  softmax_rows(P, d.T_q, d.T_k, probs.ld, mask_first_row, mask);
  if (out != nullptr) matmul(P, probs.ld, Vg, ldv, out + h * d.d_head, ldo, d.T_q, d.d_head, d.T_k, /*trans_b=*/false);  // P V
}

// The order of a pool's work: item i is head i (i < n_head, its attention) or, from n_head on,
// part (i − n_head) % parts of head (i − n_head) / parts. A head's parts are queued once the
// heads kLag after it have been queued, so that a thread taking a part rarely finds its head
// still being computed, and at most ~kLag + threads heads' rows are live in cache at once.
std::vector<int64_t> pool_order(int64_t n_head, int parts) {
  constexpr int64_t kLag = 2;
  std::vector<int64_t> order;
  order.reserve(size_t(n_head * (parts + 1)));
  for (int64_t s = 0; s < n_head + kLag; ++s) {
    if (s < n_head) order.push_back(s);
    if (s >= kLag)
      for (int p = 0; p < parts; ++p) order.push_back(n_head + (s - kLag) * parts + p);
  }
  return order;
}

}  // namespace

void attention(const float* q, int64_t ldq, const float* k, int64_t ldk, const float* v, int64_t ldv,
               const int* kv_head_of, const AttentionDims& d, const KeyMask& mask, int64_t mask_first_row,
               ProbsOut probs, float* out, int64_t ldo) {
  // One head per thread; the GEMMs inside run single-threaded (oneDNN detects the parallel region).
  // Short sequences stay on one thread: waking a second one costs more than the work.
  constexpr int64_t kMinParallelScores = 1 << 15;
  const bool parallel = d.n_head * d.T_q * d.T_k >= kMinParallelScores;
  const HeadFollowUp* then = probs.then;
  if (then == nullptr || then->parts <= 0) {
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
    for (int64_t h = 0; h < d.n_head; ++h)
      attend_head(h, q, ldq, k, ldk, v, ldv, kv_head_of, d, mask, mask_first_row, probs, out, ldo);
    return;
  }
  // One pool for the heads and their follow-up parts (HeadFollowUp): a thread takes the next item
  // of pool_order; a part whose head is still being computed waits for it (that head was taken
  // earlier, by a thread that is computing it, so the wait ends).
  const std::vector<int64_t> order = pool_order(d.n_head, then->parts);
  const auto done = std::make_unique<std::atomic<bool>[]>(size_t(d.n_head));
  for (int64_t h = 0; h < d.n_head; ++h) done[size_t(h)].store(false, std::memory_order_relaxed);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr failure;
#pragma omp parallel if (parallel)
  for (size_t i = next.fetch_add(1); i < order.size(); i = next.fetch_add(1)) {
    const int64_t item = order[i];
    const int64_t h = item < d.n_head ? item : (item - d.n_head) / then->parts;
    try {
      if (item < d.n_head) {
        if (!failed.load(std::memory_order_relaxed))
          attend_head(h, q, ldq, k, ldk, v, ldv, kv_head_of, d, mask, mask_first_row, probs, out, ldo);
        done[size_t(h)].store(true, std::memory_order_release);
      } else {
        while (!done[size_t(h)].load(std::memory_order_acquire)) std::this_thread::yield();
        if (!failed.load(std::memory_order_relaxed)) then->run(h, int((item - d.n_head) % then->parts));
      }
    } catch (...) {
      if (item < d.n_head) done[size_t(h)].store(true, std::memory_order_release);
#pragma omp critical(headscope_attention_failure)
      if (!failure) failure = std::current_exception();
      failed.store(true, std::memory_order_relaxed);
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace headscope::ops
