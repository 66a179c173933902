// kiln-run: runs a .kiln artifact with the runtime alone (no compiler, LLVM or NVRTC).
#include "tools/kiln/flags.h"
#include "tools/kiln/run_cli.h"

int main(int argc, char** argv) {
  kiln::cli::enter_user_directory();
  return kiln::cli::run_guarded("kiln-run", [&] {
    return kiln::cli::run_artifact("kiln-run", std::span<char* const>(argv + 1, static_cast<size_t>(argc - 1)));
  });
}
