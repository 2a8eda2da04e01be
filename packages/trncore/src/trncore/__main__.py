"""``python -m trncore doctor``: what this host has and what each library would do."""

from __future__ import annotations

import sys

from trncore.doctor import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
