// Coreference in attention on GAP; method in coref.h.
#include "analysis/coref.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>

#include "analysis/tsv.h"
#include "headscope/error.h"

namespace headscope::analysis {
namespace {

// Byte offset of the `cp`-th code point of UTF-8 `text`; -1 when the text is shorter.
int64_t byte_of_codepoint(std::string_view text, int64_t cp) {
  int64_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    if (seen == cp) return static_cast<int64_t>(i);
    ++seen;
  }
  return seen == cp ? static_cast<int64_t>(text.size()) : -1;
}

Mention make_mention(std::string_view text, std::string_view name, std::string_view offset, const std::string& where,
                     const char* column) {
  int64_t cp = 0;
  const auto [ptr, ec] = std::from_chars(offset.data(), offset.data() + offset.size(), cp);
  if (ec != std::errc() || ptr != offset.data() + offset.size() || cp < 0) {
    throw Error(where + ": " + column + "-offset '" + std::string(offset) + "' is not a character offset");
  }
  Mention m;
  m.text = std::string(name);
  m.begin = byte_of_codepoint(text, cp);
  m.end = m.begin + static_cast<int64_t>(name.size());
  if (m.begin < 0 || m.end > static_cast<int64_t>(text.size()) ||
      text.substr(static_cast<size_t>(m.begin), name.size()) != name) {
    throw Error(where + ": " + column + " '" + std::string(name) + "' is not found at character offset " +
                std::string(offset) + " of the text");
  }
  return m;
}

bool parse_bool(std::string_view s, const std::string& where) {
  if (s == "TRUE" || s == "True" || s == "true") return true;
  if (s == "FALSE" || s == "False" || s == "false") return false;
  throw Error(where + ": coreference label '" + std::string(s) + "' is neither TRUE nor FALSE");
}

bool overlaps(const Token& t, const Mention& m) { return !t.special && t.begin < m.end && t.end > m.begin; }

int64_t gap_between(const Mention& x, const Mention& p) {
  if (x.end <= p.begin) return p.begin - x.end;
  if (p.end <= x.begin) return x.begin - p.end;
  return 0;
}

}  // namespace

std::vector<GapExample> parse_gap_tsv(std::string_view content, const std::string& source_name) {
  std::vector<GapExample> out;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < content.size()) {
    size_t nl = content.find('\n', pos);
    if (nl == std::string_view::npos) nl = content.size();
    std::string_view line = content.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const auto f = split_tabs(line);
    const std::string where = source_name + ":" + std::to_string(line_no);
    if (line_no == 1) {
      if (f.size() < 10 || f[0] != "ID" || f[1] != "Text") {
        throw Error(where +
                    ": expected the GAP header 'ID Text Pronoun Pronoun-offset A ...'; is this a GAP TSV file?");
      }
      continue;
    }
    if (f.size() < 10) {
      throw Error(where + ": a GAP row needs at least 10 tab-separated fields, found " + std::to_string(f.size()));
    }
    GapExample ex;
    ex.id = std::string(f[0]);
    ex.text = std::string(f[1]);
    ex.pronoun = make_mention(ex.text, f[2], f[3], where, "Pronoun");
    ex.a = make_mention(ex.text, f[4], f[5], where, "A");
    ex.a_coref = parse_bool(f[6], where);
    ex.b = make_mention(ex.text, f[7], f[8], where, "B");
    ex.b_coref = parse_bool(f[9], where);
    out.push_back(std::move(ex));
  }
  return out;
}

std::vector<GapExample> read_gap_tsv(const std::string& path) {
  auto examples = parse_gap_tsv(
      read_gold_file(path, "coreference file", "pass a GAP TSV file (e.g. ../shared/data/gap/gap-validation.tsv)"),
      path);
  if (examples.empty()) throw Error("coreference file '" + path + "': no examples found");
  return examples;
}

std::string_view coref_baseline_name(CorefBaseline b) {
  return b == CorefBaseline::kNearest ? "nearest candidate" : "first candidate";
}

bool coref_baseline_correct(const GapExample& ex, CorefBaseline b) {
  bool pick_a = true;
  if (b == CorefBaseline::kNearest) {
    pick_a = gap_between(ex.a, ex.pronoun) <= gap_between(ex.b, ex.pronoun);  // a tie goes to A
  } else {
    pick_a = ex.a.begin <= ex.b.begin;
  }
  return pick_a ? ex.a_coref : ex.b_coref;
}

