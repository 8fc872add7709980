#include "cli/common.h"
#include <fstream>

#include "headscope/input.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <unistd.h>

namespace headscope::cli {

void use_passive_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: run on with the default policy
}

std::string default_model_dir() {
  const char* env = std::getenv("HEADSCOPE_MODEL");
  return env != nullptr && *env != '\0' ? env : kDefaultModelDir;
}

std::string read_text_file(const std::string& path) { return read_input_file(path, "text file"); }

namespace {

// A budget of 0 bytes would refuse everything (and 0 is what LoadOptions reads as "no budget
// given"), so --max-memory 0 is refused instead of silently meaning "what the machine has".
const CLI::Validator kNonZeroSize(
    [](const std::string& value) -> std::string {
      if (value.find_first_not_of('0') != std::string::npos) return {};
      return "0 bytes leaves nothing to run with; give a size such as 2G, or leave the flag out to use what the "
             "machine has available";
    },
    "SIZE > 0");

}  // namespace

void add_load_flags(CLI::App* command, LoadOptions& options) {
  command->add_flag("--strict", options.strict,
                    "Refuse a model whose weights hold NaN or Inf (by default it loads with a warning)");
  command
      ->add_option("--max-memory", options.run_memory_budget,
                   "Memory one run may use, e.g. 2G or 1500M (default: what the machine has available, less a "
                   "margin); a request over it is refused with the estimate before anything is allocated")
      ->transform(CLI::AsSizeValue(false))
      ->check(kNonZeroSize);
  command
      ->add_option("--max-load-memory", options.load_memory_budget,
                   "Memory the model's weights may take once loaded, e.g. 6G (default: what the machine has available, "
                   "less a margin); a model over it is refused with the estimate before any weight is read")
      ->transform(CLI::AsSizeValue(false))
      ->check(kNonZeroSize);
}

void add_evidence_flags(CLI::App* command, EvidenceOptions& options, bool& no_corpus) {
  command->add_option("--data", options.data_dir,
                      "Gold data for the corpus evidence (ud/*.conllu, gap/*.tsv; default $HEADSCOPE_DATA, else "
                      "../shared/data); without it roles come from the probe and the text");
  command->add_option("--evidence-cache", options.cache_dir,
                      "Folder of the cached corpus evidence (default $HEADSCOPE_CACHE_DIR, $XDG_CACHE_HOME/headscope "
                      "or ~/.cache/headscope)");
  command->add_flag("--no-corpus", no_corpus,
                    "Roles from the text and the probe only (no syntactic or coreference roles)");
  command->add_flag("--measure-corpus", options.measure,
                    "Measure the corpus evidence when it is not cached yet (a few minutes on two cores for the default "
                    "model; `make evidence` does it after set-up); otherwise an uncached model gets no corpus roles");
}

CorpusEvidence load_corpus_evidence(const Model& model, const std::string& model_path, EvidenceOptions options,
                                    bool quiet) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string last_stage;
  if (!quiet)
    options.progress = [&](std::string_view stage, int64_t done, int64_t total) {
      if (stage != last_stage) {
        std::fprintf(stderr, "%sheadscope: measuring corpus evidence (once per model): %.*s",
                     last_stage.empty() ? "" : "\n", static_cast<int>(stage.size()), stage.data());
        last_stage = std::string(stage);
      }
      if (done == total || done % 50 == 0)
        std::fprintf(stderr, "\r\33[Kheadscope: measuring corpus evidence (once per model): %.*s %lld/%lld",
                     static_cast<int>(stage.size()), stage.data(), static_cast<long long>(done),
                     static_cast<long long>(total));
    };
  CorpusEvidence e = corpus_evidence(model, model_path, options);
  if (e.missing) e.source += ": run `make evidence` or pass --measure-corpus";
  if (!last_stage.empty()) std::fprintf(stderr, "\n");
  if (!quiet && !e.from_cache)  // a cached read is instant and says nothing new; stderr stays for errors
    std::fprintf(stderr, "headscope: corpus evidence measured in %.1f s: %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), e.source.c_str());
  return e;
}

std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> model = Model::load(path, options);
  for (const std::string& w : model->warnings()) std::fprintf(stderr, "headscope: warning: %s\n", w.c_str());
  return model;
}

std::string error_message(const Error& e) {
  std::string message = e.what();
  switch (e.remedy()) {
    case Remedy::kNone:
      break;
    case Remedy::kTruncate:
      message += "; pass --truncate to cut it";
      break;
    case Remedy::kStreamMaps:
      message += "; pass --maps stream";
      break;
    case Remedy::kDenseMaps:
      message += "; pass --maps dense (or analyse a shorter text)";
      break;
    case Remedy::kShorterText:
      message += "; shorten the text, or allow more memory with --max-memory";
      break;
  }
  return message;
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path);
  if (!out || !(out << contents)) throw Error(path + ": cannot write");
}

}  // namespace headscope::cli
