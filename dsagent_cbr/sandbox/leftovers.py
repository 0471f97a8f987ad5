"""What a cbr killed with SIGKILL leaves behind (its sandboxes' cgroups, scratch filesystems) carries the
pid of the cbr that made it in its name; whatever's maker is no longer running is left over, and the
next cbr clears it."""

from __future__ import annotations

import os


def maker_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # running, as another user
        return True
    return True
