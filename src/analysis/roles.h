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
#include "headscope/analysis.h"

namespace headscope::analysis {

// Role, RoleInfo, the catalogue, the evidence types and HeadRoles are public: headscope/analysis.h.

// Scores one head. Roles whose evidence is absent (no probe, no gold data) are not scored.
HeadRoles assign_roles(const HeadEvidence& head);
// Every head at once, in the order given (layer * n_head + head by convention).
std::vector<HeadRoles> assign_roles(std::span<const HeadEvidence> heads);

}  // namespace headscope::analysis
