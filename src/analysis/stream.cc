// A head's attention consumed block by block; see stream.h.
#include "analysis/stream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

#include "analysis/words.h"
#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// The rows without the sink start at the third kept position: a causal query's kept keys are the
// kept positions up to it, and rows of one or two keys (the first words of every text) would count
// as self-attending and evenly spread whatever the head does.
constexpr int kMinFreeKeys = 3;

std::vector<int32_t> index_of_kept(const std::vector<int32_t>& kept, int n) {
  std::vector<int32_t> index(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < kept.size(); ++i) index[static_cast<size_t>(kept[i])] = static_cast<int32_t>(i);
  return index;
}

}  // namespace

const SequenceInfo& StreamPlan::tokens_under(int64_t window) const {
  if (window == tokens.window) return tokens;
  for (const SequenceInfo& s : windowed_tokens)
    if (s.window == window) return s;
  throw Error("attention stream: the plan has no sliding window of " + std::to_string(window) + " tokens");
}

const SequenceInfo& StreamPlan::token_plain_under(int64_t window) const {
  if (window == tokens.window) return token_plain.units;
  for (size_t i = 0; i < windowed_tokens.size(); ++i)
    if (windowed_tokens[i].window == window) return windowed_token_plain[i];
  throw Error("attention stream: the plan has no sliding window of " + std::to_string(window) + " tokens");
}

const SequenceInfo& StreamPlan::token_free_under(int64_t window) const {
  if (window == tokens.window || !sink_free) return token_free.units;
  for (size_t i = 0; i < windowed_tokens.size(); ++i)
    if (windowed_tokens[i].window == window) return windowed_token_free[i];
  throw Error("attention stream: the plan has no sliding window of " + std::to_string(window) + " tokens");
}

