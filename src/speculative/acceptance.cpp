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

DraftStats DraftStats::FromRounds(std::vector<Round>* rounds, int64_t n_emitted, int k_max) {
  DraftStats st;
  st.drafted_at.assign(static_cast<size_t>(std::max(0, k_max)), 0);
  st.accepted_at.assign(static_cast<size_t>(std::max(0, k_max)), 0);
  size_t kept = 0;
  for (Round r : *rounds) {
    const int64_t predictable = std::max<int64_t>(0, n_emitted - 1 - r.start);
    r.drafted = static_cast<int>(std::min<int64_t>(r.drafted, predictable));
    r.accepted = std::min(r.accepted, r.drafted);
    if (r.drafted <= 0) continue;
    ++st.rounds;
    st.drafted += r.drafted;
    st.accepted += r.accepted;
    if (st.drafted_at.size() < static_cast<size_t>(r.drafted)) {
      st.drafted_at.resize(static_cast<size_t>(r.drafted), 0);
      st.accepted_at.resize(static_cast<size_t>(r.drafted), 0);
    }
    for (int j = 0; j < r.drafted; ++j) ++st.drafted_at[static_cast<size_t>(j)];
    for (int j = 0; j < r.accepted; ++j) ++st.accepted_at[static_cast<size_t>(j)];
    (*rounds)[kept++] = r;
  }
  rounds->resize(kept);
  return st;
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
