// Role assignment: one hand-built head per role, each must come out as that role with the
// score and the evidence sentence worked out by hand.
#include "analysis/roles.h"

#include <gtest/gtest.h>

#include <functional>

#include "headscope/error.h"

namespace headscope::analysis {
namespace {

constexpr int T = 10;
using K = TokenKind;

// [CLS] w1 .. w8 [SEP] with distinct ids.
SequenceInfo ten_tokens() {
  SequenceInfo s;
  s.kinds.assign(T, K::kContent);
  s.kinds.front() = K::kSpecial;
  s.kinds.back() = K::kSpecial;
  for (int i = 0; i < T; ++i) s.ids.push_back(100 + i);
  return s;
}

// Fills a [T, T] matrix with row q = f(q) (a function giving the row as a vector).
HeadStats stats_of(const std::function<std::vector<float>(int)>& row) {
  std::vector<float> a;
  for (int q = 0; q < T; ++q) {
    auto r = row(q);
    a.insert(a.end(), r.begin(), r.end());
  }
  return compute_head_stats(a.data(), T, ten_tokens());
}

std::vector<float> one_hot(int k) {
  std::vector<float> r(T, 0.0f);
  r[static_cast<size_t>(k)] = 1.0f;
  return r;
}

HeadRoles roles_of(const HeadStats& s) { return assign_roles(HeadEvidence{s, {}, {}, {}}); }

TEST(AnalysisRoles, CatalogueIsCompleteAndIndexedByRole) {
  const auto cat = role_catalogue();
  ASSERT_EQ(cat.size(), static_cast<size_t>(kRoleCount));
  for (int i = 0; i < kRoleCount; ++i) {
    EXPECT_EQ(static_cast<int>(cat[static_cast<size_t>(i)].role), i);
    EXPECT_FALSE(cat[static_cast<size_t>(i)].description.empty());
    EXPECT_FALSE(cat[static_cast<size_t>(i)].typical_function.empty());
    EXPECT_EQ(role_from_id(cat[static_cast<size_t>(i)].id), cat[static_cast<size_t>(i)].role);
  }
  EXPECT_THROW(role_from_id("no_such_role"), Error);
}

TEST(AnalysisRoles, LabelIsTheNameThenTheDetail) {
  EXPECT_EQ(role_label(RoleScore{Role::kPreviousToken, 0.9, "", ""}), "Previous token");
  EXPECT_EQ(role_label(RoleScore{Role::kFixedOffset, 0.5, "+2", ""}), "Fixed offset +2");
  EXPECT_EQ(role_label(RoleScore{Role::kSyntactic, 0.5, "nsubj (dependent → head)", ""}),
            "Syntactic nsubj (dependent → head)");
}

TEST(AnalysisRoles, PreviousTokenHead) {
  // Every token on its predecessor; [CLS] on itself. prev = 9/9 = 1; sink = [CLS] row 1/10 + w1 row 1/10.
  const HeadRoles r = roles_of(stats_of([](int q) { return one_hot(q > 0 ? q - 1 : 0); }));
  EXPECT_EQ(r.primary.role, Role::kPreviousToken);
  EXPECT_NEAR(r.confidence, 1.0, 1e-9);
  EXPECT_EQ(r.primary.evidence, "100 % of its attention goes to the previous token");
  EXPECT_EQ(r.secondary.role, Role::kSink);
  EXPECT_NEAR(r.secondary.score, 0.2, 1e-9);
  EXPECT_NEAR(r.margin, 0.8, 1e-9);
}

TEST(AnalysisRoles, NextTokenHead) {
  const HeadRoles r = roles_of(stats_of([](int q) { return one_hot(q < T - 1 ? q + 1 : q); }));
  EXPECT_EQ(r.primary.role, Role::kNextToken);
  EXPECT_NEAR(r.primary.score, 1.0, 1e-9);
}

TEST(AnalysisRoles, SelfHead) {
  const HeadRoles r = roles_of(stats_of([](int q) { return one_hot(q); }));
  EXPECT_EQ(r.primary.role, Role::kSelf);
  EXPECT_NEAR(r.primary.score, 1.0, 1e-9);
}

TEST(AnalysisRoles, FixedOffsetHead) {
  // Two positions back where possible (queries 2..9: 8 queries with key q-2, all 1).
  const HeadRoles r = roles_of(stats_of([](int q) { return one_hot(q >= 2 ? q - 2 : q); }));
  EXPECT_EQ(r.primary.role, Role::kFixedOffset);
  EXPECT_EQ(r.primary.detail, "-2");
  EXPECT_NEAR(r.primary.score, 1.0, 1e-9);
  EXPECT_EQ(r.primary.evidence, "100 % of its attention goes to the token 2 positions before it");
}

TEST(AnalysisRoles, SinkHead) {
  // .7 on [SEP], .3 on itself: sink .7 (for [SEP] itself 1.0 since self is [SEP]).
  const HeadRoles r = roles_of(stats_of([](int q) {
    std::vector<float> row(T, 0.0f);
    row[T - 1] += 0.7f;
    row[static_cast<size_t>(q)] += 0.3f;
    return row;
  }));
  EXPECT_EQ(r.primary.role, Role::kSink);
  EXPECT_NEAR(r.primary.score, (9 * 0.7 + 1.0 + 0.3) / 10, 1e-6);  // [CLS] row: .7 + its own .3
  EXPECT_EQ(r.secondary.role, Role::kSelf);
  EXPECT_NEAR(r.secondary.score, (9 * 0.3 + 1.0) / 10, 1e-6);
}

TEST(AnalysisRoles, BroadHead) {
  const HeadRoles r = roles_of(stats_of([](int) { return std::vector<float>(T, 0.1f); }));
  EXPECT_EQ(r.primary.role, Role::kBroad);
  EXPECT_NEAR(r.primary.score, 1.0, 1e-6);
  EXPECT_NE(r.primary.evidence.find("normalised entropy 1.00"), std::string::npos) << r.primary.evidence;
}

TEST(AnalysisRoles, LocalWindowHead) {
  // Uniform over the neighbours at -2, -1, +1, +2 that exist: 1/2 each at the two ends, 1/3 next to
  // them, 1/4 inside. All of it is local (1.0); the largest neighbour share is offset -1 (or +1):
  // over queries 1..9, 1/3 + 6·1/4 + 1/3 + 1/2 = 8/3, divided by 9.
  const HeadRoles r = roles_of(stats_of([](int q) {
    std::vector<int> keys;
    for (int d : {-2, -1, 1, 2}) {
      if (q + d >= 0 && q + d < T) keys.push_back(q + d);
    }
    std::vector<float> row(T, 0.0f);
    for (int k : keys) row[static_cast<size_t>(k)] = 1.0f / static_cast<float>(keys.size());
    return row;
  }));
  EXPECT_EQ(r.primary.role, Role::kLocalWindow);
  EXPECT_NEAR(r.primary.score, 1.0 - (8.0 / 3) / 9, 1e-6);
  EXPECT_EQ(r.primary.evidence,
            "100 % of its attention falls within 3 tokens on either side, the largest single neighbour taking 30 %");
}

// A head with no strong pattern, written directly as statistics: every offset .05, little on
// self, sink and neighbours, far from uniform.
HeadStats weak_stats() {
  HeadStats s;
  s.n_queries = 100;
  s.offset_mass.fill(0.05);
  s.self_mass = s.prev_mass = s.next_mass = 0.05;
  s.local_mass = 0.25;  // window minus the largest neighbour: .25 - .05 = .2
  s.sink_mass = 0.1;
  s.uniform_overlap = 0.2;
  s.entropy_norm = 0.5;
  s.keys_90 = 4;
  return s;
}

TEST(AnalysisRoles, ProbeRolesUseTheProbeEvidence) {
  HeadEvidence e{weak_stats(), ProbeEvidence{0.9, 0.05, 50}, {}, {}};
  HeadRoles r = assign_roles(e);
  EXPECT_EQ(r.primary.role, Role::kInduction);
  EXPECT_NEAR(r.primary.score, 0.9, 1e-12);
  EXPECT_EQ(r.primary.evidence,
            "on a random sequence repeated twice, 90 % of a repeated token's attention goes to the token that "
            "followed its first occurrence");
  e.probe = ProbeEvidence{0.05, 0.95, 50};
  r = assign_roles(e);
  EXPECT_EQ(r.primary.role, Role::kDuplicateToken);
}

TEST(AnalysisRoles, SyntacticSkillIsMeasuredOverTheBaseline) {
  SyntaxEvidence syn{"nsubj", false, 0.8, 0.4, 1, 1000};
  const HeadRoles r = assign_roles(HeadEvidence{weak_stats(), {}, syn, {}});
  EXPECT_EQ(r.primary.role, Role::kSyntactic);
  EXPECT_NEAR(r.primary.score, 2.0 / 3, 1e-12);  // (.8 - .4) / (1 - .4)
  EXPECT_EQ(r.primary.detail, "nsubj (dependent → head)");
  EXPECT_EQ(r.primary.evidence,
            "dependent → head: 80 % of 1000 nsubj dependents are linked to their gold head by its strongest "
            "attention, against 40 % for the best fixed offset (+1)");
  // Worse than the baseline: skill 0, never the primary role.
  const HeadRoles worse =
      assign_roles(HeadEvidence{weak_stats(), {}, SyntaxEvidence{"det", true, 0.3, 0.5, -1, 10}, {}});
  EXPECT_EQ(worse.primary.role, Role::kMixed);
}

TEST(AnalysisRoles, CoreferenceAndMixed) {
  const HeadRoles weak = assign_roles(HeadEvidence{weak_stats(), {}, {}, {}});
  EXPECT_EQ(weak.primary.role, Role::kMixed);
  EXPECT_NEAR(weak.confidence, 0.2, 1e-12);  // the best: broad .2 (local window .25 - .05 = .2 ties, broad first)
  EXPECT_EQ(weak.secondary.role, Role::kBroad);
  CorefEvidence c{0.9, 0.5, "nearest candidate", 392};
  const HeadRoles r = assign_roles(HeadEvidence{weak_stats(), {}, {}, c});
  EXPECT_EQ(r.primary.role, Role::kCoreference);
  EXPECT_NEAR(r.primary.score, 0.8, 1e-12);  // (.9 - .5) / .5
  EXPECT_EQ(r.primary.evidence,
            "the pronoun attends more to the correct name in 90 % of 392 GAP examples, against 50 % for the "
            "nearest candidate baseline");
}

}  // namespace
}  // namespace headscope::analysis

