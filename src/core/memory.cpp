// Physical memory from sysconf.
#include "core/memory.h"

#include <unistd.h>

namespace lockstep {

size_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

}  // namespace lockstep