StreamPlan make_stream_plan(SequenceInfo tokens, WordMap words, bool without_specials, int overview_cells,
                            std::span<const int64_t> layer_window) {
  const int T = tokens.T();
  if (T == 0) throw Error("attention stream: the text has no tokens");
  if (static_cast<int>(words.unit_of_token.size()) != T)
    throw Error("attention stream: the word map covers " + std::to_string(words.unit_of_token.size()) +
                " tokens, the text has " + std::to_string(T));
  if (overview_cells < 1) throw Error("attention stream: the overview needs at least one cell");
  StreamPlan plan;
  plan.word_units = describe_units(tokens, words);
  const int U = words.n_units;
  plan.last_token.assign(static_cast<size_t>(U), -1);
  plan.pieces.assign(static_cast<size_t>(U), 0);
  for (int t = 0; t < T; ++t) {
    const int32_t u = words.unit_of_token[static_cast<size_t>(t)];
    if (u < 0) continue;
    plan.last_token[static_cast<size_t>(u)] = t;
    ++plan.pieces[static_cast<size_t>(u)];
  }
  plan.without_specials = without_specials;
  plan.has_specials = without_specials && std::any_of(tokens.kinds.begin(), tokens.kinds.end(),
                                                      [](TokenKind k) { return k == TokenKind::kSpecial; });
  if (plan.has_specials) {
    plan.token_plain = special_free_units(tokens);
    plan.word_plain = special_free_units(plan.word_units);
    plan.token_plain_index = index_of_kept(plan.token_plain.kept, T);
    plan.word_plain_index = index_of_kept(plan.word_plain.kept, U);
  }
  plan.sink_free = tokens.causal && T > 1;
  if (plan.sink_free) {
    plan.token_free = special_free_units(tokens, /*drop_first=*/true);
    plan.word_free = special_free_units(plan.word_units, /*drop_first=*/true);
    plan.token_free_index = index_of_kept(plan.token_free.kept, T);
    plan.word_free_index = index_of_kept(plan.word_free.kept, U);
  }
  plan.cells = std::min(T, overview_cells);
  plan.cell_of.resize(static_cast<size_t>(T));
  for (int t = 0; t < T; ++t) plan.cell_of[static_cast<size_t>(t)] = static_cast<int32_t>(int64_t(t) * plan.cells / T);
  plan.cell_start.assign(static_cast<size_t>(plan.cells) + 1, T);
  for (int t = T - 1; t >= 0; --t) plan.cell_start[static_cast<size_t>(plan.cell_of[static_cast<size_t>(t)])] = t;
  plan.offset_count.assign(static_cast<size_t>(2 * T - 1), 0);
  if (tokens.attendable.empty()) {  // every key valid: T − |d| pairs at offset d, where the mask allows d
    for (int d = -(T - 1); d <= T - 1; ++d)
      if (tokens.may_attend(std::max(0, -d), std::max(0, -d) + d))  // the mask depends on d alone
        plan.offset_count[static_cast<size_t>(d + T - 1)] = T - std::abs(d);
  } else {
    for (int q = 0; q < T; ++q)
      for (int k = 0; k < T; ++k)
        if (tokens.may_attend(q, k)) ++plan.offset_count[static_cast<size_t>(k - q + T - 1)];
  }
  for (const int64_t w : layer_window) {
    if (w == tokens.window || std::any_of(plan.windowed_tokens.begin(), plan.windowed_tokens.end(),
                                          [w](const SequenceInfo& s) { return s.window == w; }))
      continue;
    plan.windowed_tokens.push_back(tokens);
    plan.windowed_tokens.back().window = w;
    // Kept tokens p .. p + K − 1: query q + p sees kept keys max(p, q + p − w + 1) .. q + p, which
    // are kept indices max(0, q − w + 1) .. q, the same window.
    const std::vector<int32_t>& kept = plan.token_plain.kept;
    const bool one_run = !kept.empty() && kept.back() - kept.front() + 1 == static_cast<int32_t>(kept.size());
    plan.windowed_token_plain.push_back(plan.token_plain.units);
    plan.windowed_token_plain.back().window = plan.has_specials && one_run ? w : 0;
    const std::vector<int32_t>& free = plan.token_free.kept;
    const bool free_run = !free.empty() && free.back() - free.front() + 1 == static_cast<int32_t>(free.size());
    plan.windowed_token_free.push_back(plan.token_free.units);
    plan.windowed_token_free.back().window = plan.sink_free && free_run ? w : 0;
  }
  plan.tokens = std::move(tokens);
  plan.gather = unit_gather(words);
  plan.words = std::move(words);
  return plan;
}

HeadStream::HeadStream(const StreamPlan& plan, int64_t window)
    : plan_(&plan),
      tokens_(&plan.tokens_under(window)),
      token_plain_(&plan.token_plain_under(window)),
      token_free_(&plan.token_free_under(window)) {
  const size_t T = static_cast<size_t>(plan.T());
  overview_.T = plan.T();
  overview_.cells = plan.cells;
  if (plan.has_specials) {
    token_row_.resize(T);
    unit_row_.resize(static_cast<size_t>(plan.words.n_units));
  }
  if (plan.sink_free) {
    free_token_row_.resize(T);
    free_unit_row_.resize(static_cast<size_t>(plan.words.n_units));
  }
}

// The overview's sums, allocated (zeroed) by the head's first rows rather than with the stream,
// so that the 2·cells² floats of every head (~560 MB at 8K tokens on SmolLM2) are cleared on the
// threads of the pass, a layer at a time, not on one thread before it starts.
void HeadStream::allocate_overview() {
  if (!overview_.sum.empty()) return;
  const size_t T = static_cast<size_t>(plan_->T()), cells = static_cast<size_t>(plan_->cells);
  overview_.sum.assign(cells * cells, 0.0f);
  overview_.max.assign(cells * cells, 0.0f);
  overview_.received.assign(T, 0.0);
  offset_sum_.assign(2 * T - 1, 0.0);
}

