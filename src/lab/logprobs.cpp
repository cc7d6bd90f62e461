// Teacher-forced logprobs, ranks, top-k and margins over a fixed stream.
#include "lab/logprobs.h"

#include "engine/generate.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "sample/sampler.h"

namespace lockstep::lab {
namespace {

bool Before(std::span<const float> l, int32_t a, int32_t b) {
  return sample::RanksBefore(l.data(), a, b);
}

}  // namespace

PositionStats AnalyzeLogits(std::span<const float> logits, int32_t token,
                            const AnalyzeOptions& opt) {
  CHECK(!logits.empty());
  CHECKF(token >= 0 && static_cast<size_t>(token) < logits.size(), "token {} outside vocab {}",
         token, logits.size());
  const int32_t n = static_cast<int32_t>(logits.size());
  double max = -INFINITY;
  for (float v : logits) max = std::max(max, static_cast<double>(v));
  double sum = 0;
  for (float v : logits)
    if (std::isfinite(v)) sum += std::exp(static_cast<double>(v) - max);
  const double lse = max + std::log(sum);

  PositionStats s;
  s.token = token;
  s.logprob = static_cast<double>(logits[token]) - lse;
  s.rank = 1;
  for (int32_t i = 0; i < n; ++i)
    if (Before(logits, i, token)) ++s.rank;

  // Top-k by partial selection; at least two entries so the margin is defined.
  const int k = std::min<int>(n, std::max(2, opt.top_k));
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = i;
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int32_t a, int32_t b) { return Before(logits, a, b); });
  for (int i = 0; i < k; ++i)
    s.top.push_back({ids[static_cast<size_t>(i)], static_cast<double>(logits[ids[i]]) - lse});
  s.margin = n > 1 ? s.top[0].logprob - s.top[1].logprob : INFINITY;
  s.near_tie = s.margin < opt.tie_threshold;
  s.top.resize(static_cast<size_t>(std::min(k, std::max(1, opt.top_k))));
  return s;
}

Expected<std::vector<PositionStats>> TeacherForce(const model::Model& model,
                                                  std::span<const int32_t> context,
                                                  std::span<const int32_t> stream,
                                                  const AnalyzeOptions& opt, int chunk) {
  std::vector<int32_t> all(context.begin(), context.end());
  all.insert(all.end(), stream.begin(), stream.end());
  if (all.size() < 2) return Status::Error("teacher forcing needs at least two tokens");
  const int n_vocab = model.config().n_vocab;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] >= n_vocab)
      return Status::Errorf("token {} at position {} is outside the model's vocabulary ({})",
                            all[i], i, n_vocab);
  const int first = std::max<int>(1, static_cast<int>(context.size()));  // first scored position
  std::vector<PositionStats> out;
  LS_RETURN_IF_ERROR(
      engine::TeacherForce(model, all, first, chunk, [&](int32_t p, std::span<const float> logits) {
        PositionStats s = AnalyzeLogits(logits, all[static_cast<size_t>(p)], opt);
        s.pos = p;
        s.index = p - static_cast<int64_t>(context.size());
        out.push_back(std::move(s));
      }));
  return out;
}

}  // namespace lockstep::lab
