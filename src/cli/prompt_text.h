// Prompt input the way llama.cpp users give it: -p TEXT, -p - (stdin), -f FILE, escapes; and
// the terminal facts the CLI adapts to (physical cores, whether stderr is a terminal).
#pragma once

#include <istream>
#include <string>
#include <string_view>

#include "core/status.h"

namespace lockstep::cli {

// llama.cpp's escape processing: \n \r \t \' \" \\ and \xHH become the characters they name; any
// other backslash sequence stays as written.
std::string ProcessEscapes(std::string_view text);

// The prompt text from `-p` (where "-" reads stdin to its end) or from `-f FILE`; an error when
// both are given or the file cannot be read. Empty when neither is.
Expected<std::string> ReadPrompt(const std::string& prompt_arg, const std::string& file_arg);

// Physical cores (distinct core ids per package in /proc/cpuinfo); hardware threads when that
// cannot be read. The default for -t/--threads, as in llama.cpp.
int PhysicalCores();
// The same from a /proc/cpuinfo text; `fallback` (at least 1) when it names no cores.
int PhysicalCoresFromCpuinfo(std::istream& cpuinfo, int fallback);

// Progress bars are drawn only on a terminal, never into a log file or a pipe.
bool StderrIsTerminal();

}  // namespace lockstep::cli
