// `lockstep tokenize`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Tokenize(int, char**) {
  std::fprintf(stderr, "lockstep tokenize: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