bool candidate_attention(const float* attention, const Encoding& encoding, const GapExample& ex,
                         CandidateAttention& out) {
  const auto T = static_cast<int64_t>(encoding.size());
  // FROM the pronoun: mean of its pieces' rows.
  std::vector<double> from(static_cast<size_t>(T), 0.0);
  int pieces = 0;
  for (int64_t q = 0; q < T; ++q) {
    if (!overlaps(encoding.tokens[static_cast<size_t>(q)], ex.pronoun)) continue;
    ++pieces;
    for (int64_t k = 0; k < T; ++k) from[static_cast<size_t>(k)] += attention[q * T + k];
  }
  if (pieces == 0) return false;
  for (double& x : from) x /= pieces;
  // TO a candidate: per word the sum over its pieces, then the best word of the mention.
  auto to = [&](const Mention& m, double& value) {
    std::map<int32_t, double> per_word;
    for (int64_t k = 0; k < T; ++k) {
      const Token& t = encoding.tokens[static_cast<size_t>(k)];
      if (overlaps(t, m)) per_word[t.word] += from[static_cast<size_t>(k)];
    }
    if (per_word.empty()) return false;
    value = 0;
    for (const auto& [w, x] : per_word) value = std::max(value, x);
    return true;
  };
  return to(ex.a, out.a) && to(ex.b, out.b);
}

CorefScorer::CorefScorer(int n_heads) : correct_(static_cast<size_t>(std::max(n_heads, 0)), 0) {}

void CorefScorer::merge(const CorefScorer& other) {
  if (other.correct_.size() != correct_.size())
    throw Error("coreference scorer: cannot merge counts of " + std::to_string(other.correct_.size()) + " heads into " +
                std::to_string(correct_.size()));
  for (size_t h = 0; h < correct_.size(); ++h) correct_[h] += other.correct_[h];
  for (size_t b = 0; b < baseline_.size(); ++b) baseline_[b] += other.baseline_[b];
  support_ += other.support_;
  skipped_ += other.skipped_;
}

nlohmann::json CorefScorer::to_json() const {
  return {{"correct", correct_}, {"baseline", baseline_}, {"support", support_}, {"skipped", skipped_}};
}

CorefScorer CorefScorer::from_json(const nlohmann::json& j) {
  CorefScorer s(0);
  s.correct_ = j.at("correct").get<std::vector<int64_t>>();
  s.baseline_ = j.at("baseline").get<std::vector<int64_t>>();
  if (s.baseline_.size() != size_t(kCorefBaselineCount))
    throw Error("coreference scorer: " + std::to_string(s.baseline_.size()) + " baseline counts");
  s.support_ = j.at("support").get<int64_t>();
  s.skipped_ = j.at("skipped").get<int64_t>();
  return s;
}

void CorefScorer::add(const GapExample& ex, const Encoding& encoding, const Tensor& attention) {
  if (!ex.decidable()) return;
  const auto T = static_cast<int64_t>(encoding.size());
  attention.expect_shape({-1, -1, T, T}, "attention for coreference scoring of " + ex.id);
  if (attention.dim(0) * attention.dim(1) != n_heads()) {
    throw Error("coreference scorer: attention has " + std::to_string(attention.dim(0) * attention.dim(1)) +
                " heads, the scorer was made for " + std::to_string(n_heads()));
  }
  std::vector<CandidateAttention> cand(correct_.size());
  for (size_t h = 0; h < correct_.size(); ++h) {
    if (!candidate_attention(attention.ptr() + static_cast<int64_t>(h) * T * T, encoding, ex, cand[h])) {
      ++skipped_;
      return;
    }
  }
  ++support_;
  for (size_t h = 0; h < correct_.size(); ++h) {
    const double right = ex.a_coref ? cand[h].a : cand[h].b;
    const double wrong = ex.a_coref ? cand[h].b : cand[h].a;
    if (right > wrong) ++correct_[h];
  }
  for (int b = 0; b < kCorefBaselineCount; ++b) {
    if (coref_baseline_correct(ex, static_cast<CorefBaseline>(b))) ++baseline_[static_cast<size_t>(b)];
  }
}

double CorefScorer::accuracy(int head) const {
  return support_ > 0 ? static_cast<double>(correct(head)) / static_cast<double>(support_) : 0.0;
}

double CorefScorer::baseline_accuracy(CorefBaseline b) const {
  return support_ > 0 ? static_cast<double>(baseline_correct(b)) / static_cast<double>(support_) : 0.0;
}

}  // namespace headscope::analysis
