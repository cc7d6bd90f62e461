// Jinja lexer. The preprocessing keeps, for every byte it keeps, the line it had in the original
// template, so that errors found after trim_blocks joined lines still name the line as written.
#include "template/lexer.h"

#include <array>
#include <utility>

#include "template/value.h"

namespace lockstep::jinja {
namespace {

struct Source {
  std::string text;
  std::vector<int> line;  // original line of each byte of `text`
  void Put(char c, int l) { text += c, line.push_back(l); }
};

Source WithLines(std::string_view t) {
  Source s;
  int line = 1;
  for (char c : t) {
    s.Put(c, line);
    if (c == '\n') ++line;
  }
  if (!s.text.empty() && s.text.back() == '\n') s.text.pop_back(), s.line.pop_back();
  return s;
}

// lstrip_blocks: spaces and tabs before a line's `{%` or `{#` go.
Source LstripBlocks(const Source& in) {
  Source out;
  for (size_t i = 0; i < in.text.size();) {
    if (i == 0 || in.text[i - 1] == '\n') {
      size_t j = i;
      while (j < in.text.size() && (in.text[j] == ' ' || in.text[j] == '\t')) ++j;
      if (j + 1 < in.text.size() && in.text[j] == '{' &&
          (in.text[j + 1] == '#' || in.text[j + 1] == '%' || in.text[j + 1] == '-'))
        i = j;
    }
    out.Put(in.text[i], in.line[i]);
    ++i;
  }
  return out;
}

// trim_blocks: the newline right after `%}`, `#}` (and `-}`) goes.
Source TrimBlocks(const Source& in) {
  Source out;
  const std::string& t = in.text;
  for (size_t i = 0; i < t.size(); ++i) {
    out.Put(t[i], in.line[i]);
    if ((t[i] == '#' || t[i] == '%' || t[i] == '-') && i + 2 < t.size() && t[i + 1] == '}' &&
        t[i + 2] == '\n') {
      out.Put('}', in.line[i + 1]);
      i += 2;
    }
  }
  return out;
}

size_t SkipSpaces(std::string_view t, size_t i) {
  size_t len = 0;
  while (i < t.size() && IsJsSpaceAt(t, i, &len)) i += len;
  return i;
}

// Length of a `{%-? (end)?generation -?%}` marker at `i`, or 0; `lstrip`/`rstrip` get its dashes.
size_t GenerationMarker(std::string_view t, size_t i, bool* lstrip, bool* rstrip) {
  if (t.substr(i, 2) != "{%") return 0;
  size_t j = i + 2;
  *lstrip = j < t.size() && t[j] == '-';
  j = SkipSpaces(t, j + (*lstrip ? 1 : 0));
  if (t.substr(j, 3) == "end") j += 3;
  if (t.substr(j, 10) != "generation") return 0;
  j = SkipSpaces(t, j + 10);
  *rstrip = j < t.size() && t[j] == '-';
  if (*rstrip) ++j;
  if (t.substr(j, 2) != "%}") return 0;
  return j + 2 - i;
}

// Removes `{% generation %}` / `{% endgeneration %}` (a transformers extension), honouring dashes.
Source DropGenerationMarkers(const Source& in) {
  Source out;
  const std::string& t = in.text;
  size_t kept_from = 0;  // whitespace before a marker may be dropped back to here
  for (size_t i = 0; i < t.size();) {
    bool lstrip = false, rstrip = false;
    const size_t len = GenerationMarker(t, i, &lstrip, &rstrip);
    if (len == 0) {
      out.Put(t[i], in.line[i]);
      ++i;
      continue;
    }
    if (lstrip) {
      size_t keep = out.text.size();
      while (keep > kept_from) {
        size_t k = keep - 1, sl = 0;
        while (k > kept_from && (static_cast<unsigned char>(out.text[k]) & 0xC0) == 0x80) --k;
        if (!IsJsSpaceAt(out.text, k, &sl) || k + sl != keep) break;
        keep = k;
      }
      out.text.resize(keep), out.line.resize(keep);
    }
    i += len;
    if (rstrip) i = SkipSpaces(t, i);
    kept_from = out.text.size();
  }
  return out;
}

constexpr std::array<std::pair<std::string_view, Tok>, 29> kSymbols = {{
    {"{%", Tok::kOpenStatement},  {"%}", Tok::kCloseStatement},
    {"{{", Tok::kOpenExpression}, {"}}", Tok::kCloseExpression},
    {"(", Tok::kOpenParen},       {")", Tok::kCloseParen},
    {"{", Tok::kOpenBrace},       {"}", Tok::kCloseBrace},
    {"[", Tok::kOpenBracket},     {"]", Tok::kCloseBracket},
    {",", Tok::kComma},           {".", Tok::kDot},
    {":", Tok::kColon},           {"|", Tok::kPipe},
    {"<=", Tok::kComparison},     {">=", Tok::kComparison},
    {"==", Tok::kComparison},     {"!=", Tok::kComparison},
    {"<", Tok::kComparison},      {">", Tok::kComparison},
    {"+", Tok::kAdditive},        {"-", Tok::kAdditive},
    {"~", Tok::kAdditive},        {"**", Tok::kPower},
    {"*", Tok::kMultiplicative},  {"//", Tok::kMultiplicative},
    {"/", Tok::kMultiplicative},  {"%", Tok::kMultiplicative},
    {"=", Tok::kEquals},
}};

bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsWord(char c) {
  return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

class Lexer {
 public:
  explicit Lexer(Source src) : src_(std::move(src)), t_(src_.text) {}
  std::vector<Token> Run();

 private:
  int Line() const { return src_.line.empty() ? 1 : src_.line[std::min(pos_, t_.size() - 1)]; }
  [[noreturn]] void Fail(const std::string& m) const { throw Error(m, Line()); }
  void Push(Tok type, std::string value, int line) {
    out_.push_back({type, std::move(value), line});
  }
  bool InTextMode() const {
    return out_.empty() || out_.back().type == Tok::kCloseStatement ||
           out_.back().type == Tok::kCloseExpression || out_.back().type == Tok::kComment;
  }
  void StripTrailingSpace() {
    if (out_.empty() || out_.back().type != Tok::kText) return;
    out_.back().value = JsTrim(out_.back().value, false, true);
    if (out_.back().value.empty()) out_.pop_back();
  }
  bool LexText();
  void LexComment();
  std::string LexString(char quote);
  std::string Digits();
  void LexSignOrNumber(char sign, int line);
  void LexCode();

  Source src_;
  std::string_view t_;
  size_t pos_ = 0;
  int braces_ = 0;
  std::vector<Token> out_;
};

bool Lexer::LexText() {
  const size_t start = pos_;
  const int line = Line();
  while (pos_ < t_.size() && !(t_[pos_] == '{' && pos_ + 1 < t_.size() &&
                               (t_[pos_ + 1] == '%' || t_[pos_ + 1] == '{' || t_[pos_ + 1] == '#')))
    ++pos_;
  if (pos_ == start) return false;
  Push(Tok::kText, std::string(t_.substr(start, pos_ - start)), line);
  return true;
}

void Lexer::LexComment() {
  const int line = Line();
  pos_ += 2;
  const bool strip_before = pos_ < t_.size() && t_[pos_] == '-';
  if (strip_before) ++pos_;
  const size_t end = t_.find("#}", pos_);
  if (end == std::string_view::npos) Fail("missing end of comment tag '#}'");
  std::string comment(t_.substr(pos_, end - pos_));
  const bool strip_after = !comment.empty() && comment.back() == '-';
  if (strip_after) comment.pop_back();
  if (strip_before) StripTrailingSpace();
  Push(Tok::kComment, std::move(comment), line);
  pos_ = end + 2;
  if (strip_after) pos_ = SkipSpaces(t_, pos_);
}

std::string Lexer::LexString(char quote) {
  std::string s;
  ++pos_;
  while (true) {
    if (pos_ >= t_.size()) Fail("unterminated string literal");
    const char c = t_[pos_];
    if (c == quote) break;
    if (c != '\\') {
      s += c, ++pos_;
      continue;
    }
    if (++pos_ >= t_.size()) Fail("unterminated string literal");
    const char e = t_[pos_++];
    static constexpr std::string_view kFrom = "ntrbfv'\"\\", kTo = "\n\t\r\b\f\v'\"\\";
    if (const size_t k = kFrom.find(e); k != std::string_view::npos) {
      s += kTo[k];
      continue;
    }
    if (e != 'x' && e != 'u') Fail(std::string("unknown escape \\") + e + " in a string literal");
    const size_t n = e == 'x' ? 2 : 4;
    const std::string hex(t_.substr(pos_, n));
    if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
      Fail("invalid escape \\" + std::string(1, e) + hex);
    s += Utf8(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)));
    pos_ += n;
  }
  ++pos_;
  return s;
}

std::string Lexer::Digits() {
  const size_t start = pos_;
  while (pos_ < t_.size() && IsDigit(t_[pos_])) ++pos_;
  std::string num(t_.substr(start, pos_ - start));
  const bool after_dot = !out_.empty() && out_.back().type == Tok::kDot;
  if (!num.empty() && !after_dot && pos_ + 1 < t_.size() && t_[pos_] == '.' &&
      IsDigit(t_[pos_ + 1])) {
    const size_t frac = ++pos_;
    while (pos_ < t_.size() && IsDigit(t_[pos_])) ++pos_;
    num += '.';
    num.append(t_.substr(frac, pos_ - frac));
  }
  return num;
}

// A sign after an operator or an opening token is a unary sign or part of a number literal.
void Lexer::LexSignOrNumber(char sign, int line) {
  ++pos_;
  const std::string num = Digits();
  if (num.empty())
    Push(Tok::kUnary, std::string(1, sign), line);
  else
    Push(Tok::kNumber, std::string(1, sign).append(num), line);
}

void Lexer::LexCode() {
  pos_ = SkipSpaces(t_, pos_);
  if (pos_ >= t_.size()) return;
  const int line = Line();
  for (auto [close, type] :
       {std::pair{"-%}", Tok::kCloseStatement}, {"-}}", Tok::kCloseExpression}})
    if (t_.substr(pos_, 3) == close) {
      Push(type, std::string(close + 1), line);
      pos_ = SkipSpaces(t_, pos_ + 3);
      return;
    }
  const char c = t_[pos_];
  if (c == '-' || c == '+') {
    if (out_.empty() || out_.back().type == Tok::kText) Fail(std::string("unexpected '") + c + "'");
    const Tok last = out_.back().type;
    if (last != Tok::kIdentifier && last != Tok::kNumber && last != Tok::kString &&
        last != Tok::kCloseParen && last != Tok::kCloseBracket)
      return LexSignOrNumber(c, line);
  }
  for (auto [sym, type] : kSymbols) {
    if (type == Tok::kCloseExpression && braces_ > 0) continue;
    if (t_.substr(pos_, sym.size()) != sym) continue;
    if (type == Tok::kOpenExpression) braces_ = 0;
    if (type == Tok::kOpenBrace) ++braces_;
    if (type == Tok::kCloseBrace) --braces_;
    Push(type, std::string(sym), line);
    pos_ += sym.size();
    return;
  }
  if (c == '\'' || c == '"') return Push(Tok::kString, LexString(c), line);
  if (IsDigit(c)) return Push(Tok::kNumber, Digits(), line);
  if (IsWord(c)) {
    const size_t start = pos_;
    while (pos_ < t_.size() && IsWord(t_[pos_])) ++pos_;
    return Push(Tok::kIdentifier, std::string(t_.substr(start, pos_ - start)), line);
  }
  Fail(std::string("unexpected character '") + c + "'");
}

std::vector<Token> Lexer::Run() {
  while (pos_ < t_.size()) {
    if (InTextMode() && LexText()) continue;
    if (t_.substr(pos_, 2) == "{#") {
      LexComment();
    } else if (t_.substr(pos_, 3) == "{%-" || t_.substr(pos_, 3) == "{{-") {
      const bool statement = t_[pos_ + 1] == '%';
      StripTrailingSpace();
      Push(statement ? Tok::kOpenStatement : Tok::kOpenExpression, statement ? "{%" : "{{", Line());
      if (!statement) braces_ = 0;
      pos_ += 3;
    } else {
      LexCode();
    }
  }
  return std::move(out_);
}

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  return Lexer(DropGenerationMarkers(TrimBlocks(LstripBlocks(WithLines(source))))).Run();
}

}  // namespace lockstep::jinja