void HeadStream::check_block(int next, int q0, int q1, int width) const {
  const int T = plan_->T();
  if (q0 != next || q1 < q0 || q1 > T)
    throw Error("attention stream: rows " + std::to_string(q0) + ".." + std::to_string(q1) + " arrived; row " +
                std::to_string(next) + " of " + std::to_string(T) + " was expected next");
  if (width > T || (plan_->tokens.causal ? width < q1 : width != T))
    throw Error("attention stream: blocks of " + std::to_string(width) + " keys cannot hold rows up to " +
                std::to_string(q1) + " of " + std::to_string(T));
}

void HeadStream::add_rows(const float* rows, int q0, int q1, int width) {
  for (int part = 0; part < kParts; ++part) add_part(part, rows, q0, q1, width);
}

void HeadStream::add_token_rows(const float* rows, int q0, int q1, int width) {
  add_stat_rows(rows, q0, q1, width);
  add_overview_rows(rows, q0, q1, width);
}

void HeadStream::add_part(int part, const float* rows, int q0, int q1, int width) {
  if (part == 0)
    add_overview_rows(rows, q0, q1, width);
  else if (part == 1)
    add_word_rows(rows, q0, q1, width);
  else
    add_stat_rows(rows, q0, q1, width);
}

// Every consumer reads a row's first n keys only, n = q + 1 under a causal mask (the keys after
// q are masked, exact zeros, and may lie past the block's width), else T.
void HeadStream::add_stat_rows(const float* rows, int q0, int q1, int width) {
  check_block(next_row_, q0, q1, width);
  const StreamPlan& p = *plan_;
  const int T = p.T();
  for (int q = q0; q < q1; ++q) {
    const float* a = rows + static_cast<int64_t>(q - q0) * width;
    token.add_rows(a, q, q + 1, *tokens_);
    if (p.has_specials && p.token_plain_index[static_cast<size_t>(q)] >= 0) {
      drop_special_row(a, q, p.tokens, p.token_plain.kept, token_row_.data());
      const int qi = p.token_plain_index[static_cast<size_t>(q)];
      token_plain.add_rows(token_row_.data(), qi, qi + 1, *token_plain_);
    }
    if (p.sink_free && p.token_free_index[static_cast<size_t>(q)] >= kMinFreeKeys - 1) {
      drop_special_row(a, q, p.tokens, p.token_free.kept, free_token_row_.data());
      const int qi = p.token_free_index[static_cast<size_t>(q)];
      token_free.add_rows(free_token_row_.data(), qi, qi + 1, *token_free_);
    }
  }
  next_row_ = q1;
  if (next_row_ == T && p.without_specials && !p.has_specials) {  // the same rows
    token_plain = token;
    token_plain.set_value_norms(nullptr);
  }
}

