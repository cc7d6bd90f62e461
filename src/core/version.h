// lockstep's version and the git commit it was built from (kept in one translation unit so a
// new commit rebuilds one file, not the library).
#pragma once

namespace lockstep {
const char* Version();
const char* GitHash();
}  // namespace lockstep
