"""How many cores one run may use.

A run alone gets every core this process may be scheduled on. A run that shares the machine with others
(`cbr bench --parallel N`) is told its share in CBR_CORES, and both its scripts' thread pools and the
local model's llama.cpp threads keep to it: llama.cpp's threads spin while they wait for each other, so
two servers each running two threads on two cores are slower together than one after the other."""

from __future__ import annotations

import os

from dsagent_cbr.errors import CbrError

ENV = "CBR_CORES"


def usable_cores() -> int:
    share = os.environ.get(ENV, "").strip()
    if share:
        if not share.isdigit() or int(share) < 1:
            raise CbrError(f"{ENV} must be a whole number of cores, at least 1 (it is {share!r}).")
        return int(share)
    return machine_cores()


def machine_cores() -> int:
    return len(os.sched_getaffinity(0)) or os.cpu_count() or 1


def shared() -> bool:
    """Does this run share the machine with others: a share (CBR_CORES) smaller than the machine? A bench
    trial at --parallel 1 is given every core, and runs alone."""
    return usable_cores() < machine_cores()
