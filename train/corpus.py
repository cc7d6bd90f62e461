"""Builds the Python-source training corpus from what is installed: CPython's stdlib plus
site-packages distributions whose metadata declares only MIT, BSD, Apache-2.0 or PSF terms."""
import csv
import hashlib
import os
import re
import sysconfig

# SPDX ids / free-text fragments we accept; anything else in a licence expression rejects the
# distribution, so dual- or multi-licensed packages with copyleft parts are left out.
_OK_SPDX = {"MIT", "MIT-0", "BSD-2-CLAUSE", "BSD-3-CLAUSE", "BSD", "APACHE-2.0", "APACHE",
            "PSF-2.0", "PYTHON-2.0"}
_BAD_WORDS = re.compile(r"GPL|MPL|MOZILLA|EPL|ECLIPSE|PROPRIETARY|COMMERCIAL|NVIDIA|CC-BY|"
                        r"UNKNOWN|OTHER|AGPL|CUSTOM|SEE LICENSE", re.I)
_CLASSIFIER_OK = re.compile(r"License :: OSI Approved :: (MIT License|BSD License|"
                            r"Apache Software License|Python Software Foundation License)$")


def _classify(meta):
    """Returns (licence string, accepted?) from a METADATA dict of lists."""
    expr = (meta.get("License-Expression") or [""])[0].strip()
    if expr:
        parts = [p for p in re.split(r"\s+(?:AND|OR|WITH)\s+|[()]", expr.upper()) if p.strip()]
        ok = all(p.strip() in _OK_SPDX for p in parts)
        return expr, ok
    classifiers = [c for c in meta.get("Classifier", []) if c.startswith("License ::")]
    lic = (meta.get("License") or [""])[0].strip().splitlines()[0][:80] if meta.get("License") else ""
    if classifiers:
        ok = all(_CLASSIFIER_OK.match(c) for c in classifiers) and not _BAD_WORDS.search(lic)
        return "; ".join(c.split(" :: ")[-1] for c in classifiers), ok
    if lic and not _BAD_WORDS.search(lic) and re.search(r"\b(MIT|BSD|Apache|PSF)\b", lic, re.I):
        return lic, True
    return lic or "(none declared)", False


def _read_metadata(path):
    meta = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line in ("\n", "\r\n"):
                break  # body (long description) follows the blank line
            if ":" in line and not line.startswith((" ", "\t")):
                k, v = line.split(":", 1)
                meta.setdefault(k.strip(), []).append(v.strip())
    return meta


def stdlib_dir():
    return sysconfig.get_paths()["stdlib"]


def scan_distributions():
    """One record per installed distribution: name, version, licence, accepted, its .py files."""
    purelib = sysconfig.get_paths()["purelib"]
    out = []
    for entry in sorted(os.listdir(purelib)):
        if not entry.endswith(".dist-info"):
            continue
        d = os.path.join(purelib, entry)
        if not os.path.exists(os.path.join(d, "METADATA")):
            continue
        meta = _read_metadata(os.path.join(d, "METADATA"))
        lic, ok = _classify(meta)
        files = []
        rec = os.path.join(d, "RECORD")
        if os.path.exists(rec):
            with open(rec, encoding="utf-8", errors="replace") as f:
                for row in csv.reader(f):
                    if row and row[0].endswith(".py") and not row[0].startswith(".."):
                        p = os.path.normpath(os.path.join(purelib, row[0]))
                        if os.path.isfile(p):
                            files.append(p)
        size = sum(os.path.getsize(p) for p in files)
        out.append({"name": (meta.get("Name") or [entry])[0], "version": (meta.get("Version") or [""])[0],
                    "license": lic, "accepted": ok, "n_py": len(files), "py_bytes": size,
                    "files": files})
    return out


def stdlib_files():
    root = stdlib_dir()
    res = []
    for dp, dn, fn in os.walk(root):
        dn[:] = [x for x in dn if x not in ("site-packages", "dist-packages", "__pycache__")]
        for n in fn:
            if n.endswith(".py"):
                res.append(os.path.join(dp, n))
    return sorted(res)


# Vendored copies carry their own (sometimes copyleft) licences: leave them all out.
_VENDORED = re.compile(r"/(_vendor|vendor|vendored|_vendored|third_party|_third_party|extern|_extern)/")


def collect(max_file_bytes=400_000, exclude=()):
    """Returns (files, dists): files is a list of (path, source_tag, licence, text) with exact
    duplicates and vendored code removed; dists summarises every distribution and its verdict."""
    items = [(p, "cpython-stdlib", "PSF-2.0") for p in stdlib_files()]
    dists = scan_distributions()
    for d in dists:
        if d["name"].lower() in {e.lower() for e in exclude}:
            d["accepted"] = False
            d["license"] += " (excluded by config)"
        if d["accepted"]:
            items += [(p, f"{d['name']}=={d['version']}", d["license"]) for p in sorted(d["files"])]
    seen, out = set(), []
    for p, tag, lic in items:
        if _VENDORED.search(p):
            continue
        try:
            if os.path.getsize(p) > max_file_bytes or os.path.getsize(p) < 64:
                continue
            with open(p, "rb") as f:
                raw = f.read()
            text = raw.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\x00" in text:
            continue
        h = hashlib.sha1(raw).hexdigest()
        if h in seen:
            continue
        seen.add(h)
        out.append((p, tag, lic, text))
    summary = [{k: v for k, v in d.items() if k != "files"} for d in dists]
    return out, summary


def is_heldout(path, percent=1.0):
    """Whole-file split keyed on the hash of the last two path components, so it is stable
    across machines and near-twins (lightning/pytorch_lightning copies) land on the same side."""
    key = "/".join(path.split("/")[-2:])
    h = int(hashlib.sha1(key.encode()).hexdigest()[:8], 16)
    return (h % 10000) < percent * 100
