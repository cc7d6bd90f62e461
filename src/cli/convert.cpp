// `lockstep convert`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Convert(int, char**) {
  std::fprintf(stderr, "lockstep convert: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
