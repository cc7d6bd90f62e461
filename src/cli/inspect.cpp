// `lockstep inspect`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Inspect(int, char**) {
  std::fprintf(stderr, "lockstep inspect: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
