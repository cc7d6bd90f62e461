# Helpers the GPU scripts source: a build's binaries, and the model file of a preset (written,
# or the one --model named). The caller sets `given_model` (empty without --model).

# DIR NAME: the path of NAME in DIR, DIR/src or DIR/bench; exits 2 when none is executable.
find_bin() {
  for d in "$1" "$1/src" "$1/bench"; do
    [[ -x "$d/$2" ]] && { echo "$d/$2"; return; }
  done
  echo "$(basename "$0" .sh): $2 not found under $1" >&2
  exit 2
}

# PRESETS: --model names one file, so it takes one preset (exits 2 otherwise).
check_given_model() {
  [[ -z "$given_model" || "$1" != *,* ]] && return
  echo "$(basename "$0" .sh): --model takes one preset, not $1" >&2
  exit 2
}

# WRITER PRESET PATH: sets `model` to --model's file, or writes PRESET in the Q4_K_M mix to PATH
# (removed at exit, or by drop_model).
preset_model() {
  if [[ -n "$given_model" ]]; then
    model=$given_model
    return
  fi
  model=$3
  trap 'rm -f "$model"' EXIT
  "$1" --write-preset "$2" "$model" Q4_K_M >&2
}

# Removes the model preset_model wrote (never --model's file).
drop_model() {
  [[ -n "$given_model" ]] || rm -f "$model"
}
