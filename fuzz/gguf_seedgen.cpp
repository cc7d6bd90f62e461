// Writes a few tiny valid GGUF files with the Writer, as the fuzzer's starting corpus.
#include <cstdio>
#include <cstring>
#include <string>

#include "gguf/gguf.h"

using namespace lockstep;
using namespace lockstep::gguf;

namespace {

Status WriteSeeds(const std::string& dir) {
  Writer a;  // every value type, nested arrays, one tensor
  a.Set("general.architecture", Value::Str("gemma4"));
  a.Set("u8", Value{ValueType::UINT8, uint64_t{7}});
  a.Set("i16", Value{ValueType::INT16, int64_t{-3}});
  a.Set("i32", Value::I32(-5));
  a.Set("u64", Value::U64(1234567890123ull));
  a.Set("f32", Value::F32(0.5f));
  a.Set("f64", Value{ValueType::FLOAT64, 2.25});
  a.Set("b", Value::Bool(true));
  a.Set("tokens", Value::Arr(ValueType::STRING, {Value::Str("<pad>"), Value::Str("a")}));
  a.Set("nested", Value::Arr(ValueType::ARRAY, {Value::Arr(ValueType::INT32, {Value::I32(1)})}));
  const float w[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  a.AddTensorCopy("token_embd.weight", DType::F32, {4, 2}, w);
  LS_RETURN_IF_ERROR(a.WriteFile(dir + "/values.gguf"));

  Writer b;  // several block-quantized tensors and a non-default alignment
  b.SetAlignment(64);
  b.Set("gemma4.block_count", Value::U32(1));
  const DType types[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::F16, DType::BF16};
  int k = 0;
  for (DType t : types) {
    const int64_t ne0 = Info(t).block_size;
    b.AddTensor("blk.0.t" + std::to_string(k++), t, {ne0, 1},
                [t, ne0](uint8_t* d) { std::memset(d, 0x11, RowBytes(t, ne0)); });
  }
  LS_RETURN_IF_ERROR(b.WriteFile(dir + "/quant.gguf"));

  Writer c;  // metadata only
  c.Set("general.name", Value::Str("empty"));
  return c.WriteFile(dir + "/meta.gguf");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gguf_seedgen DIR\n");
    return 2;
  }
  const Status s = WriteSeeds(argv[1]);
  if (!s.ok()) {
    std::fprintf(stderr, "gguf_seedgen: %s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
