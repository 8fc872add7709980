// Head roles: the catalogue and the scoring rules of roles.h (definitions in docs/metrics.md).
#include "analysis/roles.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

#include "analysis/format.h"
#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// The texts are deliberately short: the explorer shows them next to the head.
constexpr std::array<RoleInfo, kRoleCount> kCatalogue = {{
    {Role::kPreviousToken, "previous_token", "Previous token", "Each token looks at the token just before it.",
     "Copies information about the preceding token into the current position, so later layers can "
     "read bigrams; in decoders it is the first half of an induction circuit.",
     "Clark et al. 2019 (BERT); Voita et al. 2019 (positional heads); Olsson et al. 2022 (induction circuits)",
     0x1f77b4, RoleFamily::kPositional},
    {Role::kNextToken, "next_token", "Next token",
     "Each token looks at the token just after it (only possible in bidirectional models).",
     "Lets an encoder read right-hand context one step ahead, the mirror of a previous-token head.",
     "Clark et al. 2019; Voita et al. 2019", 0x17becf, RoleFamily::kPositional},
    {Role::kSelf, "self", "Self", "Each token looks mostly at itself: the attention matrix is a bright diagonal.",
     "Keeps the token's own representation, often acting as a near no-op for that head.",
     "Kovaleva et al. 2019 (diagonal pattern)", 0x9467bd, RoleFamily::kPositional},
    {Role::kFixedOffset, "fixed_offset", "Fixed offset",
     "Each token looks at the token a fixed number of positions away (two or more).",
     "Builds wider positional context (skip-grams); such heads are rarer than the +-1 ones.",
     "Clark et al. 2019; Kovaleva et al. 2019", 0xaec7e8, RoleFamily::kPositional},
    {Role::kSink, "sink", "Sink / special token",
     "Most attention goes to the first token or to special tokens such as [CLS], [SEP] or BOS.",
     "Usually a way of doing nothing: the softmax must put its mass somewhere, and a token whose value "
     "vector is small absorbs it without changing the output.",
     "Clark et al. 2019 (attention to [SEP]); Kobayashi et al. 2020; Xiao et al. 2023 (attention sinks)", 0x8c564b,
     RoleFamily::kSink},
    {Role::kBroad, "broad", "Broad", "Attention is spread almost evenly over the whole sequence.",
     "Averages the sentence into a bag-of-words summary; common in the first layers.",
     "Clark et al. 2019 (broad attention in lower layers); Kovaleva et al. 2019", 0xbcbd22, RoleFamily::kBroad},
    {Role::kLocalWindow, "local_window", "Local window",
     "Attention covers the few neighbours on either side, without one neighbour dominating.",
     "Gathers local n-gram context, the pattern that sliding-window attention makes explicit.",
     "Kovaleva et al. 2019 (block pattern); Beltagy et al. 2020 (Longformer)", 0x98df8a, RoleFamily::kPositional},
    {Role::kDuplicateToken, "duplicate_token", "Duplicate token",
     "A token looks at other occurrences of the same token.",
     "Signals that a token was seen before; in GPT-2 such heads feed the name-mover circuit.",
     "Wang et al. 2022 (indirect object identification)", 0xff7f0e, RoleFamily::kInductionCopy},
    {Role::kInduction, "induction", "Induction",
     "A token looks at whatever followed its previous occurrence ([A][B] ... [A] -> [B]).",
     "Completes repeated patterns by copying; thought to drive much of in-context learning.",
     "Elhage et al. 2021; Olsson et al. 2022", 0xd62728, RoleFamily::kInductionCopy},
    {Role::kSyntactic, "syntactic", "Syntactic",
     "A word looks at its syntactic head (or a head at its dependent) for a dependency relation.",
     "Tracks grammatical relations such as subject, object or determiner without any supervision.",
     "Clark et al. 2019; Htut et al. 2019; Voita et al. 2019", 0x2ca02c, RoleFamily::kSyntactic},
    {Role::kCoreference, "coreference", "Coreference",
     "A pronoun looks at the name it refers to rather than at a competing one.",
     "Links mentions of the same entity across a passage.",
     "Clark et al. 2019 (section 4.3); Webster et al. 2018 (GAP)", 0xe377c2, RoleFamily::kCoreference},
    {Role::kMixed, "mixed", "Mixed", "No single pattern explains at least a quarter of this head's attention.",
     "Either a mixture of patterns or a function that depends on content this catalogue does not test.", "", 0xe8e8e8,
     RoleFamily::kOther},
    {Role::kDormant, "dormant", "Dormant",
     "Nearly all of its attention rests on the first token, whose value is small, so the head writes "
     "almost nothing on this text.",
     "A decoder head switched off for this input: it can wake up on other inputs, where it does the "
     "job its other evidence describes.",
     "Xiao et al. 2023 (attention sinks); Guo et al. 2024 (active-dormant attention heads)", 0x5a4a3f,
     RoleFamily::kSink},
}};

