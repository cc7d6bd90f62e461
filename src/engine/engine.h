// The engine: a step scheduler over many sequences. Each step admits waiting requests into free
// slots, drafts for every speculating sequence in one proposer call, and runs ONE target
// forward over decode rows, verify rows and prefill chunks of all sequences together. Every
// token is the target's own selection at its absolute position, and every row is computed from
// that row alone, so a sequence's tokens are byte-identical whatever else shares its steps.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "speculative/acceptance.h"
#include "speculative/proposer.h"

namespace lockstep::engine {

using SeqId = int64_t;

struct Request {
  std::vector<int32_t> prompt;  // at least one token
  int n_predict = 64;
  sample::Settings sampling;
  std::vector<int32_t> stop_tokens;  // generation ends after emitting one of these
  int draft_max = 0;           // 0: plain decode; else speculate (the engine needs a proposer)
  float draft_p_min = 0.0f;    // drafts below this drafter probability are not proposed
  bool adaptive_draft = true;  // shrink/grow/pause K with acceptance (never changes the output)
  // Teacher forcing (lab): emit these tokens instead of the target's selections; n_predict is
  // their count. Speculation then measures how often drafts predict this stream.
  std::vector<int32_t> forced;
  int logits_from = -1;  // >= 0: report logits of rows at positions >= this (row p predicts p+1)
  bool record_rounds = false;  // return one record per verify round (SeqResult::rounds)
};

enum class Finish { kStop, kLength, kCancelled };

using speculative::Round;

struct SeqResult {
  SeqId id = 0;
  std::vector<int32_t> tokens;  // emitted (prompt excluded)
  Finish finish = Finish::kLength;
  speculative::DraftStats draft;
  std::vector<Round> rounds;  // with record_rounds
  int64_t n_shared = 0;       // prompt positions taken from another sequence's cache
  // Teacher forcing: emitted tokens the target itself would have selected, out of all emitted.
  int64_t target_agreed = 0;
  double prompt_ms = 0, generate_ms = 0;
};

// lockstep serve's draft_rows on the CPU (docs/server.md; 0, no cap, on CUDA).
inline constexpr int kCpuDraftRows = 8;

struct Options {
  int n_seq_max = 1;        // sequences decoded together (KV slots)
  int n_ctx = 4096;         // positions per sequence
  int prefill_chunk = 256;  // prompt rows one sequence adds per step
  int max_rows = 0;         // target rows per step; 0: prefill_chunk + n_seq_max * (draft_max + 1)
  int draft_max = 0;        // largest K a request may use (sizes buffers)
  // Rows of a step that drafts may fill, the step's decode rows counted first (0: max_rows). A
  // step of many sequences is bound by arithmetic, where drafts that are rejected cost what
  // they cost and buy nothing; outputs never change (speculation is exact).
  int draft_rows = 0;
  int max_logit_rows = 0;  // extra output rows for requests with logits_from (lab)
  DType cache_type_k = DType::F32, cache_type_v = DType::F32;
  bool prefix_sharing = true;  // new sequences reuse cached prompt prefixes of running ones
};

// Called with each emitted token, in order, as soon as it is known.
using TokenSink = std::function<void(SeqId, int32_t token)>;
// Called with the logits row that predicts position `pos` for requests with logits_from.
using LogitsSink = std::function<void(SeqId, int32_t pos, std::span<const float> logits)>;

// An error naming the file when `target` cannot be decoded from (a Gemma 4 assistant drafter).
Status RequireTarget(const model::Model& target);

class Engine {
 public:
  // `proposer` may be null (no speculation); it must outlive the engine.
  static Expected<std::unique_ptr<Engine>> Create(const model::Model& target,
                                                  speculative::Proposer* proposer,
                                                  const Options& opt);
  ~Engine();

  // Validates the request (ids, lengths, draft settings) and queues it.
  Expected<SeqId> Submit(Request req);
  // Ends a sequence at the next step boundary (its result has finish == kCancelled).
  void Cancel(SeqId id);
  // One scheduling step. Does nothing when idle.
  Status Step();
  bool Idle() const;
  // Results of sequences that finished since the last call, in finishing order.
  std::vector<SeqResult> TakeFinished();

  void set_token_sink(TokenSink sink) { token_sink_ = std::move(sink); }
  void set_logits_sink(LogitsSink sink) { logits_sink_ = std::move(sink); }
  const Options& options() const { return opt_; }
  // Rows of the last step's target forward (for benches and metrics).
  int last_step_rows() const { return last_rows_; }

 private:
  struct Seq;
  Engine(const model::Model& target, speculative::Proposer* proposer, const Options& opt);
  void Admit();
  void ShareCachedPrefix(Seq& s);
  Status Draft();
  void BuildBatch();
  void BuildSampleRows();  // sample_rows_ for the output rows of the step just run
  void Apply();
  bool Emit(Seq& s, int32_t token, int row_out);
  void Finish(Seq& s, engine::Finish why);

  const model::Model& target_;
  speculative::Proposer* proposer_;
  Options opt_;
  std::unique_ptr<kv::KvCache> kv_;
  model::Workspace ws_;
  model::StepOutputs out_;
  model::Batch batch_;
  backend::Tensor hidden_carry_;  // [n_seq_max, n_embd]: state that selected each slot's last token
  backend::IntTensor ids_dev_, copy_src_, copy_dst_;
  std::vector<int32_t> ids_, copy_src_host_, copy_dst_host_;
  std::vector<backend::SampleRow> sample_rows_;
  std::vector<int32_t> recent_;  // repeat-penalty histories the sample rows point into
  std::vector<float> host_logits_;
  std::vector<speculative::DraftRequest> draft_reqs_;
  std::vector<std::vector<int32_t>*> draft_outs_;
  std::vector<std::unique_ptr<Seq>> slots_;  // by slot; null when free
  std::deque<std::unique_ptr<Seq>> waiting_;
  std::vector<SeqResult> finished_;
  std::vector<SeqId> cancelled_;
  SeqId next_id_ = 1;
  int last_rows_ = 0;
  TokenSink token_sink_;
  LogitsSink logits_sink_;
};

// Submits every request, steps until all finish, returns results in submission order.
Expected<std::vector<SeqResult>> RunAll(Engine& engine, std::vector<Request> requests);

}  // namespace lockstep::engine
