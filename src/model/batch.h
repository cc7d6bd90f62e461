// A batch of token rows for one forward pass, from one or more sequences.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::model {

struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pos;     // absolute position of each row in its sequence
  std::vector<int32_t> seq;     // sequence slot of each row
  std::vector<int32_t> out_rows;  // rows whose logits (and hidden state) the caller wants, in order

  // Returns the row's index among the outputs (-1 when it is not an output).
  int Add(int32_t token, int32_t position, int32_t slot, bool want_output) {
    tokens.push_back(token);
    pos.push_back(position);
    seq.push_back(slot);
    if (!want_output) return -1;
    out_rows.push_back(size() - 1);
    return static_cast<int>(out_rows.size()) - 1;
  }
  int size() const { return static_cast<int>(tokens.size()); }
  // Keeps the capacity: a batch reused step after step allocates nothing.
  void Clear() { tokens.clear(), pos.clear(), seq.clear(), out_rows.clear(); }
};

}  // namespace lockstep::model