constexpr std::array<RoleFamilyInfo, kRoleFamilyCount> kFamilies = {{
    {RoleFamily::kPositional, "positional", "Positional",
     "Looks a set number of places away whatever the words are: the token before, the one after, "
     "itself, or a few steps off. Such heads give later layers word order to work with."},
    {RoleFamily::kSyntactic, "syntactic", "Syntactic",
     "Links words that grammar ties together, such as a determiner and its noun or a verb and its "
     "object, although the model was never shown a parse."},
    {RoleFamily::kCoreference, "coreference", "Coreference",
     "Sends a pronoun to the earlier mention it stands for, so that 'it' can pick up what 'the "
     "trophy' means."},
    {RoleFamily::kInductionCopy, "induction_copy", "Induction / copy",
     "Finds an earlier occurrence of the current token, or the token that came after it, so that a "
     "repeated pattern can be continued by copying."},
    {RoleFamily::kBroad, "broad", "Broad / bag of words",
     "Spreads its attention over the whole text and so averages it, giving a summary of which words "
     "are present rather than where they are."},
    {RoleFamily::kSink, "sink", "Sink / no-op",
     "Parks its attention on one fixed token; when that token carries almost nothing, the head adds "
     "almost nothing: the usual way for a head to stay out of the way."},
    {RoleFamily::kOther, "other", "Other", "No single pattern that we test explains this head."},
}};

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", 100.0 * x);
  return buf;
}

bool usable(double x) { return std::isfinite(x); }

double clip01(double x) { return std::clamp(x, 0.0, 1.0); }

double skill(double accuracy, double baseline) {
  return baseline < 1.0 ? clip01((accuracy - baseline) / (1.0 - baseline)) : 0.0;
}

}  // namespace

double SinkEvidence::written() const {
  if (!usable(sink_mass_norm) || !usable(sink_mass)) return std::numeric_limits<double>::quiet_NaN();
  const double rest_norm = 1.0 - sink_mass_norm, rest = 1.0 - sink_mass;
  if (rest_norm <= 0)
    return rest > 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  return rest / rest_norm;
}

std::span<const RoleInfo> role_catalogue() { return kCatalogue; }

std::span<const RoleFamilyInfo> role_families() { return kFamilies; }

const RoleFamilyInfo& role_family_info(RoleFamily family) {
  const auto i = static_cast<size_t>(family);
  if (i >= kFamilies.size()) throw Error("role family id " + std::to_string(i) + " is out of range");
  return kFamilies[i];
}

std::string role_description(Role role, bool causal) {
  if (role == Role::kSink)
    return causal ? "Most attention goes to the first token of the text (the BOS token where the tokenizer adds one)."
                  : "Most attention goes to the special tokens [CLS] and [SEP] (or the first token).";
  return std::string(role_info(role).description);
}

const RoleInfo& role_info(Role role) {
  const auto i = static_cast<size_t>(role);
  if (i >= kCatalogue.size()) throw Error("role id " + std::to_string(i) + " is out of range");
  return kCatalogue[i];
}

std::string role_label(const RoleScore& score) {
  std::string label(role_info(score.role).name);
  if (!score.detail.empty()) label += " " + score.detail;
  return label;
}

Role role_from_id(std::string_view id) {
  for (const RoleInfo& r : kCatalogue) {
    if (r.id == id) return r.role;
  }
  throw Error("unknown head role '" + std::string(id) + "'; see role_catalogue() for the list");
}

