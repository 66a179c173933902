// kiln-run: runs a .kiln artifact with the runtime alone (no compiler, LLVM or NVRTC).
#include "tools/kiln/flags.h"
#include "tools/kiln/run_cli.h"

#include <cstdio>
#include <new>

int main(int argc, char** argv) {
  // The last resort for an allocation that is not checked where it is made (see kiln's main).
  kiln::cli::enter_user_directory();
  try {
    return kiln::cli::run_artifact("kiln-run", std::span<char* const>(argv + 1, static_cast<size_t>(argc - 1)));
  } catch (const std::bad_alloc&) {
    std::fputs("kiln-run: error: out of memory\n", stderr);
    return 1;
  }
}
