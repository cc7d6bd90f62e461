// First divergence of two streams and the margins at the fork.
#include "lab/diverge.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lockstep::lab {

Divergence FirstDivergence(std::span<const int32_t> a, std::span<const int32_t> b) {
  Divergence d;
  d.len_a = static_cast<int64_t>(a.size());
  d.len_b = static_cast<int64_t>(b.size());
  const int64_t n = std::min(d.len_a, d.len_b);
  while (d.index < n && a[static_cast<size_t>(d.index)] == b[static_cast<size_t>(d.index)])
    ++d.index;
  d.identical = d.index == n && d.len_a == d.len_b;
  return d;
}

const char* ForkKindName(ForkKind k) {
  return k == ForkKind::kNearTie ? "near-tie flip" : "real divergence";
}

ForkAnalysis ClassifyFork(std::span<const float> logits, int32_t token_a, int32_t token_b,
                          const AnalyzeOptions& opt) {
  ForkAnalysis f;
  f.a = AnalyzeLogits(logits, token_a, opt);
  f.b = AnalyzeLogits(logits, token_b, opt);
  f.gap = std::fabs(f.a.logprob - f.b.logprob);
  const bool top_two = std::max(f.a.rank, f.b.rank) <= 2;
  f.kind = top_two && f.gap < opt.tie_threshold ? ForkKind::kNearTie : ForkKind::kReal;
  return f;
}

Expected<ForkAnalysis> AnalyzeFork(const model::Model& model, std::span<const int32_t> context,
                                   std::span<const int32_t> a, std::span<const int32_t> b,
                                   const Divergence& d, const AnalyzeOptions& opt) {
  if (!d.has_a() || !d.has_b())
    return Status::Error("the streams do not fork: one is a prefix of the other");
  std::vector<int32_t> prefix(context.begin(), context.end());
  prefix.insert(prefix.end(), a.begin(), a.begin() + d.index);
  if (prefix.empty())
    return Status::Error("the streams differ at their first token and no prompt was given");
  const int n_vocab = model.config().n_vocab;
  for (int32_t t : {a[static_cast<size_t>(d.index)], b[static_cast<size_t>(d.index)]})
    if (t >= n_vocab) return Status::Errorf("token {} is outside the vocabulary ({})", t, n_vocab);
  for (size_t i = 0; i < prefix.size(); ++i)
    if (prefix[i] >= n_vocab)
      return Status::Errorf("token {} at position {} is outside the vocabulary ({})", prefix[i], i,
                            n_vocab);
  const int n = static_cast<int>(prefix.size());
  constexpr int kChunk = 128;
  LS_ASSIGN_OR_RETURN(auto kv, model.NewKv(1, n, kChunk));
  model::ForwardResult res;
  model::Batch batch;
  for (int start = 0; start < n; start += kChunk) {
    batch.Clear();
    const int end = std::min(n, start + kChunk);
    for (int p = start; p < end; ++p) batch.Add(prefix[p], p, 0, p == n - 1);
    LS_RETURN_IF_ERROR(model.Forward(batch, *kv, &res));
  }
  ForkAnalysis f =
      ClassifyFork(std::span<const float>(res.logits_row(0), size_t(n_vocab)),
                   a[static_cast<size_t>(d.index)], b[static_cast<size_t>(d.index)], opt);
  f.a.pos = f.b.pos = n;
  f.a.index = f.b.index = d.index;
  return f;
}

}  // namespace lockstep::lab
