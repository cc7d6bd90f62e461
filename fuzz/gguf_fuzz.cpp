// libFuzzer target: any byte string must parse to a File or an error, never crash or over-read.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lockstep::gguf;
  auto r = File::FromMemory(data, size, "fuzz.gguf");
  if (!r.ok()) {
    // Every error must name the input; an empty message would hide which field failed.
    if (r.status().message().rfind("fuzz.gguf: ", 0) != 0) __builtin_trap();
    return 0;
  }
  const File& f = **r;
  // Touch everything a caller may touch, so ASan sees any range the validator let through.
  size_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    if (f.Find(key) != &value) __builtin_trap();
    sink += ToString(value, 4).size();
    (void)value.AsInt();
    (void)value.AsFloat();
  }
  for (const auto& t : f.tensors()) {
    if (f.FindTensor(t.name) != &t) __builtin_trap();
    if (t.n_elements() <= 0 || t.nbytes == 0) __builtin_trap();
    const uint8_t* p = f.TensorData(t);
    sink += p[0] + p[t.nbytes - 1];
  }
  // The compiler must not drop the reads above.
  asm volatile("" : : "r"(sink) : "memory");
  return 0;
}
