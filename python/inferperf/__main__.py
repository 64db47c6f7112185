"""`python -m inferperf ARGS...` runs the installed `inferperf` binary with ARGS."""

import os
import sys

from inferperf import binary


def main():
    path = binary()
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
