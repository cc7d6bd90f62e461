// Plain-text tables for the lab's human-readable output (fits 100 columns by truncation).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::tokenizer {
class Tokenizer;
}

namespace lockstep::lab {

class Table {
 public:
  // A header starting with '>' is right-aligned (the '>' is not printed).
  explicit Table(std::vector<std::string> headers);
  void Row(std::vector<std::string> cells);
  // Columns are as wide as their widest cell; the widest are cut (marked ~) to fit `width`.
  std::string Render(size_t width = 100) const;

 private:
  std::vector<std::string> headers_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

// A token for display: its text quoted with \n, \t, \\ and control bytes escaped, or "#id"
// when there is no tokenizer (or the id is outside it).
std::string ShowToken(const tokenizer::Tokenizer* tok, int32_t id);
// Decoded text of ids with the same escaping, without quotes; ids joined by spaces when there
// is no tokenizer.
std::string ShowText(const tokenizer::Tokenizer* tok, const std::vector<int32_t>& ids);

}  // namespace lockstep::lab