// The rows of one row of cells are first summed and maxed key by key (one vector operation per
// key and row), and each cell's keys reduced once per row of cells, or at the end of a block where
// a row of cells spans two, instead of once per row (a cell holds only T / cells keys, too few for
// a vector of its own). The column sums and the offsets are summed in float over the same rows and
// added to their double totals at the same flush: a float sum of at most T / cells + 1 weights in
// [0, 1] (17 at 8K tokens) is within 17 · 2⁻²⁴ ≈ 1e-6 of its value, and the per-weight work is three
// float operations instead of two float and two double ones.
void HeadStream::add_overview_rows(const float* rows, int q0, int q1, int width) {
  check_block(next_overview_row_, q0, q1, width);
  allocate_overview();
  const StreamPlan& p = *plan_;
  const int T = p.T();
  // [T] this row of cells so far, per key, and [2T − 1] per offset. Every call ends on a flush,
  // which zeroes what it used, so the buffers are zeros whenever a call starts.
  thread_local std::vector<float> key_sum, key_max, offset_part;
  if (key_sum.size() < static_cast<size_t>(T)) key_sum.resize(static_cast<size_t>(T), 0.0f);
  if (key_max.size() < static_cast<size_t>(T)) key_max.resize(static_cast<size_t>(T), 0.0f);
  if (offset_part.size() < static_cast<size_t>(2 * T - 1)) offset_part.resize(static_cast<size_t>(2 * T - 1), 0.0f);
  float* ks = key_sum.data();
  float* km = key_max.data();
  int open = 0;        // keys touched by the rows summed so far
  int first_row = q0;  // the first of those rows
  for (int q = q0; q < q1; ++q) {
    const float* a = rows + static_cast<int64_t>(q - q0) * width;
    const int n = p.tokens.causal ? q + 1 : T;
    float* offsets = offset_part.data() + (T - 1 - q);
#pragma omp simd
    for (int k = 0; k < n; ++k) {
      ks[k] += a[k];
      km[k] = std::max(km[k], a[k]);
      offsets[k] += a[k];
    }
    open = std::max(open, n);
    const int64_t row_cell = p.cell_of[static_cast<size_t>(q)];
    if (q + 1 < q1 && p.cell_of[static_cast<size_t>(q) + 1] == row_cell) continue;
    float* cell_sum = overview_.sum.data() + row_cell * p.cells;
    float* cell_max = overview_.max.data() + row_cell * p.cells;
    double* received = overview_.received.data();
    for (int c = 0; c < p.cells && p.cell_start[static_cast<size_t>(c)] < open; ++c) {
      const int k0 = p.cell_start[static_cast<size_t>(c)],
                k1 = std::min(open, p.cell_start[static_cast<size_t>(c) + 1]);
      float sum = 0, max = 0;
      for (int k = k0; k < k1; ++k) {
        sum += ks[k];
        max = std::max(max, km[k]);
        received[k] += ks[k];
      }
      cell_sum[c] += sum;
      cell_max[c] = std::max(cell_max[c], max);
    }
    // Rows first_row .. q put keys 0 .. n − 1 at offsets −row .. n − 1 − row: indices
    // T − 1 − q .. T − 1 − first_row + open − 1.
    const int d0 = T - 1 - q, d1 = T - 1 - first_row + open;
    double* offset_total = offset_sum_.data();
    float* part = offset_part.data();
    for (int i = d0; i < d1; ++i) offset_total[i] += part[i];  // once per row of cells
    std::fill(part + d0, part + d1, 0.0f);
    std::fill_n(ks, open, 0.0f);
    std::fill_n(km, open, 0.0f);
    open = 0;
    first_row = q + 1;
  }
  next_overview_row_ = q1;
}

// Word level: each token row joins its unit's row; a unit complete with this token is analysed.
// A unit's row is written by its first query piece and added to by the others (gather_token_row),
// so a row taken back from spare_rows_ needs no zeroing.
void HeadStream::add_word_rows(const float* rows, int q0, int q1, int width) {
  check_block(next_word_row_, q0, q1, width);
  const StreamPlan& p = *plan_;
  const int T = p.T(), U = p.words.n_units;
  for (int q = q0; q < q1; ++q) {
    const float* a = rows + static_cast<int64_t>(q - q0) * width;
    const int n = p.tokens.causal ? q + 1 : T;
    const int32_t u = p.words.unit_of_token[static_cast<size_t>(q)];
    if (u < 0) continue;
    auto open = std::find_if(open_.begin(), open_.end(), [u](const auto& o) { return o.first == u; });
    const bool first_piece = open == open_.end();
    if (first_piece) {
      std::vector<float> row;
      if (spare_rows_.empty()) {
        row.assign(static_cast<size_t>(U), 0.0f);
      } else {
        row = std::move(spare_rows_.back());
        spare_rows_.pop_back();
      }
      open = open_.insert(open_.end(), {u, std::move(row)});
    }
    float* unit_row = open->second.data();
    gather_token_row(a, n, p.gather, unit_row, /*add=*/!first_piece);
    if (q != p.last_token[static_cast<size_t>(u)]) continue;
    finish_unit_row(unit_row, p.gather.units_before[static_cast<size_t>(n)], p.pieces[static_cast<size_t>(u)]);
    word.add_rows(unit_row, u, u + 1, p.word_units);
    if (p.has_specials && p.word_plain_index[static_cast<size_t>(u)] >= 0) {
      drop_special_row(unit_row, u, p.word_units, p.word_plain.kept, unit_row_.data());
      const int ui = p.word_plain_index[static_cast<size_t>(u)];
      word_plain.add_rows(unit_row_.data(), ui, ui + 1, p.word_plain.units);
    }
    if (p.sink_free && p.word_free_index[static_cast<size_t>(u)] >= kMinFreeKeys - 1) {
      drop_special_row(unit_row, u, p.word_units, p.word_free.kept, free_unit_row_.data());
      const int ui = p.word_free_index[static_cast<size_t>(u)];
      word_free.add_rows(free_unit_row_.data(), ui, ui + 1, p.word_free.units);
    }
    spare_rows_.push_back(std::move(open->second));
    open_.erase(open);
  }
  next_word_row_ = q1;
  if (next_word_row_ == T) std::vector<std::vector<float>>().swap(spare_rows_);
  if (next_word_row_ == T && p.without_specials && !p.has_specials) word_plain = word;
}

