// KvLayerView's position-to-row maps that are not inline (backend/kv_view.h).
#include "backend/kv_view.h"

#include <algorithm>

namespace lockstep::backend {

void KvLayerView::Rows(int seq, int pos, int n, int64_t* rows) const {
  const int unit = ring > 0 ? ring : block;
  for (int c = 0; c < n;) {
    const int64_t first = Row(seq, pos + c);
    const int run = std::min(n - c, unit - (pos + c) % unit);
    for (int i = 0; i < run; ++i) rows[c + i] = first < 0 ? -1 : first + i;
    c += run;
  }
}

}  // namespace lockstep::backend
