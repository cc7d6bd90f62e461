// Version strings baked in at configure time.
#include "core/version.h"

namespace lockstep {
const char* Version() { return LOCKSTEP_VERSION; }
const char* GitHash() { return LOCKSTEP_GIT_HASH; }
}  // namespace lockstep
