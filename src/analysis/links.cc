// A head on one text, in words: the rules of links.h.
#include "analysis/links.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "headscope/limits.h"

namespace headscope::analysis {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool in(std::string_view word, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), word) != list.end();
}

bool is_pronoun(const std::string& w) {
  return in(w, {"he", "she", "it", "they", "him", "her", "them", "his", "hers", "its", "their", "theirs", "himself",
                "herself", "itself", "themselves"});
}

// Function words of the closed-class relations, the only ones recognised on a text (an open
// relation such as obj needs a parse to tell its words apart).
bool closed_class(const std::string& relation) {
  return relation == "det" || relation == "case" || relation == "cc" || relation == "cop" || relation == "aux" ||
         relation == "mark";
}
bool fits_relation(const std::string& relation, const std::string& w) {
  if (relation == "det")
    return in(w, {"the", "a", "an", "this", "that", "these", "those", "every", "each", "some", "any", "no", "another"});
  if (relation == "case")
    return in(w, {"of", "in", "on", "at", "to", "for", "with", "by", "from", "about", "into", "over", "under",
                  "between", "through", "during", "without", "after", "before"});
  if (relation == "cc") return in(w, {"and", "or", "but", "nor", "yet", "so"});
  if (relation == "cop") return in(w, {"is", "are", "was", "were", "be", "been", "being", "am"});
  if (relation == "aux")
    return in(w, {"is",   "are", "was",  "were",  "be",  "been",  "being", "am",    "has",   "have",   "had", "do",
                  "does", "did", "will", "would", "can", "could", "may",   "might", "shall", "should", "must"});
  if (relation == "mark")
    return in(w, {"that", "if", "because", "while", "although", "since", "whether", "as", "when", "to"});
  return false;
}

bool is_sink(const SequenceInfo& seq, int k) {
  return k == 0 || seq.kinds[static_cast<size_t>(k)] == TokenKind::kSpecial;
}

std::string link_text(const TextLink& l, std::span<const std::string> labels) {
  char w[16];
  std::snprintf(w, sizeof w, "%.2f", l.weight);
  return "'" + labels[static_cast<size_t>(l.query)] + "' → '" + labels[static_cast<size_t>(l.key)] + "' " + w;
}

std::string join(const std::vector<TextLink>& links, std::span<const std::string> labels) {
  std::string out;
  const size_t n = std::min(links.size(), static_cast<size_t>(limits::kMaxTextLinks));
  for (size_t i = 0; i < n; ++i) out += (i ? "; " : "") + link_text(links[i], labels);
  return out;
}

bool holds(const HeadRoles& roles, Role role) {
  return std::any_of(roles.scores.begin(), roles.scores.end(),
                     [&](const RoleScore& r) { return r.role == role && r.score >= kMinRoleScore; });
}

}  // namespace

std::string sink_columns_text(const SequenceInfo& seq, std::span<const std::string> labels) {
  const int T = seq.T();
  const bool both_ends = T >= 2 && seq.kinds.front() == TokenKind::kSpecial && seq.kinds.back() == TokenKind::kSpecial;
  if (both_ends) return labels.front() + " and " + labels.back();
  return "the first token";
}

TextEvidence describe_text(const float* attention, std::span<const std::string> labels, const SequenceInfo& seq,
                           const HeadEvidence& corpus, const HeadRoles& roles) {
  const int T = seq.T();
  TextEvidence out;
  for (int q = 1; q < T; ++q) {
    if (is_sink(seq, q)) continue;
    const float* row = attention + static_cast<int64_t>(q) * T;
    double kept = 0;
    int best = -1;
    for (int k = 0; k < T; ++k) {
      if (is_sink(seq, k) || !seq.may_attend(q, k)) continue;
      kept += row[k];
      if (k != q && (best < 0 || row[k] > row[best])) best = k;
    }
    if (best < 0 || kept <= 0) continue;
    out.links.push_back(TextLink{q, best, row[best] / kept, row[best]});
  }
  std::stable_sort(out.links.begin(), out.links.end(),
                   [](const TextLink& a, const TextLink& b) { return a.weight > b.weight; });
  out.links_text = join(out.links, labels);

  const auto word = [&](int t) { return lower(labels[static_cast<size_t>(t)]); };
  // The roles in the order the head holds them, the first that the text shows wins.
  for (const RoleScore& r : roles.scores) {
    if (out.recognised) break;
    if (r.role == Role::kCoreference && corpus.coref && holds(roles, Role::kCoreference)) {
      for (const TextLink& l : out.links)
        if (is_pronoun(word(l.query)) && l.key < l.query && seq.kinds[size_t(l.key)] == TokenKind::kContent &&
            !is_pronoun(word(l.key)))
          out.matching.push_back(l);
      if (!out.matching.empty()) {
        out.recognised = Role::kCoreference;
        out.recognised_text = "on this text a pronoun points back to an earlier word: " + join(out.matching, labels);
      }
    } else if (r.role == Role::kSyntactic && corpus.syntax && holds(roles, Role::kSyntactic)) {
      const SyntaxEvidence& x = *corpus.syntax;
      if (x.baseline_offset == 0 || !closed_class(x.relation)) continue;
      for (const TextLink& l : out.links) {
        const int d = l.key - l.query;
        const int dependent = x.head_to_dependent ? l.key : l.query;
        if ((d > 0) == (x.baseline_offset > 0) && std::abs(d) <= kMaxOffset &&
            fits_relation(x.relation, word(dependent)))
          out.matching.push_back(l);
      }
      if (!out.matching.empty()) {
        out.recognised = Role::kSyntactic;
        out.recognised_text = "on this text its links match its " + x.relation + " role (" +
                              (x.head_to_dependent ? "head → dependent" : "dependent → head") + ", usually " +
                              (x.baseline_offset > 0 ? "to the right" : "to the left") +
                              "): " + join(out.matching, labels);
      }
    }
  }
  return out;
}

}  // namespace headscope::analysis
