// `headscope run` — one text through one model: tokens, a per-head table, and optional JSON /
// .npy files with everything that was captured (schema: docs/run-json.md, docs/schema.md).
// The analysis is the pipeline's (headscope/pipeline.h), with the model's induction probe, so a
// head gets the same role here as in the explorer.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/headscope.h"
#include "headscope/json.h"
#include "headscope/limits.h"
#include "headscope/npy.h"
#include "headscope/pipeline.h"

namespace headscope::cli {
namespace {

struct RunArgs {
  LoadOptions load;
  std::string model = default_model_dir();
  std::string text;
  std::string text_file;
  bool truncate = false;
  std::string json_path;
  bool json_attention = false;
  std::string npy_dir;
  int threads = 0;
  bool quiet = false;
  bool queries_keys = false;
  bool words = false;
  bool no_probe = false;  // skip the induction probe (~1 s on the default model): no induction roles
  EvidenceOptions evidence = [] {
    EvidenceOptions e;
    e.measure = false;  // --measure-corpus
    return e;
  }();
  bool no_corpus = false;  // roles without the cached corpus evidence
  AnalyseOptions::Maps maps = AnalyseOptions::Maps::kAuto;
  int cells = 256;
  std::vector<int> tile;  // layer head q0 q1 k0 k1
  std::string dla_path;   // direct logit attribution table (.csv: CSV, else JSON)
  int32_t dla_contrast = -1;
  std::string corpus_path;  // --corpus: many texts, one record per text × head into out_path
  std::string out_path;
  std::string stats_path, partial_path;  // --corpus: the corpus's statistics, and its mergeable partial
  int64_t batch_tokens = CorpusOptions{}.batch_tokens;
  int64_t batch_texts = CorpusOptions{}.batch_texts;
};

// Direct logit attribution as CSV, one part per line:
//   position,target,contrast,part,layer,head,value   (layer/head empty where they do not apply)
void write_dla_csv(const std::string& path, const std::vector<analysis::LogitAttribution>& rows) {
  std::ofstream out(path);
  if (!out) throw Error(path + ": cannot open for writing");
  out << "position,target,contrast,part,layer,head,value\n";
  out.precision(9);
  for (const analysis::LogitAttribution& a : rows) {
    const std::string key = std::to_string(a.position) + "," + std::to_string(a.target) + "," +
                            (a.contrast >= 0 ? std::to_string(a.contrast) : "") + ",";
    const auto line = [&](const char* part, const std::string& layer, const std::string& head, double v) {
      out << key << part << "," << layer << "," << head << "," << v << "\n";
    };
    const size_t L = a.attention_bias.size(), H = L > 0 ? a.heads.size() / L : 0;
    line("logit", "", "", a.logit);
    line("embeddings", "", "", a.embeddings);
    for (size_t l = 0; l < L; ++l) {
      for (size_t h = 0; h < H; ++h) line("head", std::to_string(l), std::to_string(h), a.heads[l * H + h]);
      line("attention_bias", std::to_string(l), "", a.attention_bias[l]);
      line("mlp", std::to_string(l), "", a.mlp[l]);
    }
    line("final_norm_bias", "", "", a.final_norm_bias);
    line("rest", "", "", a.rest);
  }
}

// A progress bar on stderr while the layers of a long text are analysed (a terminal only: logs get
// nothing).
std::function<void(int, int)> progress_bar(int T) {
  if (!isatty(2) || T < 1024) return nullptr;
  return [](int done, int layers) {
    const int width = 30, filled = done * width / layers;
    std::fprintf(stderr, "\r  layer %3d/%d [%s%s]", done, layers, std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(width - filled), '.').c_str());
    if (done == layers) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

// The overviews of every head as arrays: sums and maxima [L, H, C, C], attention received [L, H, T],
// mean weight per offset [L, H, 2T − 1].
void write_overviews(const std::string& dir, const ModelConfig& c, const RunAnalysis& run) {
  const int64_t L = c.n_layer, H = c.n_head, T = run.T(), C = run.overviews.front().cells;
  Tensor sum({L, H, C, C}), max({L, H, C, C}), received({L, H, T}), offsets({L, H, 2 * T - 1});
  for (size_t i = 0; i < run.overviews.size(); ++i) {
    const analysis::HeadOverview& o = run.overviews[i];
    std::copy(o.sum.begin(), o.sum.end(), sum.ptr() + int64_t(i) * C * C);
    std::copy(o.max.begin(), o.max.end(), max.ptr() + int64_t(i) * C * C);
    std::copy(o.received.begin(), o.received.end(), received.ptr() + int64_t(i) * T);
    std::copy(o.offset_mass.begin(), o.offset_mass.end(), offsets.ptr() + int64_t(i) * (2 * T - 1));
  }
  write_npy(dir + "/overview_sum.npy", sum);
  write_npy(dir + "/overview_max.npy", max);
  write_npy(dir + "/received.npy", received);
  write_npy(dir + "/offset_mass.npy", offsets);
}

// The model's refusals of --dla and --dla-contrast, before anything runs.
void check_dla_args(const RunArgs& a, const ModelConfig& c) {
  if (!a.dla_path.empty() && !c.causal)
    throw Error("--dla: " + c.name +
                " is not a causal model; direct logit attribution needs a decoder (Llama, GPT-2, ...)");
  if (a.dla_contrast >= c.vocab_size)
    throw Error("--dla-contrast " + std::to_string(a.dla_contrast) + " is outside the vocabulary (0.." +
                std::to_string(c.vocab_size - 1) + ")");
}

// What the flags ask the pipeline for: captures, maps, overview resolution and corpus evidence.
AnalyseOptions analyse_options(const RunArgs& a, const CorpusEvidence& corpus, int64_t T) {
  AnalyseOptions options;
  options.corpus = corpus.heads;
  // Head outputs, contributions and hidden states only for --npy ([L, H, T, d_model] is the
  // largest tensor of a long run after the maps).
  if (a.npy_dir.empty()) options.capture = CaptureOptions::attention_only();
  options.capture.queries_keys = a.queries_keys;
  options.maps = a.maps;
  options.overview_cells = a.cells;
  options.progress = progress_bar(int(T));
  return options;
}

// Everything asked for must fit before anything runs: say what would.
void check_memory(const RunArgs& a, const Model& model, int64_t T, const AnalyseOptions& options) {
  const AnalyseMemory need = analyse_memory(model, T, options);
  if (!a.npy_dir.empty() && need.streamed && a.maps == AnalyseOptions::Maps::kAuto)
    std::fprintf(stderr,
                 "headscope: %lld tokens: the attention maps are streamed (dense ones would need %llu MiB), so --npy "
                 "writes the overviews and any --tile; --maps dense keeps them all\n",
                 static_cast<long long>(T), static_cast<unsigned long long>(need.dense_bytes >> 20));
  if (a.json_attention && need.streamed)
    throw Error("--json-attention needs the dense maps of all " + std::to_string(T) +
                " tokens: add --maps dense (or use --npy, which writes the overviews and tiles)");
}

// The tokens (and words), one line per head, and the corpus roles this text shows.
void print_run(const RunArgs& a, const ModelConfig& c, const RunAnalysis& analysed, Level level) {
  const int T = analysed.capture.T, L = c.n_layer, H = c.n_head;
  std::printf("model %s: %d layers x %d heads (d_model %d, d_head %d)\n", c.name.c_str(), L, H, c.d_model, c.d_head);
  std::printf("%d tokens%s:", T, analysed.encoding.truncated ? " (truncated)" : "");
  for (const Token& t : analysed.encoding.tokens) std::printf(" %s", token_display(analysed.text, t).c_str());
  if (a.words) {
    const std::vector<WordUnit> units = word_units(analysed);
    std::printf("\n%zu words (statistics below are word-level):", units.size());
    for (const WordUnit& u : units) std::printf(" %s", u.text.c_str());
  }
  std::printf("\n\n%-5s %-4s %8s %6s %6s  %-22s %s\n", "layer", "head", "entropy", "norm", "max", "pattern",
              "evidence");
  const std::vector<analysis::HeadStats>& stats = analysed.analysis(level).stats;
  const std::vector<analysis::HeadRoles>& roles = analysed.analysis(level).roles;
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const auto& s = stats[size_t(l * H + h)];
      const auto& r = roles[size_t(l * H + h)];
      const std::string name = analysis::role_label(r.primary);
      std::printf("%-5d %-4d %8.3f %6.3f %6.3f  %-22s %s\n", l, h, s.entropy_bits, s.entropy_norm, s.max_attention,
                  name.c_str(), r.primary.evidence.c_str());
    }
  // Heads whose corpus role shows on this text, with the links that show it.
  bool header = false;
  for (size_t i = 0; i < analysed.on_text.size(); ++i) {
    const analysis::TextEvidence& t = analysed.on_text[i];
    if (!t.recognised) continue;
    if (!header)
      std::printf("\ncorpus roles seen on this text (weights without %s, renormalised):\n",
                  analysed.sink_columns.c_str());
    header = true;
    std::printf("  L%zuH%zu %s: %s\n", i / size_t(H), i % size_t(H), analysis::role_info(*t.recognised).name.data(),
                t.recognised_text.c_str());
  }
}

// The dense maps and their derived views (attentions, norm_weighted, rollout), each within its
// budget (limits.h); past one a note, not a failure of the whole run (value_norms.npy still gives
// the norm-weighted maps head by head).
void write_dense_npy(const std::string& dir, const RunAnalysis& analysed) {
  const Capture& cap = analysed.capture;
  write_npy(dir + "/attentions.npy", cap.attention);
  const uint64_t weighted_bytes = uint64_t(cap.attention.numel()) * sizeof(float);
  if (weighted_bytes <= limits::kMaxNormWeightedBytes)
    write_npy(dir + "/norm_weighted.npy", norm_weighted_attention(analysed));
  else
    std::fprintf(stderr, "headscope: norm_weighted.npy not written: %llu MiB is over its limit of %llu MiB\n",
                 static_cast<unsigned long long>(weighted_bytes >> 20),
                 static_cast<unsigned long long>(limits::kMaxNormWeightedBytes >> 20));
  if (cap.T <= limits::kMaxRolloutTokens)
    write_npy(dir + "/rollout.npy", attention_rollout(analysed));
  else
    std::fprintf(stderr, "headscope: rollout.npy not written: %d tokens is over its limit of %lld\n", cap.T,
                 static_cast<long long>(limits::kMaxRolloutTokens));
}

// --npy: every captured tensor and the overviews as .npy files, and tokens.json.
void write_npy_dir(const RunArgs& a, const Model& model, const RunAnalysis& analysed) {
  const Capture& cap = analysed.capture;
  std::filesystem::create_directories(a.npy_dir);
  if (!analysed.streamed) write_dense_npy(a.npy_dir, analysed);
  write_npy(a.npy_dir + "/value_norms.npy", cap.value_norms);
  write_overviews(a.npy_dir, model.config(), analysed);
  if (!a.tile.empty()) {
    const std::vector<int>& t = a.tile;
    write_npy(a.npy_dir + "/tile.npy", attention_tile(model, analysed, t[0], t[1], t[2], t[3], t[4], t[5]));
  }
  write_npy(a.npy_dir + "/head_outputs.npy", cap.head_outputs);
  write_npy(a.npy_dir + "/contributions.npy", cap.contributions);
  write_npy(a.npy_dir + "/hidden_states.npy", cap.hidden_states);
  if (a.queries_keys) {
    write_npy(a.npy_dir + "/queries.npy", cap.queries);
    write_npy(a.npy_dir + "/keys.npy", cap.keys);
  }
  std::ofstream(a.npy_dir + "/tokens.json") << nlohmann::json(analysed.encoding).dump(1) << "\n";
}

// --dla: the direct logit attribution of every position, CSV or JSON by the file's extension.
void write_dla(const RunArgs& a, const Model& model, const Encoding& enc) {
  const std::vector<analysis::LogitAttribution> dla = attribute_logits(model, enc, {a.dla_contrast});
  if (a.dla_path.ends_with(".csv")) {
    write_dla_csv(a.dla_path, dla);
    return;
  }
  std::ofstream out(a.dla_path);
  if (!out) throw Error(a.dla_path + ": cannot open for writing");
  out << dla_json(model.config(), enc, dla).dump() << "\n";
}

// --json: the run document (docs/run-json.md), with the attention tensor under --json-attention.
void write_run_json(const RunArgs& a, const ModelConfig& c, const RunAnalysis& analysed, Level level) {
  nlohmann::json j = run_json(c, analysed, level);
  if (a.json_attention) {
    const Tensor& attention = analysed.capture.attention;
    j["attention"] = {{"shape", attention.shape}, {"dtype", "float32"}, {"data", attention.data}};
  }
  std::ofstream out(a.json_path);
  if (!out) throw Error(a.json_path + ": cannot open for writing");
  out << j.dump() << "\n";
}

void run(const RunArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const std::string text = a.text_file.empty() ? a.text : read_text_file(a.text_file);
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  Encoding encoding = model->encode(text, a.truncate);
  if (encoding.size() == 0) throw Error("the text produced no tokens");
  check_dla_args(a, c);
  const std::vector<analysis::ProbeEvidence> probe =
      a.no_probe ? std::vector<analysis::ProbeEvidence>{} : headscope::probe(*model);
  CorpusEvidence corpus;
  if (!a.no_corpus) corpus = load_corpus_evidence(*model, a.model, a.evidence, a.quiet);
  const int64_t T = int64_t(encoding.size());
  const AnalyseOptions options = analyse_options(a, corpus, T);
  check_memory(a, *model, T, options);
  // Statistics and roles over tokens or (--words) over words: attention to a word is the sum over
  // its pieces, from a word the mean (docs/metrics.md).
  const RunAnalysis analysed = analyse(*model, text, std::move(encoding), probe, options);
  const Level level = a.words ? Level::kWord : Level::kToken;
  if (!a.quiet) print_run(a, c, analysed, level);
  if (!a.npy_dir.empty()) write_npy_dir(a, *model, analysed);
  if (!a.dla_path.empty()) write_dla(a, *model, analysed.encoding);
  if (!a.json_path.empty()) write_run_json(a, c, analysed, level);
}

// ---- --corpus: every text of a file, in packed passes, one record per text × head ----

// "\r 120/2000 texts · 3 failed · 85.3 texts/s · ETA 22 s" on stderr, after every pass.
std::function<void(const CorpusProgress&)> corpus_progress_bar() {
  return [](const CorpusProgress& p) {
    std::fprintf(stderr, "\r\33[Kheadscope: %lld/%lld texts · %lld failed · %.1f texts/s · ETA %.0f s",
                 static_cast<long long>(p.done), static_cast<long long>(p.total), static_cast<long long>(p.failed),
                 p.texts_per_second(), p.eta_seconds());
  };
}

// Where the records go: JSON Lines, or CSV when the name ends in .csv; "-" is stdout.
class CorpusWriter {
 public:
  explicit CorpusWriter(const std::string& path) : csv_(path.size() > 4 && path.ends_with(".csv")) {
    if (path != "-") {
      file_.open(path, std::ios::binary);
      if (!file_) throw Error(path + ": cannot open for writing");
    }
    if (csv_) out() << corpus_csv_header();
  }
  void text(const ModelConfig& c, size_t index, const std::string& id, const RunAnalysis& run, Level level) {
    if (csv_) {
      out() << corpus_csv_rows(c, index, id, run, level);
      return;
    }
    for (int l = 0; l < c.n_layer; ++l)
      for (int h = 0; h < c.n_head; ++h) out() << corpus_head_json(c, index, id, run, level, l, h).dump() << '\n';
  }
  void failure(const CorpusFailure& f) {  // JSON Lines keep a record of every text; CSV rows are heads only
    if (!csv_) out() << nlohmann::json{{"text", f.index}, {"id", f.id}, {"error", f.error}}.dump() << '\n';
  }
  void close() {
    out().flush();
    if (!out()) throw Error("writing the corpus records failed (disk full?)");
  }

