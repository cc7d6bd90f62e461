// Entry points of the `lockstep` subcommands; each lives in its own src/cli/<name>.cpp.
#pragma once

namespace lockstep::cli {

// Each takes the arguments after the subcommand name (argv[0] is the subcommand) and returns
// the process exit code: 0 success, 1 runtime failure, 2 usage error.
int Inspect(int argc, char** argv);
int Convert(int argc, char** argv);
int Generate(int argc, char** argv);
int Quantize(int argc, char** argv);
int Tokenize(int argc, char** argv);
int Detokenize(int argc, char** argv);
int Lab(int argc, char** argv);
int Chat(int argc, char** argv);
int Serve(int argc, char** argv);

}  // namespace lockstep::cli
