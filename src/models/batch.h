// headscope — a packed pass (Model::run_batch, resume_batch): several texts in the rows of one
// pass. What both model families share: the texts' places in the rows, the options of each text,
// and the memory check of the whole batch.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "capture/capture.h"
#include "headscope/model.h"

namespace headscope::models {

// One text of a packed pass: rows row0 .. row0 + T − 1 of the pass, recorded by `rec` (a
// Recorder of T rows over T keys, as run() makes for that text alone).
struct PackedText {
  int64_t row0 = 0, T = 0;
  capture::Recorder* rec = nullptr;
};

// body(t) for every text of a pass: side by side on the threads (each text's attention then runs
// on one thread, the kernels inside single-threaded: the same numbers) when there are several texts
// and none streams its attention (a sink may not expect calls from several threads), else in
// order. The first exception is rethrown after the loop.
void for_each_text(std::span<const PackedText> texts, const std::function<void(const PackedText&)>& body);

// options[i] of text i: `options` holds one entry per text, or one for all (check_batch_options).
const CaptureOptions& options_of(std::span<const CaptureOptions> options, size_t i);
// Throws Error unless options has 1 or n_texts entries.
void check_batch_options(size_t n_texts, size_t n_options);

// The texts of a batch laid out one after another, with one Recorder each.
struct PackedBatch {
  std::vector<PackedText> texts;
  std::vector<std::unique_ptr<capture::Recorder>> recorders;
  int64_t rows = 0;  // Σ T
  std::vector<Capture> finish();
};
// The layout and recorders of `encodings` (every text T > 0 tokens, checked by the caller).
PackedBatch pack(const ModelConfig& config, std::span<const Encoding> encodings,
                 std::span<const CaptureOptions> options, const std::vector<int>& kv_head_of);

// Throws ResourceError when a batch of `texts` texts, `rows` rows in all, needing `bytes`, is over
// the model's run memory budget: the estimate, what is available and the advice to split it.
void check_batch_memory(const Model& model, size_t texts, int64_t rows, uint64_t bytes);

}  // namespace headscope::models
