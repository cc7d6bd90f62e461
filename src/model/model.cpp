// Model loading: open the GGUF file, derive the config, bind the weights.
#include "model/model.h"

namespace lockstep::model {

Expected<std::unique_ptr<Model>> Model::Load(const std::string& path, backend::Backend& be) {
  std::unique_ptr<Model> m(new Model());
  LS_ASSIGN_OR_RETURN(m->file_, gguf::File::Open(path));
  LS_ASSIGN_OR_RETURN(m->config_, LoadConfig(*m->file_));
  LS_ASSIGN_OR_RETURN(m->weights_, BindWeights(*m->file_, m->config_, be));
  m->backend_ = &be;
  return m;
}

kv::CacheConfig KvConfigFor(const ModelConfig& config, int n_seq, int n_ctx) {
  kv::CacheConfig c;
  for (const LayerConfig& l : config.layers) {
    const int64_t width = static_cast<int64_t>(l.n_head_kv) * l.head_dim;
    c.layers.push_back({l.has_kv, l.sliding, width, width});
  }
  c.n_seq_max = n_seq;
  c.n_ctx = n_ctx;
  // The drafter reads n_swa + 1 keys ending at pos - 1 (assistant.cpp), the most any query
  // reads below the first position of a step.
  c.sliding_keep = config.n_swa > 0 ? config.n_swa + 2 : 0;
  return c;
}

kv::CacheConfig Model::KvConfig(int n_seq, int n_ctx) const {
  return KvConfigFor(config_, n_seq, n_ctx);
}

Expected<std::unique_ptr<kv::KvCache>> Model::NewKv(int n_seq, int n_ctx, int max_step_rows,
                                                    DType type_k, DType type_v) const {
  kv::CacheConfig c = KvConfig(n_seq, n_ctx);
  c.max_step_rows = max_step_rows;
  c.type_k = type_k;
  c.type_v = type_v;
  return kv::KvCache::Create(*backend_, c);
}

}  // namespace lockstep::model
