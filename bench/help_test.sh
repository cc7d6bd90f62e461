#!/usr/bin/env bash
# Every bench answers --help and -h with its usage on stdout and exit status 0, before any work,
# and an unknown option or a missing value with the option named and the usage on stderr, exit 2.
# ctest runs it as BenchCli.HelpAndUsageErrors with the path of every bench built (bench/).
#   bench/help_test.sh BENCH...
set -uo pipefail

[[ $# -gt 0 ]] || { echo "usage: $0 BENCH..." >&2; exit 2; }
scratch=$(mktemp -d "${TMPDIR:-/tmp}/lockstep-bench-help.XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT

# Runs a command, leaving its stdout, stderr and exit status in out, err and rc. Bounded: a bench
# that ignores the option starts its benchmark, which must fail here, not stall the suite.
capture() {
  timeout 60 "$@" >"$scratch/out" 2>"$scratch/err" </dev/null
  rc=$?
  out=$(<"$scratch/out")
  err=$(<"$scratch/err")
}

# Help: status 0, stdout begins with "usage:" (nothing was measured or printed first), and
# nothing on stderr (no model written, no progress line).
check_help() {
  capture "$@"
  local what="FAIL $*:"
  [[ $rc -eq 0 ]] || { echo "$what exit status $rc, not 0"; return 1; }
  [[ $out == usage:* ]] || { echo "$what no usage: first on stdout: ${out:0:200}"; return 1; }
  [[ -z $err ]] || { echo "$what wrote to stderr: ${err:0:200}"; return 1; }
}

# A usage error about OPTION: status 2, nothing on stdout (no work began), and stderr naming
# OPTION and holding the usage.
check_usage_error() {
  local option=$1
  shift
  capture "$@"
  local what="FAIL $*:"
  [[ $rc -eq 2 ]] || { echo "$what exit status $rc, not 2"; return 1; }
  [[ -z $out ]] || { echo "$what wrote to stdout: ${out:0:200}"; return 1; }
  [[ $err == *"$option"* ]] || { echo "$what stderr lacks $option: ${err:0:200}"; return 1; }
  grep -q '^usage:' <<<"$err" || { echo "$what no usage on stderr: ${err:0:200}"; return 1; }
}

# Negative controls: each check rejects a command that breaks its rule (else a bench that ignored
# --help or an unknown option would pass), and accepts one that keeps it.
reject() {
  if "$@" >/dev/null; then
    echo "FAIL control: the check accepted: $*"
    exit 1
  fi
}
usage_error='echo "x: unknown option --x" >&2; echo "usage: x" >&2; exit 2'
reject check_help false
reject check_help true                                         # prints no usage
reject check_help sh -c 'echo "tok/s 12.3"; echo "usage: x"'   # measured before the usage
reject check_help sh -c 'echo "usage: x"; echo "wrote m" >&2'  # and wrote a model
reject check_usage_error --x true                              # ignores the option
reject check_usage_error --x sh -c 'echo "usage: x" >&2; exit 2'       # does not name it
reject check_usage_error --x sh -c 'echo "x: bad --x" >&2; exit 2'     # no usage
reject check_usage_error --x sh -c "echo 'bw 9 GB/s'; $usage_error"    # measured first
reject check_usage_error --x sh -c "${usage_error/exit 2/exit 1}"      # not status 2
if ! check_help sh -c 'echo "usage: x"' || ! check_usage_error --x sh -c "$usage_error"; then
  echo "FAIL control: a check rejected a command that keeps its rule"
  exit 1
fi

failures=0
for bench in "$@"; do
  before=$failures
  check_help "$bench" --help || failures=$((failures + 1))
  check_help "$bench" -h || failures=$((failures + 1))
  check_usage_error --no-such-option "$bench" --no-such-option || failures=$((failures + 1))
  # A missing value: the first option the usage shows with a separate value ("  --name VALUE"),
  # given last (benches whose options all take "=VALUE", as Google Benchmark's, have none).
  capture "$bench" --help
  valued=$(grep -oE '^ +--[a-z][a-z-]* [^ -]' <<<"$out" | head -n 1 | awk '{print $1}')
  if [[ -n $valued ]]; then
    check_usage_error "$valued" "$bench" "$valued" || failures=$((failures + 1))
  fi
  if [[ $failures -eq $before ]]; then
    echo "ok $(basename "$bench"): --help, -h, --no-such-option${valued:+, $valued without a value}"
  fi
done
echo "$# benches, $failures failures"
[[ $failures -eq 0 ]]
