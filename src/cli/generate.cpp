// `lockstep generate`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Generate(int, char**) {
  std::fprintf(stderr, "lockstep generate: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