namespace headscope::analysis {
namespace {

// A head that puts 70 % on the sink on this text but is a coreference specialist on the corpus:
// the corpus role comes first, the sink second with "also parks".
TEST(AnalysisRoles, CorpusSpecialistComesBeforeTheSink) {
  HeadStats s = weak_stats();
  s.sink_mass = 0.7;
  const HeadRoles text_only = assign_roles(HeadEvidence{s, {}, {}, {}});
  EXPECT_EQ(text_only.primary.role, Role::kSink);
  const HeadRoles r = assign_roles(HeadEvidence{s, {}, {}, CorefEvidence{0.71, 0.56, "nearest candidate", 392}});
  EXPECT_EQ(r.primary.role, Role::kCoreference);
  EXPECT_NEAR(r.primary.score, (0.71 - 0.56) / (1 - 0.56), 1e-12);
  EXPECT_EQ(r.secondary.role, Role::kSink);
  EXPECT_EQ(r.secondary.evidence, "it also parks 70 % of its attention on the first token or special tokens");
  // A clear positional pattern is not overruled: previous token .9 stays first.
  s.prev_mass = s.offset_mass[kMaxOffset - 1] = 0.9;
  const HeadRoles positional =
      assign_roles(HeadEvidence{s, {}, {}, CorefEvidence{0.71, 0.56, "nearest candidate", 392}});
  EXPECT_EQ(positional.primary.role, Role::kPreviousToken);
}

TEST(AnalysisRoles, EveryRoleHasAFamilyAndDecodersAreNotToldOfCls) {
  EXPECT_EQ(role_info(Role::kInduction).family, RoleFamily::kInductionCopy);
  EXPECT_EQ(role_info(Role::kFixedOffset).family, RoleFamily::kPositional);
  EXPECT_EQ(role_family_info(RoleFamily::kSink).id, "sink");
  EXPECT_EQ(role_families().size(), static_cast<size_t>(kRoleFamilyCount));
  EXPECT_EQ(role_description(Role::kSink, /*causal=*/true).find("[CLS]"), std::string::npos);
  EXPECT_NE(role_description(Role::kSink, /*causal=*/false).find("[CLS]"), std::string::npos);
}

}  // namespace
}  // namespace headscope::analysis

