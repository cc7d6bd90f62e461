// `lockstep quantize`: placeholder until its issue lands.
#include <cstdio>

#include "cli/commands.h"

namespace lockstep::cli {

int Quantize(int, char**) {
  std::fprintf(stderr, "lockstep quantize: not implemented yet\n");
  return 1;
}

}  // namespace lockstep::cli