namespace {

// The primary and secondary roles from the best two scores: mixed when the best falls short.
void choose(HeadRoles& out, const RoleScore& first, const RoleScore& second) {
  if (first.score >= kMinRoleScore) {
    out.primary = first;
    out.secondary = second;
  } else {
    out.primary = RoleScore{Role::kMixed, first.score, "",
                            "no pattern reaches " + pct(kMinRoleScore) + "; the strongest is " +
                                std::string(role_info(first.role).name) + ": " + first.evidence};
    out.secondary = first;
  }
  out.confidence = first.score;
  out.margin = first.score - second.score;
}

// A causal head: `scores` were read from the rows without the sink. The sink's share joins them as
// evidence (never the primary role); a head resting nearly all its weight there while writing
// almost nothing is dormant, its best other role kept as secondary.
HeadRoles read_without_sink(const SinkEvidence& sink, std::vector<RoleScore> scores) {
  const double written = sink.written();
  const std::string share = pct(sink.sink_mass);
  for (RoleScore& r : scores)
    if (r.role != Role::kSyntactic && r.role != Role::kCoreference && r.role != Role::kInduction &&
        r.role != Role::kDuplicateToken)
      r.evidence += " (of the attention left once the first token's " + share + " is set aside)";
  const RoleScore none{Role::kMixed, 0.0, "", "no role could be scored"};
  const RoleScore first = scores.empty() ? none : scores[0];
  const RoleScore second = scores.size() > 1 ? scores[1] : none;
  std::string rest = share + " of its attention rests on the first token";
  if (usable(written)) rest += format(", and it writes %.2f times what its other keys' values carry", written);
  RoleScore parked{Role::kSink, clip01(sink.sink_mass), "", rest};
  HeadRoles out;
  if (sink.sink_mass >= kDormantSinkMass && usable(written) && written <= kDormantWritten) {
    out.primary = RoleScore{Role::kDormant, clip01(sink.sink_mass), "",
                            rest + ": it reads the sink, whose value is small, and adds almost nothing"};
    out.secondary = first;
    out.confidence = out.primary.score;
    out.margin = out.primary.score - first.score;
  } else {
    choose(out, first, second);
  }
  scores.push_back(parked);
  std::stable_sort(scores.begin(), scores.end(),
                   [](const RoleScore& a, const RoleScore& b) { return a.score > b.score; });
  out.scores = std::move(scores);
  return out;
}

}  // namespace

