// Reading reference dumps (raw little-endian float32) and ranking logits, for parity tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <vector>

namespace lockstep::testing {

inline std::vector<float> ReadF32(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<float> v(static_cast<size_t>(std::filesystem::file_size(p) / 4));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  return v;
}

// The 5 highest ids of x[0..n) (ties to the lower id), sorted by id.
inline std::vector<int> Top5(const float* x, int n) {
  std::vector<int> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(),
                    [&](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  idx.resize(5);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace lockstep::testing
