"""A miniature library: NKI kernels behind a switch, as a project's simulator tests use them."""

import os

#: The project's own switch: its kernels run through ``nki.simulate`` when set.
USE_SIMULATOR = os.environ.get("MINIPROJ_USE_SIMULATOR", "") == "1"
