// What the machine can hold: checked before large allocations so that an impossible size is a
// clear error instead of std::bad_alloc or the OOM killer.
#pragma once

#include <cstddef>

namespace lockstep {

// Physical memory of this machine in bytes (0 when unknown).
size_t PhysicalMemoryBytes();

}  // namespace lockstep
