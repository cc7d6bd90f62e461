// Table layout and token escaping for terminal output.
#include "lab/table.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tokenizer/tokenizer.h"

namespace lockstep::lab {
namespace {

// Display width: UTF-8 continuation bytes take no column.
size_t Columns(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\\')
      out += "\\\\";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

std::string Cut(const std::string& s, size_t cols) {
  if (Columns(s) <= cols) return s;
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80 && ++n > (cols > 0 ? cols - 1 : 0)) break;
    out += s[i];
  }
  if (cols > 0) out.push_back('~');
  return out;
}

}  // namespace

Table::Table(std::vector<std::string> headers) {
  for (auto& h : headers) {
    right_.push_back(!h.empty() && h[0] == '>');
    headers_.push_back(right_.back() ? h.substr(1) : h);
  }
}

void Table::Row(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render(size_t width) const {
  std::vector<size_t> w(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    w[c] = Columns(headers_[c]);
    for (const auto& r : rows_) w[c] = std::max(w[c], Columns(r[c]));
  }
  // Narrow the widest column, one step at a time, until the line fits (cells get cut).
  auto total = [&] {
    size_t t = 0;
    for (size_t x : w) t += x + 2;
    return t - 2;
  };
  while (!w.empty() && total() > width) {
    auto widest = std::max_element(w.begin(), w.end());
    if (*widest <= 8) break;
    --*widest;
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string cell = Cut(cells[c], w[c]);
      const size_t pad = w[c] - Columns(cell);
      if (right_[c]) l.append(pad, ' ');
      l.append(cell);
      if (!right_[c]) l.append(pad, ' ');
      if (c + 1 < cells.size()) l.append(2, ' ');
    }
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(headers_);
  std::vector<std::string> rule;
  for (size_t c = 0; c < w.size(); ++c) rule.push_back(std::string(w[c], '-'));
  line(rule);
  for (const auto& r : rows_) line(r);
  return out;
}

std::string ShowToken(const tokenizer::Tokenizer* tok, int32_t id) {
  if (!tok || id < 0 || id >= tok->n_tokens()) return fmt::format("#{}", id);
  std::string s = "'";
  s.append(Escape(tok->TokenToPiece(id, true)));
  s.push_back('\'');
  return s;
}

std::string ShowText(const tokenizer::Tokenizer* tok, const std::vector<int32_t>& ids) {
  if (!tok) return fmt::format("{}", fmt::join(ids, " "));
  std::string s;
  for (int32_t id : ids) s += id >= 0 && id < tok->n_tokens() ? tok->TokenToPiece(id, true) : "";
  return Escape(s);
}

}  // namespace lockstep::lab
