// The acceptance rule, draft counters and adaptive draft length: one implementation shared by
// the engine's real speculation and every lab measurement, so the two cannot disagree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace lockstep::speculative {

// Drafts kept: the longest prefix of `drafts` equal to the target's own selections, where
// chosen[i] is the token the target selects after drafts[0..i) (chosen has drafts.size() + 1
// entries; chosen[accepted] is the bonus token emitted after the accepted drafts).
int AcceptedPrefix(std::span<const int32_t> drafts, std::span<const int32_t> chosen);

struct DraftStats {
  int64_t rounds = 0;  // rounds with at least one draft
  int64_t drafted = 0;
  int64_t accepted = 0;
  std::vector<int64_t> drafted_at;  // per draft position
  std::vector<int64_t> accepted_at;
  double rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  // Counts one verify round that drafted `n_draft` tokens and accepted `accepted` of them. When
  // the round ends generation after emitting `emitted` tokens (a stop token inside it), only
  // drafts that predicted an emitted token before the last one count: draft i predicts emitted
  // token i, and the last emitted token of a finished stream is never drafted (so a replay over
  // the emitted stream counts exactly the same; see lab accept).
  void Count(int n_draft, int accepted, int emitted, bool ended);
};

// Per-sequence draft length. Grows by one after a round that accepted every draft, shrinks by
// one after a round that accepted none, and pauses drafting when even one draft keeps failing:
// after two consecutive fruitless single-draft rounds it skips 4 rounds, doubling the pause each
// time up to 64, and a round that accepts anything resets it. A pure function of the sequence's
// own rounds, so replays see the same lengths and the output never depends on it (only speed).
class DraftLengthPolicy {
 public:
  DraftLengthPolicy() = default;
  DraftLengthPolicy(int k_max, bool adaptive) : k_max_(k_max), k_(k_max), adaptive_(adaptive) {}
  // Drafts to ask for this round (0: decode plainly this round).
  int Next();
  // Records the round that Next() sized.
  void Update(int n_draft, int accepted);
  int k() const { return k_; }

 private:
  int k_max_ = 0, k_ = 0;
  bool adaptive_ = false;
  int misses_ = 0;      // consecutive single-draft rounds that accepted nothing
  int pause_ = 0;       // rounds still to skip
  int next_pause_ = 4;  // length of the next pause
};

}  // namespace lockstep::speculative
