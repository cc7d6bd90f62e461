"""Rebuilds the default pair's tokenizer.json from a GGUF's tokenizer.ggml.* arrays, so a new
target can be trained on exactly the ids of the committed one (and perplexities compare)
without a second copy of the tokenizer in the repository.

Usage: python3 train/gguf_tokenizer.py models/lockstep-code-target.gguf OUT/tokenizer.json"""
import json
import struct
import sys

import tok as tokmod

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


def _read(f, fmt):
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def _value(f, kind):
    if kind == _STRING:
        return f.read(_read(f, "<Q")).decode("utf-8")
    if kind == _ARRAY:
        item, n = _read(f, "<I"), _read(f, "<Q")
        return [_value(f, item) for _ in range(n)]
    if kind not in _SCALARS:
        raise ValueError(f"unknown GGUF value type {kind}")
    return _read(f, _SCALARS[kind])


def read_metadata(path):
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        version, _, n_kv = _read(f, "<I"), _read(f, "<Q"), _read(f, "<Q")
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        meta = {}
        for _ in range(n_kv):
            key = f.read(_read(f, "<Q")).decode("utf-8")
            meta[key] = _value(f, _read(f, "<I"))
        return meta


def tokenizer_json(meta):
    tokens = meta["tokenizer.ggml.tokens"]
    first_learned = len(tokmod.SPECIALS) + 256
    expected = tokmod.SPECIALS + [f"<0x{b:02X}>" for b in range(256)]
    if tokens[:first_learned] != expected:
        raise ValueError("the GGUF's first tokens are not the default pair's specials and byte tokens")
    learned = {piece: i for i, piece in enumerate(tokens) if i >= first_learned}
    merges = [m.split(" ", 1) for m in meta["tokenizer.ggml.merges"]]
    out = tokmod.build_json(learned, merges)
    if list(out["model"]["vocab"]) != tokens or len(out["model"]["merges"]) != len(merges):
        raise ValueError("rebuilding the vocabulary changed ids or dropped merges")
    return out


def load(path):
    """A tokenizer.json, or the one a .gguf file's tokenizer.ggml.* arrays describe."""
    if path.endswith(".gguf"):
        return tokenizer_json(read_metadata(path))
    with open(path) as f:
        return json.load(f)


def main():
    src, dst = sys.argv[1], sys.argv[2]
    out = tokenizer_json(read_metadata(src))
    with open(dst, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
    print(f"{dst}: {len(out['model']['vocab'])} tokens, {len(out['model']['merges'])} merges from {src}")


if __name__ == "__main__":
    main()
