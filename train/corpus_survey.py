"""Survey of the permissively licensed Python source on the training machine (read-only; prints JSON)."""
import json
import os
import sys
import sysconfig

sys.path.insert(0, os.path.dirname(__file__))
from corpus import scan_distributions, stdlib_dir  # noqa: E402

if __name__ == "__main__":
    dists = scan_distributions()
    out = {"stdlib": stdlib_dir(), "purelib": sysconfig.get_paths()["purelib"], "dists": dists}
    json.dump(out, sys.stdout, indent=1)
