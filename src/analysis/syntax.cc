// Dependency heads in attention (Clark et al. 2019, section 4.2); method in syntax.h.
#include "analysis/syntax.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "analysis/tsv.h"
#include "headscope/error.h"

namespace headscope::analysis {
namespace {

bool parse_int(std::string_view s, int32_t& out) {
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

double ratio(int64_t num, int64_t den) { return den > 0 ? static_cast<double>(num) / static_cast<double>(den) : 0.0; }

// Best head×direction index and best offset slot of one relation, by accuracy on `c`.
std::pair<int, int> best_choices(const RelationCounts& c) {
  int best_head = 0;
  for (int i = 1; i < static_cast<int>(c.correct.size()); ++i) {
    if (c.correct[static_cast<size_t>(i)] > c.correct[static_cast<size_t>(best_head)]) best_head = i;
  }
  int best_slot = -1;
  for (int s = 0; s < kBaselineSlots; ++s) {
    if (s == kMaxBaselineOffset) continue;  // offset 0 is the word itself
    if (best_slot < 0 || c.offset_correct[static_cast<size_t>(s)] > c.offset_correct[static_cast<size_t>(best_slot)]) {
      best_slot = s;
    }
  }
  return {best_head, best_slot};
}

}  // namespace

std::vector<DependencySentence> parse_conllu(std::string_view content, const std::string& source_name) {
  std::vector<DependencySentence> sentences;
  DependencySentence current;
  int64_t line_no = 0;
  auto finish = [&]() {
    if (!current.words.empty()) {
      if (current.id.empty()) current.id = source_name + ":" + std::to_string(line_no);
      sentences.push_back(std::move(current));
    }
    current = DependencySentence{};
  };
  size_t pos = 0;
  while (pos <= content.size()) {
    size_t nl = content.find('\n', pos);
    if (nl == std::string_view::npos) nl = content.size();
    std::string_view line = content.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      finish();
      if (nl == content.size()) break;
      continue;
    }
    if (line.front() == '#') {
      constexpr std::string_view kSentId = "# sent_id = ";
      if (line.substr(0, kSentId.size()) == kSentId) current.id = std::string(line.substr(kSentId.size()));
      continue;
    }
    const auto fields = split_tabs(line);
    const std::string where = source_name + ":" + std::to_string(line_no);
    if (fields.size() != 10) {
      throw Error(where + ": a CoNLL-U word line needs 10 tab-separated fields, found " +
                  std::to_string(fields.size()) + "; is this a CoNLL-U file?");
    }
    // Multiword token ranges (3-4) and empty nodes (5.1) are not part of the basic tree.
    if (fields[0].find_first_of("-.") != std::string_view::npos) continue;
    int32_t id = 0, head = 0;
    if (!parse_int(fields[0], id) || id != static_cast<int32_t>(current.words.size()) + 1) {
      throw Error(where + ": word ID '" + std::string(fields[0]) + "' is not the next number (expected " +
                  std::to_string(current.words.size() + 1) + ")");
    }
    if (!parse_int(fields[6], head) || head < 0) {
      throw Error(where + ": HEAD '" + std::string(fields[6]) + "' is not a word number; the file needs gold trees");
    }
    DependencyWord w;
    w.form = std::string(fields[1]);
    w.head = head;
    const std::string_view rel = fields[7];
    w.relation = std::string(rel.substr(0, rel.find(':')));
    current.words.push_back(std::move(w));
  }
  finish();
  for (const auto& s : sentences) {
    for (size_t i = 0; i < s.words.size(); ++i) {
      if (s.words[i].head > static_cast<int32_t>(s.words.size())) {
        throw Error(source_name + ": sentence " + s.id + ", word " + std::to_string(i + 1) + " has HEAD " +
                    std::to_string(s.words[i].head) + " beyond the sentence's " + std::to_string(s.words.size()) +
                    " words");
      }
    }
  }
  return sentences;
}

std::vector<DependencySentence> read_conllu(const std::string& path) {
  auto sentences = parse_conllu(
      read_gold_file(path, "treebank", "pass a CoNLL-U file (e.g. ../shared/data/ud/en_pud-ud-test.conllu)"), path);
  if (sentences.empty()) throw Error("treebank '" + path + "': no sentences found; is this a CoNLL-U file?");
  return sentences;
}

std::string join_words(const DependencySentence& sentence, std::vector<std::pair<int64_t, int64_t>>* spans) {
  std::string text;
  if (spans) spans->clear();
  for (size_t i = 0; i < sentence.words.size(); ++i) {
    if (i) text += ' ';
    const auto begin = static_cast<int64_t>(text.size());
    text += sentence.words[i].form;
    if (spans) spans->emplace_back(begin, static_cast<int64_t>(text.size()));
  }
  return text;
}

std::string_view direction_name(Direction d) {
  return d == Direction::kDependentToHead ? "dependent → head" : "head → dependent";
}

std::vector<int32_t> predict_words(const float* a, const WordMap& map, Direction dir) {
  const int U = map.n_units;
  std::vector<int32_t> pred(map.unit_of_word.size(), -1);
  for (size_t i = 0; i < pred.size(); ++i) {
    const int32_t u = map.unit_of_word[i];
    if (u < 0) continue;
    float best = -1.0f;
    for (int v = 0; v < U; ++v) {
      const int32_t w = map.word_of_unit[static_cast<size_t>(v)];
      if (v == u || w < 0) continue;  // not itself, not a special token
      const float x =
          dir == Direction::kDependentToHead ? a[static_cast<int64_t>(u) * U + v] : a[static_cast<int64_t>(v) * U + u];
      if (x > best) {
        best = x;
        pred[i] = w;
      }
    }
  }
  return pred;
}

DependencyScorer::DependencyScorer(int n_heads) : n_heads_(n_heads) {
  if (n_heads < 0) throw Error("dependency scorer: negative head count");
}

RelationCounts& DependencyScorer::counts(const std::string& relation) {
  auto [it, inserted] = relations_.try_emplace(relation);
  if (inserted) it->second.correct.assign(static_cast<size_t>(n_heads_) * 2, 0);
  return it->second;
}

void DependencyScorer::count_baseline(const DependencySentence& s) {
  const auto W = static_cast<int32_t>(s.words.size());
  RelationCounts& all = counts(std::string(kAllRelations));
  for (int32_t i = 0; i < W; ++i) {
    const DependencyWord& w = s.words[static_cast<size_t>(i)];
    if (w.head == 0) continue;
    RelationCounts& rel = counts(w.relation);
    ++rel.support;
    ++all.support;
    const int32_t d = (w.head - 1) - i;  // the offset that would be right
    if (d != 0 && std::abs(d) <= kMaxBaselineOffset) {
      ++rel.offset_correct[static_cast<size_t>(d + kMaxBaselineOffset)];
      ++all.offset_correct[static_cast<size_t>(d + kMaxBaselineOffset)];
    }
  }
}

void DependencyScorer::add_baseline(const DependencySentence& sentence) { count_baseline(sentence); }

void DependencyScorer::merge(const DependencyScorer& other) {
  if (other.n_heads_ != n_heads_)
    throw Error("dependency scorer: cannot merge counts of " + std::to_string(other.n_heads_) + " heads into " +
                std::to_string(n_heads_));
  for (const auto& [name, theirs] : other.relations_) {
    RelationCounts& mine = counts(name);
    mine.support += theirs.support;
    for (size_t k = 0; k < mine.correct.size(); ++k) mine.correct[k] += theirs.correct[k];
    for (size_t k = 0; k < mine.offset_correct.size(); ++k) mine.offset_correct[k] += theirs.offset_correct[k];
  }
}

nlohmann::json DependencyScorer::to_json() const {
  nlohmann::json relations = nlohmann::json::object();
  for (const auto& [name, c] : relations_)
    relations[name] = {{"support", c.support}, {"correct", c.correct}, {"offset_correct", c.offset_correct}};
  return {{"n_heads", n_heads_}, {"relations", std::move(relations)}};
}

DependencyScorer DependencyScorer::from_json(const nlohmann::json& j) {
  DependencyScorer s(j.at("n_heads").get<int>());
  for (const auto& item : j.at("relations").items()) {
    const std::string& name = item.key();
    const nlohmann::json& c = item.value();
    RelationCounts& r = s.counts(name);
    r.support = c.at("support").get<int64_t>();
    r.correct = c.at("correct").get<std::vector<int64_t>>();
    const auto offsets = c.at("offset_correct").get<std::vector<int64_t>>();
    if (r.correct.size() != size_t(s.n_heads_) * 2 || offsets.size() != r.offset_correct.size())
      throw Error("dependency scorer: the counts of relation " + name + " have the wrong size");
    std::copy(offsets.begin(), offsets.end(), r.offset_correct.begin());
  }
  return s;
}

void DependencyScorer::add(const DependencySentence& s, const float* unit_attention, const WordMap& map) {
  if (map.unit_of_word.size() != s.words.size()) {
    throw Error("dependency scorer: sentence " + s.id + " has " + std::to_string(s.words.size()) +
                " words but the word map " + std::to_string(map.unit_of_word.size()));
  }
  count_baseline(s);
  if (n_heads_ == 0) return;
  if (!unit_attention) throw Error("dependency scorer: attention missing for sentence " + s.id);
  const int64_t UU = static_cast<int64_t>(map.n_units) * map.n_units;
  RelationCounts& all = counts(std::string(kAllRelations));
  for (int h = 0; h < n_heads_; ++h) {
    for (int dir = 0; dir < 2; ++dir) {
      const auto pred = predict_words(unit_attention + h * UU, map, static_cast<Direction>(dir));
      const auto slot = static_cast<size_t>(h * 2 + dir);
      for (size_t i = 0; i < s.words.size(); ++i) {
        const DependencyWord& w = s.words[i];
        if (w.head == 0 || pred[i] != w.head - 1) continue;
        ++counts(w.relation).correct[slot];
        ++all.correct[slot];
      }
    }
  }
}

std::vector<RelationResult> select_and_report(const DependencyScorer& select, const DependencyScorer& report,
                                              int64_t min_support) {
  if (select.n_heads() != report.n_heads()) {
    throw Error("dependency selection: the selection and report sets were scored with different models");
  }
  std::vector<RelationResult> out;
  for (const auto& [rel, rc] : report.relations()) {
    auto it = select.relations().find(rel);
    if (it == select.relations().end()) continue;
    const RelationCounts& sc = it->second;
    if (sc.support < min_support || rc.support < min_support) continue;
    const auto [best, slot] = best_choices(sc);
    RelationResult r;
    r.relation = rel;
    r.support_select = sc.support;
    r.support_report = rc.support;
    if (select.n_heads() > 0) {
      r.head = best / 2;
      r.direction = static_cast<Direction>(best % 2);
      r.head_select_accuracy = ratio(sc.correct[static_cast<size_t>(best)], sc.support);
      r.head_report_accuracy = ratio(rc.correct[static_cast<size_t>(best)], rc.support);
    }
    r.baseline_offset = slot - kMaxBaselineOffset;
    r.baseline_select_accuracy = ratio(sc.offset_correct[static_cast<size_t>(slot)], sc.support);
    r.baseline_report_accuracy = ratio(rc.offset_correct[static_cast<size_t>(slot)], rc.support);
    out.push_back(std::move(r));
  }
  std::stable_sort(out.begin(), out.end(), [](const RelationResult& a, const RelationResult& b) {
    const bool a_all = a.relation == kAllRelations, b_all = b.relation == kAllRelations;
    if (a_all != b_all) return a_all;
    return a.support_report > b.support_report;
  });
  return out;
}

HeadSyntax best_relation_of_head(const DependencyScorer& select, const DependencyScorer& report, int head,
                                 int64_t min_support) {
  HeadSyntax best;
  double best_skill = -1;
  for (const auto& [rel, sc] : select.relations()) {
    if (rel == kAllRelations || sc.support < min_support) continue;
    auto it = report.relations().find(rel);
    if (it == report.relations().end() || it->second.support < min_support) continue;
    const RelationCounts& rc = it->second;
    const auto [unused, slot] = best_choices(sc);
    (void)unused;
    const double base_sel = ratio(sc.offset_correct[static_cast<size_t>(slot)], sc.support);
    for (int dir = 0; dir < 2; ++dir) {
      const auto i = static_cast<size_t>(head * 2 + dir);
      const double acc_sel = ratio(sc.correct[i], sc.support);
      const double skill = base_sel < 1 ? (acc_sel - base_sel) / (1 - base_sel) : 0;
      if (skill > best_skill) {
        best_skill = skill;
        best.relation = rel;
        best.direction = static_cast<Direction>(dir);
        best.accuracy = ratio(rc.correct[i], rc.support);
        best.baseline_accuracy = ratio(rc.offset_correct[static_cast<size_t>(slot)], rc.support);
        best.baseline_offset = slot - kMaxBaselineOffset;
        best.support = rc.support;
      }
    }
  }
  return best;
}

}  // namespace headscope::analysis
