// A batch of token rows for one forward pass, from one or more sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;     // absolute position of each row in its sequence
  std::vector<int32_t> seq;     // sequence slot of each row
  std::vector<uint8_t> output;  // 1 where the caller wants logits (and hidden) for the row

  void Add(int32_t token, int32_t position, int32_t slot, bool want_output) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(slot);
    output.push_back(want_output ? 1 : 0);
  }
  int size() const { return static_cast<int>(tokens.size()); }
  void Clear() { tokens.clear(), pos.clear(), seq.clear(), output.clear(); }
};

}  // namespace lockstep::model
