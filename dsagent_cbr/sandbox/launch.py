"""Runs as a process of its own between cbr and the sandbox (`python -I -S launch.py SETTINGS COMMAND...`):
it applies the run's resource limits to itself and joins the run's cgroups, then becomes COMMAND
(bubblewrap) by exec, so that every process of the run starts inside both.

cbr once did this in a preexec_fn, which CPython documents as unsafe in a process that runs threads (a
search runs its nodes in threads): the forked child may deadlock before it execs. This file imports
only the standard library, so that it starts in milliseconds."""

import json
import os
import resource
import sys


def main() -> None:
    settings = json.loads(sys.argv[1])
    for name, value in settings["limits"].items():
        resource.setrlimit(getattr(resource, name), (value, value))
    for procs in settings["cgroups"]:
        with open(procs, "w") as fh:
            fh.write(str(os.getpid()))
    os.execvp(sys.argv[2], sys.argv[2:])


if __name__ == "__main__":
    main()
