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

// One verify round as it happened: `start` tokens were emitted before it (the last of them is
// the round's input), `drafted` drafts were verified and `accepted` of them kept. Draft j
// predicts emitted token start + j.
struct Round {
  int64_t start = 0;
  int drafted = 0, accepted = 0;
};

struct DraftStats {
  int64_t rounds = 0;  // rounds with at least one draft
  int64_t drafted = 0;
  int64_t accepted = 0;
  std::vector<int64_t> drafted_at;  // per draft position
  std::vector<int64_t> accepted_at;
  double rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  // The counters of a finished stream of `n_emitted` tokens. A draft counts only when the token
  // it predicts was emitted and is not the stream's last one: drafts past a stop token predicted
  // nothing that exists, and a replay along the emitted stream (lab accept) never drafts its
  // last token, so both count exactly the same. Clips `rounds` to those drafts and drops
  // rounds left with none.
  static DraftStats FromRounds(std::vector<Round>* rounds, int64_t n_emitted, int k_max);
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
