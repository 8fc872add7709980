// headscope — what the packed passes of both families share (batch.h), and Model's batch
// defaults for a family without a packed pass: the texts one by one.
#include "models/batch.h"

#include <cstdio>
#include <exception>
#include <string>

#include "headscope/error.h"

namespace headscope {

std::vector<Capture> Model::run_batch(std::span<const Encoding> encodings,
                                      std::span<const CaptureOptions> options) const {
  models::check_batch_options(encodings.size(), options.size());
  std::vector<Capture> out;
  out.reserve(encodings.size());
  for (size_t i = 0; i < encodings.size(); ++i) out.push_back(run(encodings[i], models::options_of(options, i)));
  return out;
}

std::vector<Capture> Model::resume_batch(std::span<const Encoding> encodings, int first_layer,
                                         std::span<const Tensor* const> prefixes,
                                         std::span<const CaptureOptions> options) const {
  models::check_batch_options(encodings.size(), options.size());
  if (prefixes.size() != encodings.size())
    throw Error("resume_batch: " + std::to_string(prefixes.size()) + " prefixes for " +
                std::to_string(encodings.size()) + " texts");
  std::vector<Capture> out;
  out.reserve(encodings.size());
  for (size_t i = 0; i < encodings.size(); ++i)
    out.push_back(resume(encodings[i], first_layer, *prefixes[i], models::options_of(options, i)));
  return out;
}

namespace models {

void check_batch_options(size_t n_texts, size_t n_options) {
  if (n_options != 1 && n_options != n_texts)
    throw Error("a batch of " + std::to_string(n_texts) +
                " texts needs one set of capture options or one per text, not " + std::to_string(n_options));
}

const CaptureOptions& options_of(std::span<const CaptureOptions> options, size_t i) {
  return options.size() == 1 ? options[0] : options[i];
}

void for_each_text(std::span<const PackedText> texts, const std::function<void(const PackedText&)>& body) {
  bool side_by_side = texts.size() > 1;
  for (const PackedText& t : texts) side_by_side = side_by_side && !t.rec->streams();
  if (!side_by_side) {
    for (const PackedText& t : texts) body(t);
    return;
  }
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      body(texts[i]);
    } catch (...) {
#pragma omp critical(headscope_packed_text_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

std::vector<Capture> PackedBatch::finish() {
  std::vector<Capture> out;
  out.reserve(recorders.size());
  for (auto& r : recorders) out.push_back(r->finish());
  return out;
}

PackedBatch pack(const ModelConfig& config, std::span<const Encoding> encodings,
                 std::span<const CaptureOptions> options, const std::vector<int>& kv_head_of) {
  PackedBatch b;
  b.texts.reserve(encodings.size());
  b.recorders.reserve(encodings.size());
  for (size_t i = 0; i < encodings.size(); ++i) {
    const int64_t T = int64_t(encodings[i].size());
    b.recorders.push_back(std::make_unique<capture::Recorder>(config, T, T, options_of(options, i), kv_head_of));
    b.texts.push_back({b.rows, T, b.recorders.back().get()});
    b.rows += T;
  }
  return b;
}

namespace {
std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(uint64_t{1} << 30));
  return buf;
}
}  // namespace

void check_batch_memory(const Model& model, size_t texts, int64_t rows, uint64_t bytes) {
  const uint64_t budget = model.run_memory_budget();
  if (bytes <= budget) return;
  throw ResourceError("a batch of " + std::to_string(texts) + " texts (" + std::to_string(rows) +
                      " tokens) needs about " + gib(bytes) + " (captured tensors and working memory) but " +
                      gib(budget) + " is available; run it in smaller batches, or capture less");
}

}  // namespace models
}  // namespace headscope
