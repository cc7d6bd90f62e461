// Finds where a request's head (request line and header lines) ends in the bytes received so
// far, the way cpp-httplib 0.11 reads it, and applies the head's size limits.
#pragma once

#include <cstddef>
#include <string_view>

namespace lockstep::server {

struct HeadLimits {
  size_t max_lines = 100;       // header lines after the request line
  size_t max_bytes = 64 << 10;  // the whole head: request line, header lines, the blank line
};

enum class HeadState { kIncomplete, kComplete, kTooLarge };

// Incremental: call Scan again, with the same object, each time more bytes have been appended to
// the buffer; it resumes where it stopped, so a head trickled byte by byte costs linear time.
class HeadScanner {
 public:
  explicit HeadScanner(HeadLimits limits) : limits_(limits) {}

  // `bytes` starts at the request's first byte and may run past its head (the body, or the next
  // request). A line is the bytes up to and including '\n'; the first is the request line, and
  // the head ends with the first later line that is exactly "\r\n". httplib skips other lines
  // that lack the '\r' (they do not end the head), so they are counted here as header lines;
  // a request line that lacks it is refused at once (400), so it is a whole head by itself.
  HeadState Scan(std::string_view bytes);

  size_t head_size() const { return head_size_; }  // valid once Scan returned kComplete
  size_t header_lines() const { return lines_; }

 private:
  HeadLimits limits_;
  size_t scanned_ = 0;     // bytes looked at
  size_t line_start_ = 0;  // where the line being scanned starts
  size_t lines_ = 0;       // header lines seen (the request line not counted)
  bool request_line_ = false;
  size_t head_size_ = 0;
};

}  // namespace lockstep::server
