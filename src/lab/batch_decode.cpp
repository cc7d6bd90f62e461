// Multi-sequence decode: prefill rows of all prompts interleaved, then one row per sequence.
#include "lab/batch_decode.h"

#include <algorithm>

namespace lockstep::lab {
namespace {

struct Seq {
  size_t next_prompt = 0;  // next prompt row to prefill
  int32_t pos = 0;         // position of the token to choose next
  bool done = false;
  std::vector<int32_t> out;
};

}  // namespace

Expected<std::vector<std::vector<int32_t>>> DecodeBatch(
    const model::Model& model, const std::vector<std::vector<int32_t>>& prompts,
    const BatchDecodeOptions& opt) {
  if (prompts.empty()) return Status::Error("batch decode: no prompts");
  size_t longest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (prompts[i].empty()) return Status::Errorf("batch decode: prompt {} is empty", i);
    longest = std::max(longest, prompts[i].size());
  }
  const int n_seq = static_cast<int>(prompts.size());
  LS_ASSIGN_OR_RETURN(auto kv, model.NewKv(n_seq, static_cast<int>(longest) + opt.n_predict + 1,
                                           std::max(1, opt.prefill_rows)));
  std::vector<Seq> seqs(prompts.size());
  model::Batch batch;
  model::ForwardResult res;
  const auto choose = [&](size_t row_out, int s) {
    const int32_t tok = sample::Select(
        opt.sampling, seqs[s].pos,
        std::span<const float>(res.logits_row(row_out), static_cast<size_t>(res.n_vocab)));
    seqs[s].out.push_back(tok);
    const bool stop =
        std::find(opt.stop_tokens.begin(), opt.stop_tokens.end(), tok) != opt.stop_tokens.end();
    seqs[s].done = stop || static_cast<int>(seqs[s].out.size()) >= opt.n_predict;
  };
  // Prefill: round-robin rows across sequences so every forward mixes them.
  for (bool more = true; more;) {
    batch.Clear();
    more = false;
    for (bool added = true; added && batch.size() < opt.prefill_rows;) {
      added = false;
      for (int s = 0; s < n_seq && batch.size() < opt.prefill_rows; ++s) {
        Seq& q = seqs[s];
        if (q.next_prompt >= prompts[s].size()) continue;
        const bool last = q.next_prompt + 1 == prompts[s].size();
        batch.Add(prompts[s][q.next_prompt], static_cast<int32_t>(q.next_prompt), s, last);
        ++q.next_prompt;
        added = true;
      }
    }
    if (batch.size() == 0) break;
    LS_RETURN_IF_ERROR(model.Forward(batch, *kv, &res));
    for (size_t r = 0; r < res.rows.size(); ++r) {
      const int s = batch.seq[static_cast<size_t>(res.rows[r])];
      seqs[s].pos = static_cast<int32_t>(prompts[s].size());
      choose(r, s);
    }
    for (int s = 0; s < n_seq; ++s) more = more || seqs[s].next_prompt < prompts[s].size();
  }
  // Decode: one row per live sequence per forward.
  for (;;) {
    batch.Clear();
    for (int s = 0; s < n_seq; ++s)
      if (!seqs[s].done) batch.Add(seqs[s].out.back(), seqs[s].pos, s, true);
    if (batch.size() == 0) break;
    LS_RETURN_IF_ERROR(model.Forward(batch, *kv, &res));
    for (size_t r = 0; r < res.rows.size(); ++r) {
      const int s = batch.seq[static_cast<size_t>(res.rows[r])];
      ++seqs[s].pos;
      choose(r, s);
    }
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& q : seqs) out.push_back(std::move(q.out));
  return out;
}

}  // namespace lockstep::lab