HeadOverview HeadStream::take_overview() {
  allocate_overview();
  HeadOverview out = std::move(overview_);
  out.offset_mass.assign(offset_sum_.size(), std::numeric_limits<double>::quiet_NaN());
  const int64_t T = plan_->T(), window = tokens_->causal ? tokens_->window : 0;
  for (size_t i = 0; i < offset_sum_.size(); ++i) {
    const int64_t d = static_cast<int64_t>(i) - (T - 1);  // no query sees a key at d <= −window
    if (plan_->offset_count[i] > 0 && (window <= 0 || d > -window))
      out.offset_mass[i] = offset_sum_[i] / static_cast<double>(plan_->offset_count[i]);
  }
  std::vector<double>().swap(offset_sum_);
  return out;
}

std::vector<HeadStream> make_head_streams(const StreamPlan& plan, int n_heads, std::span<const int64_t> layer_window) {
  if (layer_window.empty()) return std::vector<HeadStream>(static_cast<size_t>(n_heads), HeadStream(plan));
  const int64_t L = static_cast<int64_t>(layer_window.size());
  if (n_heads % L != 0)
    throw Error("attention stream: " + std::to_string(n_heads) + " head streams for " + std::to_string(L) +
                " layer windows");
  std::vector<HeadStream> heads;
  heads.reserve(static_cast<size_t>(n_heads));
  for (int64_t i = 0; i < n_heads; ++i) heads.emplace_back(plan, layer_window[size_t(i / (n_heads / L))]);
  return heads;
}

namespace {

// fn(i) for i in [0, n) on every core; the first exception leaves the loop and is rethrown after.
template <class Fn>
void parallel_for(int64_t n, Fn&& fn) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
#pragma omp critical
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

void feed_stored(std::vector<HeadStream>& heads, const Tensor& attention, const Tensor& value_norms) {
  const int64_t n = static_cast<int64_t>(heads.size()), T = attention.rank() == 4 ? attention.dim(2) : 0;
  attention.expect_shape({-1, -1, T, T}, "stored attention for the head streams");
  if (attention.dim(0) * attention.dim(1) != n)
    throw Error("attention stream: " + std::to_string(n) + " head streams for maps of " + attention.shape_str());
  if (!value_norms.empty()) {
    value_norms.expect_shape({attention.dim(0), attention.dim(1), T}, "value norms for the head streams");
    for (int64_t i = 0; i < n; ++i) heads[size_t(i)].token.set_value_norms(value_norms.ptr() + i * T);
  }
  constexpr int P = HeadStream::kParts;
  parallel_for(P * n, [&](int64_t i) {  // each head's parts as separate tasks
    heads[size_t(i / P)].add_part(int(i % P), attention.ptr() + (i / P) * T * T, 0, int(T), int(T));
  });
  for (HeadStream& head : heads) head.token.set_value_norms(nullptr);
}

}  // namespace headscope::analysis