namespace headscope::analysis {
namespace {

// A causal head's roles come from its rows without the sink; the sink's share is evidence, never
// the primary role; nearly all weight on the sink while writing almost nothing is dormant.
TEST(AnalysisRoles, CausalHeadsAreReadWithoutTheSinkAndCanBeDormant) {
  const HeadStats previous = stats_of([](int q) { return one_hot(q > 0 ? q - 1 : 0); });
  // 95 % on the sink, and the sink's value a ninth of the others': writes (1 − 0.95) / (1 − 0.6).
  SinkEvidence sink{0.95, 0.95, 0.6};
  EXPECT_NEAR(sink.written(), 0.05 / 0.4, 1e-12);
  HeadRoles r = assign_roles(HeadEvidence{previous, {}, {}, {}, sink});
  EXPECT_EQ(r.primary.role, Role::kDormant);
  EXPECT_NEAR(r.primary.score, 0.95, 1e-12);
  EXPECT_EQ(r.secondary.role, Role::kPreviousToken);  // what it does when it does something
  EXPECT_NE(r.primary.evidence.find("95 %"), std::string::npos) << r.primary.evidence;
  EXPECT_NE(r.primary.evidence.find("0.13 times"), std::string::npos) << r.primary.evidence;

  // The same share on a sink whose value is as large as the others': it writes, so not dormant;
  // the previous-token role from the rows without the sink, the sink a score below it.
  sink.sink_mass_norm = 0.96;
  EXPECT_NEAR(sink.written(), 0.05 / 0.04, 1e-12);
  r = assign_roles(HeadEvidence{previous, {}, {}, {}, sink});
  EXPECT_EQ(r.primary.role, Role::kPreviousToken);
  EXPECT_NE(r.primary.evidence.find("first token's 95 %"), std::string::npos) << r.primary.evidence;
  const auto parked =
      std::find_if(r.scores.begin(), r.scores.end(), [](const RoleScore& s) { return s.role == Role::kSink; });
  ASSERT_NE(parked, r.scores.end());
  EXPECT_NEAR(parked->score, 0.95, 1e-12);
  for (size_t i = 1; i < r.scores.size(); ++i) EXPECT_GE(r.scores[i - 1].score, r.scores[i].score);

  // Without value norms nothing is called dormant; below the sink threshold neither.
  r = assign_roles(HeadEvidence{previous, {}, {}, {}, SinkEvidence{0.99, 0.99}});
  EXPECT_EQ(r.primary.role, Role::kPreviousToken);
  r = assign_roles(HeadEvidence{previous, {}, {}, {}, SinkEvidence{kDormantSinkMass - 0.01, 0.7, 0.0}});
  EXPECT_EQ(r.primary.role, Role::kPreviousToken);
  EXPECT_EQ(role_info(Role::kDormant).family, RoleFamily::kSink);
}

}  // namespace
}  // namespace headscope::analysis
