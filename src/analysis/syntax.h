// headscope analysis — dependency syntax in attention, following Clark, Khandelwal, Levy and
// Manning (2019), "What Does BERT Look At? An Analysis of BERT's Attention", section 4.2.
//
// Method. The words of a gold sentence are joined by single spaces and encoded; tokens are mapped
// back to words by byte offsets (words.h) and the attention is merged to word level. A head
// "predicts" for word i the word it attends to most, ignoring i itself and the special tokens:
//   dependent → head:  pred(i) = argmax_{j != i} A[i, j]   (the dependent looks at its head)
//   head → dependent:  pred(i) = argmax_{j != i} A[j, i]   (the head looks at its dependent)
// A prediction is correct when pred(i) is the gold head of i. Accuracy is counted per relation
// (the universal part of DEPREL, before any ':' subtype) and over all relations ("all"); words
// attached to the root are left out (they have no head word). The baseline predicts the word at a
// fixed offset i + d for d in [-kMaxBaselineOffset, kMaxBaselineOffset] \ {0}; per relation the
// best offset is chosen on the selection set, like the best head. Heads, directions and offsets
// are selected on one treebank (UD EWT dev) and reported on another (UD PUD).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/words.h"

namespace headscope::analysis {

inline constexpr int kMaxBaselineOffset = 5;
inline constexpr int kBaselineSlots = 2 * kMaxBaselineOffset + 1;
inline constexpr std::string_view kAllRelations = "all";

// ---- CoNLL-U ----------------------------------------------------------------------------------
// One word per line, ten tab-separated fields ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC;
// sentences end at a blank line; '#' lines are comments ("# sent_id = ..." is kept). Multiword
// token ranges ("3-4") and empty nodes ("5.1") are skipped: the syntactic words carry the tree.
// Spec: https://universaldependencies.org/format.html
struct DependencyWord {
  std::string form;
  int32_t head = 0;      // 1-based index of the head word in the sentence; 0 = root
  std::string relation;  // universal relation, subtype removed: "nmod:poss" → "nmod"
};
struct DependencySentence {
  std::string id;  // "# sent_id" or "<file>:<line>"
  std::vector<DependencyWord> words;
};

// Throws Error naming the file and line on malformed input (wrong field count, bad ID or HEAD).
std::vector<DependencySentence> read_conllu(const std::string& path);
std::vector<DependencySentence> parse_conllu(std::string_view content, const std::string& source_name);

// The words joined by single spaces; `spans` (if given) receives each word's [begin, end) bytes.
std::string join_words(const DependencySentence& sentence, std::vector<std::pair<int64_t, int64_t>>* spans = nullptr);

enum class Direction : uint8_t { kDependentToHead = 0, kHeadToDependent = 1 };
std::string_view direction_name(Direction d);  // "dependent → head" / "head → dependent"

// Word-level predictions of one head. unit_attention: [U, U] from merge_attention(). Returns [W]
// (W = map.unit_of_word.size()): the 0-based word predicted for each word, -1 when the word has
// no unit or no other word to point at.
std::vector<int32_t> predict_words(const float* unit_attention, const WordMap& map, Direction dir);

// Correct-prediction counts for one relation.
struct RelationCounts {
  int64_t support = 0;                                   // dependents of this relation
  std::vector<int64_t> correct;                          // [n_heads * 2]: index head * 2 + direction
  std::array<int64_t, kBaselineSlots> offset_correct{};  // slot d + kMaxBaselineOffset
};

// Accumulates counts over a treebank for all heads at once.
class DependencyScorer {
 public:
  explicit DependencyScorer(int n_heads);  // n_heads = n_layer * n_head; 0 = baselines only
  // unit_attention: [n_heads, U, U] (merge_attention of the capture); may be null when n_heads == 0.
  void add(const DependencySentence& sentence, const float* unit_attention, const WordMap& map);
  // Baseline counts only (no model needed).
  void add_baseline(const DependencySentence& sentence);
  int n_heads() const { return n_heads_; }
  const std::map<std::string, RelationCounts>& relations() const { return relations_; }
  // Adds another scorer's counts (a shard of the same treebank, the same heads): integer counts, so
  // any split merged gives one pass's counts. Error when the head counts differ.
  void merge(const DependencyScorer& other);
  // The counts as JSON and back (a shard's part of an atlas, pipeline/atlas.h); Error when malformed.
  nlohmann::json to_json() const;
  static DependencyScorer from_json(const nlohmann::json& j);

 private:
  RelationCounts& counts(const std::string& relation);
  void count_baseline(const DependencySentence& sentence);
  int n_heads_;
  std::map<std::string, RelationCounts> relations_;
};

// Per relation: the best head/direction and offset chosen on `select`, scored on `report`.
struct RelationResult {
  std::string relation;
  int64_t support_select = 0, support_report = 0;
  int head = -1;  // layer * n_head + head
  Direction direction = Direction::kDependentToHead;
  double head_select_accuracy = 0, head_report_accuracy = 0;
  int baseline_offset = 0;
  double baseline_select_accuracy = 0, baseline_report_accuracy = 0;
};
// Relations present in both sets with at least `min_support` dependents in each, most frequent
// first in `report` ("all" first). `select` and `report` must count the same number of heads.
std::vector<RelationResult> select_and_report(const DependencyScorer& select, const DependencyScorer& report,
                                              int64_t min_support);

// For one head: among the relations with >= min_support dependents in both sets, the relation and
// direction with the largest skill over the baseline, (acc - base) / (1 - base), all choices made
// on `select`, accuracies from `report`. relation empty when none qualifies.
struct HeadSyntax {
  std::string relation;
  Direction direction = Direction::kDependentToHead;
  double accuracy = 0, baseline_accuracy = 0;
  int baseline_offset = 0;
  int64_t support = 0;
};
HeadSyntax best_relation_of_head(const DependencyScorer& select, const DependencyScorer& report, int head,
                                 int64_t min_support);

}  // namespace headscope::analysis
