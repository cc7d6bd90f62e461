// `lockstep lab`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Lab(int, char**) {
  std::fprintf(stderr, "lockstep lab: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
