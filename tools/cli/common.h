// headscope CLI — small helpers shared by the subcommands.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "headscope/headscope.h"
#include "headscope/pipeline.h"

namespace headscope::cli {

// OpenMP threads that wait for work sleep rather than spin (OMP_WAIT_POLICY=passive) unless the
// user set OMP_WAIT_POLICY or GOMP_SPINCOUNT. libgomp reads the variable when it is loaded, before
// main, so the process re-executes itself once with it set (nothing happens if that fails). On a
// shared machine spinning threads were 5–10× slower at two threads than one
// (docs/performance.md, "Generation step"); sleeping ones never lost to one thread there.
void use_passive_wait_policy(char** argv);

inline constexpr const char* kDefaultModelDir = "models/all-MiniLM-L6-v2";
// $HEADSCOPE_MODEL if set, else kDefaultModelDir.
std::string default_model_dir();
// Whole file as bytes ('-' = stdin), through headscope::read_input_file: at most 16 MiB, and only a
// regular file (or a pipe on stdin); NotAFileError or Error naming the path otherwise.
std::string read_text_file(const std::string& path);
// Writes `contents` to `path` (a --json or --csv output); Error when it cannot.
void write_file(const std::string& path, const std::string& contents);
// The --strict flag of every subcommand that loads a model: refuse weights with NaN/Inf.
void add_load_flags(CLI::App* command, LoadOptions& options);
// Model::load, then each of the model's load warnings on stderr as "headscope: warning: ...".
std::unique_ptr<Model> load_model(const std::string& path, const LoadOptions& options);
// --data, --evidence-cache, --no-corpus and --measure-corpus: where the gold data and the evidence
// cache are, and whether to measure the evidence when it is not cached (off by default).
void add_evidence_flags(CLI::App* command, EvidenceOptions& options, bool& no_corpus);
// headscope::corpus_evidence with its progress on stderr (measured only when not cached), and one
// line saying where the evidence came from.
CorpusEvidence load_corpus_evidence(const Model& model, const std::string& model_path, EvidenceOptions options,
                                    bool quiet = false);
// The error's message with its remedy (headscope::Remedy) said as the flag that asks for it.
std::string error_message(const Error& e);

}  // namespace headscope::cli
