// CPU token selection: each output row's token is sample::Select of that row alone, so a row
// picks the same token whatever else shares the step.
#include "backend/cpu/cpu_backend.h"
#include "core/check.h"

namespace lockstep::backend {

void CpuBackend::SelectTokens(const Tensor& logits, std::span<const SampleRow> rows,
                              IntTensor* ids) {
  CHECKF(static_cast<int64_t>(rows.size()) <= logits.rows() &&
             static_cast<int64_t>(rows.size()) <= ids->size(),
         "select: {} rows for {} logit rows and {} ids", rows.size(), logits.rows(), ids->size());
  const size_t n_vocab = static_cast<size_t>(logits.cols());
  // A full-vocabulary row is a long scan: split rows over threads when there are several.
  // Candidate and penalty lists live in the worker's scratch, grown here to the vocabulary plus
  // the history on the calling thread (which worker takes a row depends on timing, so workers
  // must not grow it).
  for (const SampleRow& s : rows)
    if (sample::NeedsScratch(s.settings)) {
      for (WorkerScratch& ws : worker_) ws.candidates.reserve(n_vocab + s.recent.size());
    }
  pool_.ParallelForWorker(static_cast<int64_t>(rows.size()), 1, [&](int w, int64_t b, int64_t e) {
    std::vector<int32_t>* scratch = &worker_[static_cast<size_t>(w)].candidates;
    for (int64_t r = b; r < e; ++r) {
      const SampleRow& s = rows[static_cast<size_t>(r)];
      ids->data()[r] = sample::Select(s.settings, s.position, {logits.row(r), n_vocab}, s.recent,
                                      scratch);
    }
  });
}

}  // namespace lockstep::backend
