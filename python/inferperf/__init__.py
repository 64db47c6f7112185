"""inferperf: the `inferperf` command, installed by this wheel as a binary on PATH."""

import os
import sys
import sysconfig


def binary():
    """The path of the `inferperf` binary the wheel installed beside this interpreter's scripts."""
    name = "inferperf.exe" if os.name == "nt" else "inferperf"
    candidates = [os.path.join(sysconfig.get_path("scripts"), name),
                  os.path.join(os.path.dirname(sys.executable), name)]
    user = sysconfig.get_path("scripts", f"{os.name}_user")
    if user:
        candidates.append(os.path.join(user, name))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("the inferperf binary is not installed beside this Python: " + ", ".join(candidates))
