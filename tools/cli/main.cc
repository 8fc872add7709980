// headscope — command-line entry point. Subcommands register themselves (commands.h); any
// headscope::Error they throw becomes a one-line message on stderr and exit code 2 (1 for a path
// that names a directory, FIFO or device: a wrong argument).
#include <cstdio>
#include <exception>
#include <string>

#include "cli/commands.h"
#include "cli/common.h"
#include "headscope/cpu.h"
#include "headscope/error.h"
#include "headscope/input.h"

int main(int argc, char** argv) {
  headscope::cli::use_passive_wait_policy(argv);
  // The kernels' instruction-set path (include/headscope/cpu.h); an unknown HEADSCOPE_ISA stops
  // every command here, before any work.
  std::string version = "headscope 0.1.0";
  try {
    version += std::string(" (kernels: ") + headscope::kernel_isa() + ")";
  } catch (const headscope::Error& e) {
    std::fprintf(stderr, "headscope: error: %s\n", e.what());
    return headscope::cli::kExitInput;
  }
  CLI::App app{"headscope — see what every attention head of a real transformer does"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version);
  headscope::cli::add_run_command(app);
  headscope::cli::add_atlas_command(app);
  headscope::cli::add_serve_command(app);
  headscope::cli::add_generate_command(app);
  headscope::cli::add_ablate_command(app);
  headscope::cli::add_patch_command(app);
  headscope::cli::add_grad_command(app);
  headscope::cli::add_composition_command(app);
  headscope::cli::add_headmap_command(app);
  headscope::cli::add_lens_command(app);
  headscope::cli::add_merge_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? headscope::cli::kExitOk : headscope::cli::kExitUsage;
  } catch (const headscope::NotAFileError& e) {  // a path argument that names no regular file
    std::fprintf(stderr, "headscope: error: %s\n", e.what());
    return headscope::cli::kExitUsage;
  } catch (const headscope::Error& e) {
    std::fprintf(stderr, "headscope: error: %s\n", headscope::cli::error_message(e).c_str());
    return headscope::cli::kExitInput;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "headscope: error: out of memory (try a shorter text)\n");
    return headscope::cli::kExitInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "headscope: internal error: %s\n", e.what());
    return 3;
  }
  return headscope::cli::kExitOk;
}