HeadRoles assign_roles(const HeadEvidence& head) {
  const HeadStats& s = head.stats;
  std::vector<RoleScore> scores;
  auto add = [&](Role role, double score, std::string detail, std::string evidence) {
    if (!usable(score)) return;
    scores.push_back(RoleScore{role, clip01(score), std::move(detail), std::move(evidence)});
  };

  if (s.n_queries > 0) {
    add(Role::kPreviousToken, s.prev_mass, "", pct(s.prev_mass) + " of its attention goes to the previous token");
    add(Role::kNextToken, s.next_mass, "", pct(s.next_mass) + " of its attention goes to the next token");
    add(Role::kSelf, s.self_mass, "", pct(s.self_mass) + " of its attention goes to the token itself");

    int best_d = 0;
    double best_off = -1;
    for (int d = -kMaxOffset; d <= kMaxOffset; ++d) {
      if (std::abs(d) < 2 || !usable(s.offset(d))) continue;
      if (s.offset(d) > best_off) {
        best_off = s.offset(d);
        best_d = d;
      }
    }
    if (best_d != 0) {
      add(Role::kFixedOffset, best_off, format("%+d", best_d),
          pct(best_off) + format(" of its attention goes to the token %d positions %s", std::abs(best_d),
                                 best_d < 0 ? "before it" : "after it"));
    }

    if (!head.sink) {
      add(Role::kSink, s.sink_mass, "",
          pct(s.sink_mass) + " of its attention goes to the first token or to special tokens (first token " +
              pct(s.first_mass) + ", later special tokens " + pct(s.end_special_mass) + ")");
    }

    add(Role::kBroad, s.uniform_overlap, "",
        format("its attention is spread out: %s of it coincides with a uniform spread (normalised entropy %.2f, "
               "%.1f keys hold 90 %% of the mass)",
               pct(s.uniform_overlap).c_str(), s.entropy_norm, s.keys_90));

    double top_neighbour = 0;
    for (int d = 1; d <= kLocalWindow; ++d) {
      for (int sign : {-1, 1}) {
        if (usable(s.offset(sign * d))) top_neighbour = std::max(top_neighbour, s.offset(sign * d));
      }
    }
    add(Role::kLocalWindow, s.local_mass - top_neighbour, "",
        format("%s of its attention falls within %d tokens on either side, the largest single neighbour taking %s",
               pct(s.local_mass).c_str(), kLocalWindow, pct(top_neighbour).c_str()));
  }

  if (head.probe) {
    add(Role::kDuplicateToken, head.probe->duplicate, "",
        "on a random sequence repeated twice, " + pct(head.probe->duplicate) +
            " of a repeated token's attention goes back to its first occurrence");
    add(Role::kInduction, head.probe->induction, "",
        "on a random sequence repeated twice, " + pct(head.probe->induction) +
            " of a repeated token's attention goes to the token that followed its first occurrence");
  } else if (s.n_duplicate_queries > 0) {
    add(Role::kDuplicateToken, s.duplicate_mass, "",
        "when its token occurs elsewhere in the text, " + pct(s.duplicate_mass) +
            " of its attention goes to those other occurrences");
  }

  if (head.syntax && !head.syntax->relation.empty()) {
    const SyntaxEvidence& x = *head.syntax;
    const std::string dir = x.head_to_dependent ? "head → dependent" : "dependent → head";
    add(Role::kSyntactic, skill(x.accuracy, x.baseline_accuracy), x.relation + " (" + dir + ")",
        format("%s: %s of %lld %s dependents are linked to their gold head by its strongest attention, "
               "against %s for the best fixed offset (%+d)",
               dir.c_str(), pct(x.accuracy).c_str(), static_cast<long long>(x.support), x.relation.c_str(),
               pct(x.baseline_accuracy).c_str(), x.baseline_offset) +
            (x.sentences > 0 ? format(" (%lld held-out sentences)", static_cast<long long>(x.sentences)) : ""));
  }

  if (head.coref && head.coref->support > 0) {
    const CorefEvidence& c = *head.coref;
    add(Role::kCoreference, skill(c.accuracy, c.baseline_accuracy), "",
        format(
            "the pronoun attends more to the correct name in %s of %lld GAP examples, against %s for the %s baseline",
            pct(c.accuracy).c_str(), static_cast<long long>(c.support), pct(c.baseline_accuracy).c_str(),
            c.baseline_name.c_str()));
  }

  // Best first; on equal scores the catalogue order (simpler pattern first) decides.
  std::stable_sort(scores.begin(), scores.end(),
                   [](const RoleScore& a, const RoleScore& b) { return a.score > b.score; });

  // Corpus evidence before this text's sink: a head that is a specialist on gold data (a
  // syntactic or coreference score of at least kMinRoleScore) takes that role first when only the
  // sink and broad roles outrank it; the sink is kept as secondary evidence ("also parks ...").
  const auto is_corpus = [](const RoleScore& r) {
    return (r.role == Role::kSyntactic || r.role == Role::kCoreference) && r.score >= kMinRoleScore;
  };
  const auto corpus = std::find_if(scores.begin(), scores.end(), is_corpus);
  if (corpus != scores.end() && corpus != scores.begin() && std::all_of(scores.begin(), corpus, [](const RoleScore& r) {
        return r.role == Role::kSink || r.role == Role::kBroad;
      })) {
    std::rotate(scores.begin(), corpus, corpus + 1);
    for (RoleScore& r : scores)
      if (r.role == Role::kSink)
        r.evidence = "it also parks " + pct(r.score) + " of its attention on the first token or special tokens";
  }

  HeadRoles out;
  if (head.sink) return read_without_sink(*head.sink, std::move(scores));
  out.scores = scores;
  const RoleScore none{Role::kMixed, 0.0, "", "no role could be scored"};
  const RoleScore first = scores.empty() ? none : scores[0];
  const RoleScore second = scores.size() > 1 ? scores[1] : none;
  choose(out, first, second);
  return out;
}

std::vector<HeadRoles> assign_roles(std::span<const HeadEvidence> heads) {
  std::vector<HeadRoles> out;
  out.reserve(heads.size());
  for (const HeadEvidence& h : heads) out.push_back(assign_roles(h));
  return out;
}

}  // namespace headscope::analysis
