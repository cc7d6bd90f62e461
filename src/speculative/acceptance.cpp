// Acceptance prefix, draft counters with the stop-token cut, adaptive draft length.
#include "speculative/acceptance.h"

#include <algorithm>

namespace lockstep::speculative {

int AcceptedPrefix(std::span<const int32_t> drafts, std::span<const int32_t> chosen) {
  int accepted = 0;
  while (static_cast<size_t>(accepted) < drafts.size() &&
         static_cast<size_t>(accepted) < chosen.size() && chosen[accepted] == drafts[accepted])
    ++accepted;
  return accepted;
}

void DraftStats::Count(int n_draft, int accepted, int emitted, bool ended) {
  if (ended) {
    n_draft = std::min(n_draft, emitted - 1);
    accepted = std::min(accepted, emitted - 1);
  }
  if (n_draft <= 0) return;
  ++rounds;
  drafted += n_draft;
  accepted = std::max(0, accepted);
  this->accepted += accepted;
  if (drafted_at.size() < static_cast<size_t>(n_draft)) {
    drafted_at.resize(static_cast<size_t>(n_draft), 0);
    accepted_at.resize(static_cast<size_t>(n_draft), 0);
  }
  for (int j = 0; j < n_draft; ++j) ++drafted_at[static_cast<size_t>(j)];
  for (int j = 0; j < accepted; ++j) ++accepted_at[static_cast<size_t>(j)];
}

int DraftLengthPolicy::Next() {
  if (!adaptive_) return k_max_;
  if (pause_ > 0) {
    --pause_;
    return 0;
  }
  return k_;
}

void DraftLengthPolicy::Update(int n_draft, int accepted) {
  if (!adaptive_ || n_draft <= 0) return;
  if (accepted > 0) {
    misses_ = 0;
    next_pause_ = 4;
  }
  if (accepted == n_draft) {
    k_ = std::min(k_max_, k_ + 1);
  } else if (accepted == 0) {
    k_ = std::max(1, k_ - 1);
    if (n_draft == 1 && ++misses_ >= 2) {
      pause_ = next_pause_;
      next_pause_ = std::min(64, 2 * next_pause_);
      misses_ = 0;
    }
  }
}

}  // namespace lockstep::speculative
