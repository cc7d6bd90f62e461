// The end of a request's head in the bytes received so far, and the head's limits.
#include "server/head_scan.h"

#include <cstring>

namespace lockstep::server {

HeadState HeadScanner::Scan(std::string_view bytes) {
  while (scanned_ < bytes.size()) {
    const void* nl = std::memchr(bytes.data() + scanned_, '\n', bytes.size() - scanned_);
    if (nl == nullptr) {
      scanned_ = bytes.size();
      break;
    }
    const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - bytes.data()) + 1;
    const bool crlf = end - line_start_ >= 2 && bytes[end - 2] == '\r';
    // httplib answers 400 to a request line without the '\r' before reading any header: the
    // request's head is that line alone.
    const bool bare_request_line = !request_line_ && !crlf;
    const bool blank = request_line_ && crlf && end - line_start_ == 2;
    if (request_line_ && !blank) ++lines_;
    request_line_ = true;
    scanned_ = line_start_ = end;
    if (blank || bare_request_line) {
      head_size_ = end;
      return head_size_ > limits_.max_bytes ? HeadState::kTooLarge : HeadState::kComplete;
    }
    if (lines_ > limits_.max_lines) return HeadState::kTooLarge;
  }
  // Everything scanned so far belongs to the head, which has not ended yet.
  return scanned_ > limits_.max_bytes ? HeadState::kTooLarge : HeadState::kIncomplete;
}

}  // namespace lockstep::server