 private:
  std::ostream& out() { return file_.is_open() ? static_cast<std::ostream&>(file_) : std::cout; }
  bool csv_;
  std::ofstream file_;
};

// --stats (JSON, docs/corpus.md) and --partial (CBOR, for `headscope merge`).
void write_corpus_stats(const analysis::CorpusStats& stats, const std::string& stats_path,
                        const std::string& partial_path) {
  if (!stats_path.empty()) write_file(stats_path, corpus_stats_json(stats).dump() + "\n");
  if (!partial_path.empty()) write_file(partial_path, stats.to_bytes());
}

void run_corpus(const RunArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const std::vector<CorpusText> texts = read_corpus(a.corpus_path);
  auto model = load_model(a.model, a.load);
  const ModelConfig& c = model->config();
  const std::vector<analysis::ProbeEvidence> probe =
      a.no_probe ? std::vector<analysis::ProbeEvidence>{} : headscope::probe(*model);
  CorpusEvidence evidence;
  if (!a.no_corpus) evidence = load_corpus_evidence(*model, a.model, a.evidence, a.quiet);
  CorpusOptions o;
  o.analyse.corpus = evidence.heads;
  o.truncate = a.truncate;
  o.batch_tokens = a.batch_tokens;
  o.batch_texts = a.batch_texts;
  const bool bar = !a.quiet && isatty(STDERR_FILENO);
  if (bar) o.progress = corpus_progress_bar();
  std::optional<CorpusWriter> writer;
  if (!a.out_path.empty()) writer.emplace(a.out_path);
  o.on_failure = [&](const CorpusFailure& f) {
    std::fprintf(stderr, "%sheadscope: %s: %s\n", bar ? "\r\33[K" : "", f.id.c_str(), f.error.c_str());
    if (writer) writer->failure(f);
  };
  const Level level = a.words ? Level::kWord : Level::kToken;
  analysis::CorpusStats stats(c.name, c.n_layer, c.n_head, c.n_kv_head);
  const CorpusSummary s =
      analyse_corpus(*model, texts, probe, o, [&](size_t i, const CorpusText& t, const RunAnalysis& run) {
        if (writer) writer->text(c, i, t.id, run, level);
        const LevelAnalysis& la = run.analysis(level);
        stats.add(la.sums, la.stats, la.roles, run.T());
      });
  if (writer) writer->close();
  write_corpus_stats(stats, a.stats_path, a.partial_path);
  const CorpusProgress& p = s.progress;
  std::fprintf(stderr, "%sheadscope: %lld texts (%lld tokens) in %.2f s: %.1f texts/s, %.0f tokens/s; %lld failed\n",
               bar ? "\r\33[K" : "", static_cast<long long>(p.done), static_cast<long long>(p.tokens), p.seconds,
               p.texts_per_second(), p.seconds > 0 ? double(p.tokens) / p.seconds : 0.0,
               static_cast<long long>(p.failed));
  if (p.total > 0 && p.failed == p.total) throw Error("no text of " + a.corpus_path + " could be analysed");
}

// --corpus and the options that go with it.
CLI::Option* add_corpus_options(CLI::App* cmd, RunArgs& args) {
  auto* corpus_opt = cmd->add_option(
      "--corpus", args.corpus_path,
      "Analyse every text of this file (one per line; JSON Lines with \"text\" and \"id\" when it ends in .jsonl; "
      "a treebank when it ends in .conllu), many texts per forward pass, and write one record per text x head to "
      "--out (docs/corpus.md)");
  cmd->add_option("--out,-o", args.out_path,
                  "With --corpus: the records, CSV when it ends in .csv, else JSON Lines ('-': stdout)");
  cmd->add_option(
      "--stats", args.stats_path,
      "With --corpus: every head's statistics over the whole corpus, its role counts and histograms (JSON)");
  cmd->add_option(
      "--partial", args.partial_path,
      "With --corpus: the same as a mergeable partial result (CBOR; combine shards with `headscope merge`)");
  cmd->add_option("--batch-tokens", args.batch_tokens, "With --corpus: tokens per forward pass (texts packed up to it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--batch-texts", args.batch_texts, "With --corpus: texts per forward pass at most")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  return corpus_opt;
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a text through a model and show what every head does");
  add_load_flags(cmd, args->load);
  cmd->add_option("--model,-m", args->model,
                  "Hugging Face model directory (default: $HEADSCOPE_MODEL or " + std::string(kDefaultModelDir) + ")");
  auto* text_opt = cmd->add_option("--text,-t", args->text, "The text to analyse");
  auto* file_opt = cmd->add_option("--file,-f", args->text_file, "Read the text from a file ('-' for stdin)");
  text_opt->excludes(file_opt);
  CLI::Option* corpus_opt = add_corpus_options(cmd, *args);
  corpus_opt->excludes(text_opt)->excludes(file_opt);
  cmd->add_flag("--truncate", args->truncate, "Cut texts longer than the model allows instead of failing");
  cmd->add_option("--json", args->json_path, "Write tokens, per-head statistics and roles as JSON (docs/run-json.md)");
  cmd->add_flag("--json-attention", args->json_attention, "Also put the attention tensor into the JSON file");
  cmd->add_option("--npy", args->npy_dir,
                  "Write attentions.npy, norm_weighted.npy, rollout.npy (dense maps), value_norms.npy, "
                  "overview_sum/max.npy, received.npy, offset_mass.npy, "
                  "head_outputs.npy, contributions.npy, hidden_states.npy and tokens.json into this directory "
                  "(queries.npy and keys.npy with --qk)");
  cmd->add_option("--maps", args->maps,
                  "How attention maps are held: dense (all [L, H, T, T] maps kept, needed for attentions.npy), stream "
                  "(handed to the statistics block by block; memory grows with T, not T²) or auto (dense while they "
                  "fit in 512 MiB)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, AnalyseOptions::Maps>(maps_names().begin(), maps_names().end())));
  cmd->add_option("--overview-cells", args->cells, "Resolution of each head's pooled overview map (with --npy)")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--tile", args->tile,
                  "With --npy: write tile.npy, one head's exact attention: LAYER HEAD Q0 Q1 K0 K1 (rows Q0..Q1-1, "
                  "keys K0..K1-1)")
      ->expected(6);
  cmd->add_option("--dla", args->dla_path,
                  "Decoders: write the direct logit attribution of every position (the next token's logit split "
                  "into embeddings, heads, MLPs; docs/run-json.md) to this file, CSV when it ends in .csv, else JSON");
  cmd->add_option("--dla-contrast", args->dla_contrast,
                  "With --dla: also attribute logit(next token) - logit(this token id) at every position")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--words", args->words, "Statistics and roles over words instead of tokens (pieces merged)");
  add_evidence_flags(cmd, args->evidence, args->no_corpus);
  cmd->add_flag("--no-probe", args->no_probe,
                "Skip the induction probe (about 1 s per model): faster, but no head is labelled induction or "
                "duplicate token, and labels can then differ from the explorer's");
  cmd->add_flag("--qk", args->queries_keys,
                "Also capture each head's queries and keys (queries.npy, keys.npy with --npy)");
  cmd->add_option("--threads", args->threads, "Worker threads (default: all cores)")->check(CLI::Range(1, 1024));
  cmd->add_flag("--quiet,-q", args->quiet, "Print nothing on stdout (with --json / --npy)");
  cmd->callback([args, text_opt, file_opt, corpus_opt] {
    if (corpus_opt->count() > 0) {
      if (args->out_path.empty() && args->stats_path.empty() && args->partial_path.empty())
        throw CLI::RequiredError("--out, --stats or --partial (with --corpus)");
      return run_corpus(*args);
    }
    if (text_opt->count() == 0 && file_opt->count() == 0) throw CLI::RequiredError("--text, --file or --corpus");
    run(*args);
  });
}

}  // namespace headscope::cli
