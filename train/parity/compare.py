"""Compares lockstep's logits (raw f32 from lockstep_logits) with transformers' reference logits
(parity_f32.npz / parity_f64.npz from the training run) under the parity tests' bounds: max
|Δlogit| < 1e-3, identical argmax and identical top-5 set at every position. Standard library only.
Usage: compare.py parity_prompts.json LOCKSTEP_PREFIX REF.npz [REF2.npz ...]"""
import array
import ast
import json
import sys
import zipfile

BOUND = 1e-3


def read_npz(path):
    out = {}
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            raw = z.read(name)
            assert raw[:6] == b"\x93NUMPY", name
            hlen = int.from_bytes(raw[8:10], "little") if raw[6] == 1 else int.from_bytes(raw[8:12], "little")
            off = 10 if raw[6] == 1 else 12
            hdr = ast.literal_eval(raw[off:off + hlen].decode("latin1"))
            assert hdr["descr"] == "<f4" and not hdr["fortran_order"], hdr
            a = array.array("f")
            a.frombytes(raw[off + hlen:])
            out[name[:-4]] = (hdr["shape"], a)
    return out


def top5(row):
    return sorted(sorted(range(len(row)), key=lambda i: (-row[i], i))[:5])


def main():
    prompts = json.load(open(sys.argv[1]))
    prefix = sys.argv[2]
    ok = True
    for ref_path in sys.argv[3:]:
        ref = read_npz(ref_path)
        for k, p in enumerate(prompts):
            (rows, V), r = next(v for key, v in ref.items() if key.endswith(f"_{k}"))
            got = array.array("f")
            with open(f"{prefix}_{k}.f32", "rb") as f:
                got.frombytes(f.read())
            assert len(got) == rows * V, (len(got), rows, V)
            max_abs, arg_bad, top_bad = 0.0, 0, 0
            for i in range(rows):
                g, e = got[i * V:(i + 1) * V], r[i * V:(i + 1) * V]
                max_abs = max(max_abs, max(abs(a - b) for a, b in zip(g, e)))
                arg_bad += max(range(V), key=g.__getitem__) != max(range(V), key=e.__getitem__)
                top_bad += top5(g) != top5(e)
            good = max_abs < BOUND and arg_bad == 0 and top_bad == 0
            ok &= good
            print(f"{ref_path.split('/')[-1]} prompt {k}: {len(p['ids'])} tokens, rows {rows}, "
                  f"max|dlogit| {max_abs:.3g} (bound {BOUND:g}), argmax diffs {arg_bad}, top5 diffs {top_bad}"
                  f" -> {'OK' if good else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
