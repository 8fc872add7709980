// headscope — many texts through one model (pipeline.h, "corpus"): the corpus file read line by
// line (a bad line is reported, not fatal), the texts grouped in file order into packed passes
// (analyse_batch), one record per text × head as JSON Lines or CSV, and the progress of the job.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/syntax.h"
#include "headscope/input.h"
#include "headscope/json.h"
#include "headscope/pipeline.h"

namespace headscope {
namespace {

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// One line of a JSON Lines corpus: {"text": "...", "id": ...}; anything else becomes the text's error.
CorpusText jsonl_text(std::string_view line, size_t number) {
  CorpusText t;
  t.id = "line " + std::to_string(number);
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    t.error = "not valid JSON";
  } else if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
    t.error = "not an object with a string \"text\"";
  } else {
    t.text = j["text"].get<std::string>();
    if (j.contains("id")) t.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
  }
  return t;
}

}  // namespace

double CorpusProgress::texts_per_second() const { return seconds > 0 ? double(done) / seconds : 0.0; }

double CorpusProgress::eta_seconds() const {
  const double rate = texts_per_second();
  return rate > 0 ? double(total - done) / rate : 0.0;
}

std::vector<CorpusText> read_corpus(const std::string& path) {
  std::vector<CorpusText> out;
  if (ends_with(path, ".conllu")) {  // a treebank: each sentence's words joined by spaces
    for (const analysis::DependencySentence& s :
         analysis::parse_conllu(read_input_file(path, "corpus", limits::kMaxCorpusFileBytes), path)) {
      CorpusText t;
      t.id = s.id;
      for (const analysis::DependencyWord& w : s.words) t.text += (t.text.empty() ? "" : " ") + w.form;
      out.push_back(std::move(t));
    }
    return out;
  }
  const std::string content = read_input_file(path, "corpus", limits::kMaxCorpusFileBytes);
  const bool jsonl = ends_with(path, ".jsonl");
  size_t number = 0;
  for (size_t at = 0; at < content.size();) {
    const size_t end = std::min(content.find('\n', at), content.size());
    std::string_view line(content.data() + at, end - at);
    at = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank lines are not texts
    CorpusText t =
        jsonl ? jsonl_text(line, number) : CorpusText{"line " + std::to_string(number), std::string(line), ""};
    size_t bad = 0;
    if (t.error.empty() && !is_valid_utf8(t.text, &bad))
      t.error = t.id + ": the text is not valid UTF-8 (byte " + std::to_string(bad) + ")";
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// The texts of one packed pass, in corpus order.
struct Batch {
  std::vector<size_t> index;
  std::vector<TextToAnalyse> texts;
  int64_t rows = 0;
};

class CorpusJob {
 public:
  CorpusJob(const Model& model, std::span<const CorpusText> texts, std::span<const analysis::ProbeEvidence> probe,
            const CorpusOptions& options, const CorpusSink& each)
      : model_(model), texts_(texts), probe_(probe), options_(options), each_(each) {
    analyse_ = options.analyse;
    analyse_.capture = CaptureOptions::attention_only();  // statistics, roles and links read the maps alone
    analyse_.progress = nullptr;
    summary_.progress.total = int64_t(texts.size());
  }

  CorpusSummary run() {
    for (size_t i = 0; i < texts_.size(); ++i) add(i);
    flush();
    report();
    return std::move(summary_);
  }

 private:
  void add(size_t i) {
    const CorpusText& t = texts_[i];
    if (!t.error.empty()) return fail(i, t.error);
    Encoding encoding;
    try {
      encoding = model_.encode(t.text, options_.truncate);
    } catch (const Error& e) {
      return fail(i, e.what());
    }
    const int64_t T = int64_t(encoding.size());
    if (T == 0) return fail(i, "the text produced no tokens");
    if (T > model_.config().max_positions)
      return fail(i, "the text is " + std::to_string(T) + " tokens; " + model_.config().name + " reads at most " +
                         std::to_string(model_.config().max_positions) + " (truncate it to analyse its start)");
    if (T > options_.batch_tokens) {  // a long text runs alone (streamed when its maps would not fit)
      flush();
      try {
        // A pass of its own: packed like the others while its dense maps fit (the same kernels,
        // so its numbers do not depend on batch_tokens), else analyse()'s streamed run.
        AnalyseOptions alone = analyse_;
        alone.maps = AnalyseOptions::Maps::kAuto;
        if (!analyse_memory(model_, T, alone).streamed) {
          std::vector<TextToAnalyse> one;
          one.push_back({t.text, std::move(encoding)});
          deliver(i, analyse_batch(model_, std::move(one), probe_, analyse_).at(0));
        } else {
          deliver(i, analyse(model_, t.text, std::move(encoding), probe_, alone));
        }
      } catch (const Error& e) {
        fail(i, e.what());
      }
      report();
      return;
    }
    if (batch_.rows + T > options_.batch_tokens || int64_t(batch_.texts.size()) >= options_.batch_texts) flush();
    batch_.index.push_back(i);
    batch_.texts.push_back({t.text, std::move(encoding)});
    batch_.rows += T;
  }

  // Runs the batch; when the packed pass fails (memory), each text again alone, so one text's
  // failure is its own.
  void flush() {
    if (batch_.texts.empty()) return;
    Batch b = std::move(batch_);
    batch_ = Batch{};
    std::vector<RunAnalysis> runs;
    try {
      runs = analyse_batch(model_, b.texts, probe_, analyse_);
    } catch (const Error&) {
      for (size_t j = 0; j < b.texts.size(); ++j) {
        try {
          deliver(b.index[j], analyse(model_, b.texts[j].text, b.texts[j].encoding, probe_, analyse_));
        } catch (const Error& e) {
          fail(b.index[j], e.what());
        }
      }
      report();
      return;
    }
    for (size_t j = 0; j < runs.size(); ++j) deliver(b.index[j], runs[j]);
    report();
  }

  void deliver(size_t i, const RunAnalysis& run) {
    summary_.progress.done += 1;
    summary_.progress.tokens += run.T();
    if (each_) each_(i, texts_[i], run);
  }
  void fail(size_t i, const std::string& error) {
    summary_.progress.done += 1;
    summary_.progress.failed += 1;
    summary_.failures.push_back({i, texts_[i].id, error});
    if (options_.on_failure) options_.on_failure(summary_.failures.back());
  }
  void report() {
    summary_.progress.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (options_.progress) options_.progress(summary_.progress);
  }

  const Model& model_;
  std::span<const CorpusText> texts_;
  std::span<const analysis::ProbeEvidence> probe_;
  const CorpusOptions& options_;
  const CorpusSink& each_;
  AnalyseOptions analyse_;
  Batch batch_;
  CorpusSummary summary_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

CorpusSummary analyse_corpus(const Model& model, std::span<const CorpusText> texts,
                             std::span<const analysis::ProbeEvidence> probe, const CorpusOptions& options,
                             const CorpusSink& each) {
  if (options.batch_tokens < 1 || options.batch_texts < 1)
    throw Error("a corpus batch needs at least one token and one text (batch_tokens " +
                std::to_string(options.batch_tokens) + ", batch_texts " + std::to_string(options.batch_texts) + ")");
  return CorpusJob(model, texts, probe, options, each).run();
}

// ---- records ----

namespace {

// A CSV field: quoted when it holds a comma, quote or line break (RFC 4180), quotes doubled.
std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string csv_number(double x) {
  if (!std::isfinite(x)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

}  // namespace

std::string corpus_csv_header() {
  std::string h = "text,id,layer,head,kv_head";
  for (const analysis::StatInfo& s : analysis::statistics_catalogue())
    if (s.kind != analysis::StatKind::kOffsets) h += "," + std::string(s.key);
  return h + ",role,role_score,secondary,secondary_score,links\n";
}

std::string corpus_csv_rows(const ModelConfig& config, size_t index, const std::string& id, const RunAnalysis& run,
                            Level level) {
  const LevelAnalysis& a = run.analysis(level);
  const std::vector<int> kv = kv_head_of(config);
  std::string out;
  for (int l = 0; l < config.n_layer; ++l)
    for (int h = 0; h < config.n_head; ++h) {
      const size_t i = size_t(l) * size_t(config.n_head) + size_t(h);
      const analysis::HeadStats& s = a.stats[i];
      const analysis::HeadRoles& r = a.roles[i];
      std::string row = std::to_string(index) + "," + csv_field(id) + "," + std::to_string(l) + "," +
                        std::to_string(h) + "," + std::to_string(kv[size_t(h)]);
      for (const analysis::StatInfo& st : analysis::statistics_catalogue()) {
        if (st.kind == analysis::StatKind::kMean) row += "," + csv_number(s.*st.mean);
        if (st.kind == analysis::StatKind::kCount) row += "," + std::to_string(s.*st.count);
      }
      row += "," + csv_field(analysis::role_label(r.primary)) + "," + csv_number(r.primary.score) + "," +
             csv_field(analysis::role_label(r.secondary)) + "," + csv_number(r.secondary.score) + "," +
             csv_field(i < run.on_text.size() && level == Level::kToken ? run.on_text[i].links_text : "");
      out += row + "\n";
    }
  return out;
}

}  // namespace headscope
