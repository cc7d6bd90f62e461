// `lockstep detokenize`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Detokenize(int, char**) {
  std::fprintf(stderr, "lockstep detokenize: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
