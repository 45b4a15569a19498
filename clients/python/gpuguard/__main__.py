"""python -m gpuguard: print what this process would see (for debugging a
server's environment under gpuguard)."""

import json
import sys

from . import checkpoint_path, last_exit, profile, restarts, status, supervised
from .client import Error


def main() -> int:
    out = {
        "supervised": supervised(),
        "profile": profile().as_dict(),
        "restarts": restarts(),
        "last_exit": last_exit(),
        "checkpoint": checkpoint_path(),
    }
    try:
        out["status"] = status()
    except Error as e:
        out["status_error"] = str(e)
    json.dump(out, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
