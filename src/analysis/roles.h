// headscope analysis — head roles: what a head does, how sure we are, and why.
//
// Every head is scored against every role of the catalogue at once. A role score is a number in
// [0, 1] on one common scale, so that roles can be ranked against each other:
//   - for positional and token-kind roles it is a share of attention mass (e.g. the previous-token
//     score is the mean attention on the previous token);
//   - for roles measured against gold labels (syntactic, coreference) it is the skill over the best
//     simple baseline, (accuracy - baseline) / (1 - baseline), clipped at 0.
// The highest score is the primary role, the next the secondary; `confidence` is the primary
// score and `margin` its lead over the secondary. A head whose best score stays below
// kMinRoleScore gets the primary role kMixed. Exact definitions: docs/metrics.md, "Roles".
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/statistics.h"

namespace headscope::analysis {

enum class Role : uint8_t {
  kPreviousToken = 0,
  kNextToken,
  kSelf,
  kFixedOffset,    // a fixed offset other than -1, 0, +1 (detail: "+2", "-3", ...)
  kSink,           // first token / special tokens ([CLS], [SEP], BOS)
  kBroad,          // near-uniform over the attendable keys
  kLocalWindow,    // spread over the neighbours within kLocalWindow, no single offset dominating
  kDuplicateToken, // earlier/other occurrences of the same token
  kInduction,      // the token after the previous occurrence of the current token
  kSyntactic,      // the gold dependency head / dependent (detail: relation and direction)
  kCoreference,    // the antecedent of a pronoun (GAP)
  kMixed,          // no role scores at least kMinRoleScore
};
inline constexpr int kRoleCount = 12;
inline constexpr double kMinRoleScore = 0.25;

struct RoleInfo {
  Role role;
  std::string_view id;                // stable identifier for JSON and URLs: "previous_token"
  std::string_view name;              // "Previous token"
  std::string_view description;       // what the attention pattern looks like
  std::string_view typical_function;  // what such heads are thought to do in trained models
  std::string_view literature;        // where the pattern was described
  uint32_t color;                     // 0xRRGGBB, used by the atlas grid and the explorer
};

// All roles, indexed by static_cast<int>(Role).
std::span<const RoleInfo> role_catalogue();
const RoleInfo& role_info(Role role);
// Inverse of RoleInfo::id; throws Error naming the unknown id.
Role role_from_id(std::string_view id);

// Evidence measured outside the corpus statistics; every part is optional.
struct ProbeEvidence {      // from a run over random tokens repeated twice (see probe.h)
  double induction = 0;     // mean attention from a second-copy token to the token after its first copy
  double duplicate = 0;     // mean attention from a second-copy token to its own first copy
  int probe_length = 0;     // tokens in one copy
};
struct SyntaxEvidence {     // the head's best dependency relation (see syntax.h)
  std::string relation;     // "nsubj"
  bool head_to_dependent = false;  // false: dependent attends to its head
  double accuracy = 0;      // on the report set (PUD)
  double baseline_accuracy = 0;  // best fixed offset for this relation, same set
  int baseline_offset = 0;
  int64_t support = 0;      // dependents of this relation in the report set
};
struct CorefEvidence {      // GAP pronoun → correct candidate (see coref.h)
  double accuracy = 0;
  double baseline_accuracy = 0;
  std::string baseline_name;  // "nearest candidate"
  int64_t support = 0;
};

struct HeadEvidence {
  HeadStats stats;          // token level, over the corpus
  std::optional<ProbeEvidence> probe;
  std::optional<SyntaxEvidence> syntax;
  std::optional<CorefEvidence> coref;
};

struct RoleScore {
  Role role = Role::kMixed;
  double score = 0;         // [0, 1], see the top of this file
  std::string detail;       // "+2" for kFixedOffset, "nsubj (dependent → head)" for kSyntactic
  std::string evidence;     // one sentence in words: "62 % of its attention goes to the previous token"
};

struct HeadRoles {
  std::vector<RoleScore> scores;  // every role that could be scored, best first
  RoleScore primary;
  RoleScore secondary;
  double confidence = 0;    // primary.score (for kMixed: the best score that fell short)
  double margin = 0;        // primary.score - secondary.score
};

// Scores one head. Roles whose evidence is absent (no probe, no gold data) are not scored.
HeadRoles assign_roles(const HeadEvidence& head);
// Every head at once, in the order given (layer * n_head + head by convention).
std::vector<HeadRoles> assign_roles(std::span<const HeadEvidence> heads);

}  // namespace headscope::analysis
