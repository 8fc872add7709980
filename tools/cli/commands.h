// headscope CLI — each subcommand lives in its own file and registers itself on the app.
// The CLI is a thin translator: parse arguments into native types, call the core, format.
#pragma once
#include <CLI/CLI.hpp>

namespace headscope::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;  // bad command-line arguments (CLI11 prints help)
inline constexpr int kExitInput = 2;  // bad input: model files, text, data files

void add_run_command(CLI::App& app);       // run_command.cc
void add_atlas_command(CLI::App& app);     // atlas_command.cc
void add_serve_command(CLI::App& app);     // tools/server/serve_command.cc
void add_generate_command(CLI::App& app);  // generate_command.cc
void add_ablate_command(CLI::App& app);    // ablate_command.cc
void add_patch_command(CLI::App& app);     // patch_command.cc
void add_composition_command(CLI::App& app);
void add_headmap_command(CLI::App& app);
void add_lens_command(CLI::App& app);
void add_merge_command(CLI::App& app);  // merge_command.cc
void add_grad_command(CLI::App& app);   // grad_command.cc: grad and saliency

}  // namespace headscope::cli
