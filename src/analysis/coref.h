// headscope analysis — coreference in attention, on GAP (Webster et al. 2018, "Mind the GAP: A
// Balanced Corpus of Gendered Ambiguous Pronouns").
//
// Each GAP example is a Wikipedia snippet with a pronoun and two candidate names A and B, each
// marked as coreferent with the pronoun or not. We keep the examples where exactly one candidate
// is correct and ask, per head: does the pronoun attend more to the correct candidate than to the
// other one? Attention FROM the pronoun is the mean over its pieces; attention TO a candidate is
// taken word by word (a word's attention = the sum over its pieces, as in words.h) and the
// candidate gets its most-attended word, so a two-word name is not favoured over a one-word name
// by having more pieces to collect attention on. Ties count as wrong.
//
// Baselines that look at positions only: the candidate nearest to the pronoun (in characters,
// between the spans), and the candidate that appears first in the text.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/tensor.h"
#include "headscope/tokenizer.h"

namespace headscope::analysis {

struct Mention {
  std::string text;
  int64_t begin = 0, end = 0;  // byte offsets into the example text
};

struct GapExample {
  std::string id;
  std::string text;
  Mention pronoun, a, b;
  bool a_coref = false, b_coref = false;
  // Exactly one candidate is correct: the examples the evaluation uses.
  bool decidable() const { return a_coref != b_coref; }
};

// GAP TSV: a header line, then `ID Text Pronoun Pronoun-offset A A-offset A-coref B B-offset
// B-coref URL`. Offsets in the file count Unicode code points; they are converted to byte
// offsets here and checked against the mention text. Throws Error naming file and line.
std::vector<GapExample> read_gap_tsv(const std::string& path);
std::vector<GapExample> parse_gap_tsv(std::string_view content, const std::string& source_name);

enum class CorefBaseline : uint8_t { kNearest = 0, kFirst = 1 };
inline constexpr int kCorefBaselineCount = 2;
std::string_view coref_baseline_name(CorefBaseline b);  // "nearest candidate", "first candidate"
// Whether the baseline picks the correct candidate of a decidable example.
bool coref_baseline_correct(const GapExample& ex, CorefBaseline b);

// Attention of the pronoun to each candidate for one head. attention: [T, T] over `encoding`,
// which encodes ex.text. Returns false when the pronoun or a candidate has no token (e.g. cut off
// by truncation).
struct CandidateAttention {
  double a = 0, b = 0;
};
bool candidate_attention(const float* attention, const Encoding& encoding, const GapExample& ex,
                         CandidateAttention& out);

// Counts over a GAP file, all heads at once.
class CorefScorer {
 public:
  explicit CorefScorer(int n_heads);
  // attention: [n_layer, n_head, T, T] with n_layer * n_head == n_heads. Undecidable examples and
  // examples whose mentions have no token are skipped (counted in skipped()).
  void add(const GapExample& ex, const Encoding& encoding, const Tensor& attention);
  int n_heads() const { return static_cast<int>(correct_.size()); }
  int64_t support() const { return support_; }
  int64_t skipped() const { return skipped_; }
  int64_t correct(int head) const { return correct_.at(static_cast<size_t>(head)); }
  int64_t baseline_correct(CorefBaseline b) const { return baseline_.at(static_cast<size_t>(b)); }
  double accuracy(int head) const;
  double baseline_accuracy(CorefBaseline b) const;
  // Adds another scorer's counts (integer: any split merged gives one pass's); Error when the head
  // counts differ. JSON and back, as DependencyScorer's.
  void merge(const CorefScorer& other);
  nlohmann::json to_json() const;
  static CorefScorer from_json(const nlohmann::json& j);

 private:
  std::vector<int64_t> correct_;
  std::vector<int64_t> baseline_ = std::vector<int64_t>(kCorefBaselineCount, 0);
  int64_t support_ = 0, skipped_ = 0;
};

}  // namespace headscope::analysis
