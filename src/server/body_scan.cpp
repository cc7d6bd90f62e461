// A request's body framing from its head, and the end of its body in the bytes received so far.
#include "server/body_scan.h"

#include <algorithm>
#include <optional>

namespace lockstep::server {
namespace {

// Far above any --max-body, and small enough that the arithmetic below cannot overflow.
constexpr uint64_t kHuge = uint64_t{1} << 62;

// n * base + digit, saturating at kHuge (n itself is at most kHuge).
uint64_t Append(uint64_t n, uint64_t base, uint64_t digit) {
  return n > (kHuge - digit) / base ? kHuge : n * base + digit;
}
// A chunk's size line with its extensions: real clients send a few hex digits.
constexpr size_t kMaxChunkLine = 1024;

bool IsSpace(char c) {
  return c == ' ' || c == '\t';
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool SameNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Expected<uint64_t> ParseLength(std::string_view value) {
  if (value.empty() ||
      !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Status::Errorf("Content-Length '{}' is not a number of bytes", value);
  uint64_t n = 0;
  for (char c : value) n = Append(n, 10, static_cast<uint64_t>(c - '0'));
  return n;
}

// A chunk's size from its line (CRLF included): hex digits, then nothing or chunk extensions
// (";name=value", which httplib ignores as strtoul stops at them). Saturates at kHuge.
Expected<uint64_t> ParseChunkSize(std::string_view line) {
  if (line.size() < 2 || line.substr(line.size() - 2) != "\r\n")
    return Status::Error("a chunk size line does not end with CRLF");
  line.remove_suffix(2);
  uint64_t n = 0;
  size_t digits = 0;
  for (; digits < line.size() && HexDigit(line[digits]) >= 0; ++digits)
    n = Append(n, 16, static_cast<uint64_t>(HexDigit(line[digits])));
  const std::string_view rest = Trim(line.substr(digits));
  if (digits == 0 || (!rest.empty() && rest.front() != ';') ||
      rest.find('\r') != std::string_view::npos)
    return Status::Errorf("'{}' is not a chunk size (hex digits, then optional ;extensions)",
                          line.substr(0, 40));
  return n;
}

}  // namespace

Expected<Framing> ParseFraming(std::string_view head) {
  Framing f;
  std::optional<uint64_t> length;
  int codings = 0;
  size_t at = head.find('\n');  // the request line's end
  for (at = at == std::string_view::npos ? head.size() : at + 1; at < head.size();) {
    const size_t nl = head.find('\n', at);
    if (nl == std::string_view::npos) break;
    std::string_view line = head.substr(at, nl + 1 - at);
    at = nl + 1;
    if (line.size() <= 2 || line[line.size() - 2] != '\r') continue;  // the blank line, or skipped
    line.remove_suffix(2);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // httplib ignores it too
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (SameNoCase(name, "Content-Length")) {
      LS_ASSIGN_OR_RETURN(const uint64_t n, ParseLength(value));
      if (length && *length != n) return Status::Error("conflicting Content-Length headers");
      length = n;
    } else if (SameNoCase(name, "Transfer-Encoding")) {
      if (++codings > 1) return Status::Error("more than one Transfer-Encoding header");
      f.kind = SameNoCase(value, "chunked") ? Framing::Kind::kChunked : Framing::Kind::kUnsupported;
      f.coding = value;
    } else if (SameNoCase(name, "Expect")) {
      f.expect_continue = SameNoCase(value, "100-continue");
    }
  }
  if (codings == 0 && length) {
    f.kind = Framing::Kind::kLength;
    f.length = *length;
  }
  return f;
}

BodyScanner::BodyScanner(const Framing& framing, size_t max_body)
    : kind_(framing.kind),
      length_(framing.length),
      max_body_(max_body),
      max_wire_(2 * std::min<uint64_t>(max_body, kHuge)) {}

BodyState BodyScanner::Scan(std::string_view bytes) {
  switch (kind_) {
    case Framing::Kind::kNone:
    case Framing::Kind::kUnsupported:  // refused by the caller before any body is read
      wire_size_ = 0;
      return BodyState::kComplete;
    case Framing::Kind::kLength:
      if (length_ > max_body_) return BodyState::kTooLarge;
      if (bytes.size() < length_) return BodyState::kIncomplete;
      wire_size_ = static_cast<size_t>(length_);
      return BodyState::kComplete;
    case Framing::Kind::kChunked:
      return ScanChunked(bytes);
  }
  return BodyState::kMalformed;
}

BodyState BodyScanner::Malformed(std::string message) {
  error_ = std::move(message);
  return BodyState::kMalformed;
}

BodyState BodyScanner::ScanChunked(std::string_view b) {
  for (;;) {
    if (at_ > max_wire_) return BodyState::kTooLarge;
    switch (part_) {
      case Part::kSizeLine: {
        const size_t nl = b.find('\n', at_);
        const size_t line_size = (nl == std::string_view::npos ? b.size() : nl + 1) - at_;
        if (line_size > kMaxChunkLine)
          return Malformed(fmt::format("a chunk size line longer than {} bytes", kMaxChunkLine));
        if (nl == std::string_view::npos) return BodyState::kIncomplete;
        const Expected<uint64_t> size = ParseChunkSize(b.substr(at_, line_size));
        if (!size.ok()) return Malformed(size.status().message());
        at_ = nl + 1;
        if (*size > max_body_ - decoded_) return BodyState::kTooLarge;
        decoded_ += *size;
        chunk_left_ = *size;
        part_ = *size == 0 ? Part::kLastEnd : Part::kData;
        break;
      }
      case Part::kData: {
        const uint64_t n = std::min<uint64_t>(chunk_left_, b.size() - at_);
        at_ += static_cast<size_t>(n);
        chunk_left_ -= n;
        if (chunk_left_ > 0) return BodyState::kIncomplete;
        part_ = Part::kDataEnd;
        break;
      }
      case Part::kDataEnd:
      case Part::kLastEnd: {
        if (b.size() - at_ < 2) return BodyState::kIncomplete;
        if (b.substr(at_, 2) != "\r\n")
          return Malformed(part_ == Part::kDataEnd
                               ? "a chunk's data is not followed by CRLF"
                               : "trailer fields after the last chunk are not supported");
        at_ += 2;
        if (part_ == Part::kDataEnd) {
          part_ = Part::kSizeLine;
          break;
        }
        part_ = Part::kDone;
        wire_size_ = at_;
        return BodyState::kComplete;
      }
      case Part::kDone:
        return BodyState::kComplete;
    }
  }
}

}  // namespace lockstep::server
