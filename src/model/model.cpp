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

std::unique_ptr<backend::KvStore> Model::NewKv(int n_seq, int n_ctx) const {
  return std::make_unique<backend::KvStore>(*backend_, config_, n_seq, n_ctx);
}

}  // namespace lockstep::model
