"""Options shared by the commands, defined once so every command spells them the same way."""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import click

from dsagent_cbr.errors import CbrError
from dsagent_cbr.sandbox.bubblewrap import SandboxPolicy
from dsagent_cbr.stores import STORES


def _stack(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


# the sandbox's defaults are the commands' defaults
_LIMITS = {f.name: f.default for f in fields(SandboxPolicy)}

sandbox_options = _stack(
    click.option(
        "--timeout",
        type=float,
        default=_LIMITS["timeout"],
        show_default=True,
        help="Time limit per script run (s).",
    ),
    click.option(
        "--memory",
        type=float,
        default=_LIMITS["memory_mb"],
        show_default=True,
        help="Memory limit per script run (MB; processes, /tmp and /dev/shm together).",
    ),
    click.option(
        "--disk",
        type=float,
        default=_LIMITS["disk_mb"],
        show_default=True,
        help="Largest file a script may write, and how much its workspace may grow (MB).",
    ),
    click.option(
        "--allow-network",
        is_flag=True,
        help="Let scripts reach the network (recorded in every result). This shares the host's network "
        "namespace: the host's loopback services and abstract unix sockets become reachable too.",
    ),
    click.option(
        "--no-sandbox",
        is_flag=True,
        help="Run scripts without bubblewrap isolation (only where it is unavailable; recorded).",
    ),
)

bank_options = _stack(
    click.option("--store", type=click.Choice(STORES), default=None, help="Vector store backend."),
    click.option(
        "--bank-dir", type=click.Path(path_type=Path), default=None, help="Bank directory."
    ),
    click.option("--chroma-url", default=None, help="Chroma server URL (default: embedded)."),
)

# cbr analyze's, and the DABench bench's for each of its questions
examples_option = click.option(
    "-k",
    "--k",
    "k",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Past analyses of other questions shown to the plan, from the bank (0: none).",
)
model_option = click.option(
    "--model", default=None, help="Model alias or name (gpt-4o, mixtral, local, gguf:PATH, none)."
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
runs_dir_option = click.option(
    "--runs-dir", type=click.Path(path_type=Path), default=None, help="Where run folders go."
)
no_cache_option = click.option(
    "--no-cache", is_flag=True, help="Do not answer from the response cache."
)
seed_option = click.option(
    "--seed",
    type=int,
    default=None,
    help="Trial seed: seeds sampling and the cache key (default: a fresh one, recorded).",
)


refit_option = click.option(
    "--refit/--no-refit",
    default=True,
    show_default=True,
    help="The submission: the selected solution retrained on every labelled row (its selection "
    "score stays the estimate), or --no-refit its first fit.",
)
mlflow_option = click.option(
    "--mlflow",
    "mlflow_uri",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[URI]",
    help="Log the run to MLflow: ./mlflow.db by default, or any tracking URI.",
)


def settings_flags(
    model: str | None,
    store: str | None,
    bank_dir: Path | None,
    chroma_url: str | None,
    runs_dir: Path | None,
    max_cost: float | None,
    no_cache: bool,
) -> dict[str, Any]:
    """The settings a run's command line gives (config.load_settings's flags; None: not given)."""
    return {
        "model": model,
        "store": store,
        "bank_dir": bank_dir,
        "chroma_url": chroma_url,
        "runs_dir": runs_dir,
        "max_cost": max_cost,
        "use_cache": False if no_cache else None,
    }


def policy_from(
    timeout: float, memory: float, disk: float, allow_network: bool, no_sandbox: bool
) -> SandboxPolicy:
    return SandboxPolicy(
        timeout=timeout,
        memory_mb=memory,
        disk_mb=disk,
        allow_network=allow_network,
        isolate=not no_sandbox,
    )


def _setting(name: str, value: Any) -> str:
    """One limit of a policy as the command line spells it (a flag where there is one)."""
    if isinstance(value, bool):  # before the numbers: a bool is an int
        words = {
            "allow_network": ("--allow-network", "no network"),
            "isolate": ("the sandbox", "--no-sandbox"),
            "cgroups": ("cgroups on", "cgroups off"),
        }
        on, off = words.get(name, (f"{name} on", f"{name} off"))
        return on if value else off
    flag = {"timeout": "--timeout", "memory_mb": "--memory", "disk_mb": "--disk"}.get(name, name)
    if isinstance(value, (int, float)):
        return f"{flag} {int(value) if isinstance(value, float) and value.is_integer() else value}"
    return f"{flag} {json.dumps(value, default=str)[:40]}"  # an edited file's value, escaped for the terminal


def _differs(old: Any, new: Any) -> bool:
    # 1 == True, but not as a limit
    return old != new or isinstance(old, bool) != isinstance(new, bool)


def policy_change(before: Any, now: SandboxPolicy) -> str | None:
    """The one line a resume prints when its sandbox differs from the one the run used so far (`before`,
    its config.json's policy: anything at all, since the file may have been edited), or None."""
    before = before if isinstance(before, dict) else {}
    changed = [
        (name, before[name], value)
        for name, value in asdict(now).items()
        if name in before and _differs(before[name], value)
    ]
    if not changed:
        return None
    used = ", ".join(_setting(name, value) for name, _, value in changed)
    was = ", ".join(_setting(name, old) for name, old, _ in changed)
    keep = [
        _setting(name, old)
        for name, old, _ in changed
        if isinstance(old, (bool, int, float)) and _setting(name, old).startswith("--")
    ]
    tail = f"; give {' '.join(keep)} to keep {'it' if len(keep) == 1 else 'them'}" if keep else ""
    return f"resuming with {used} (the run so far used {was}{tail})"


def trial_seed(seed: int | None) -> int:
    """A run's seed: the one given, else a fresh one, so that repeats are independent samples."""
    return seed if seed is not None else secrets.randbelow(2**31)


def interrupt_once() -> None:
    """Ctrl-C (SIGINT) and SIGTERM (a scheduler, `kill`) end a run alike: the first raises KeyboardInterrupt
    where cbr is, and the run stops cleanly (its nodes cancelled, its record saved: the summary says
    interrupted, exit 130). One that comes while it stops is only noted: raised inside the stop's own
    waits and locks it would break them and leave a record that says the run completed. A third quits at
    once, the record as it is (the sandboxes die with cbr)."""
    seen = [0]

    def handler(signum: int, frame: Any) -> None:
        seen[0] += 1
        if seen[0] == 1:
            raise KeyboardInterrupt
        if seen[0] == 2:
            os.write(
                2, b"cbr is stopping: its record is being saved (a third interrupt quits at once)\n"
            )
            return
        os._exit(130)

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, handler)


def budget_seconds(budget: str) -> float:
    """--budget as seconds ('15m', '90s', '300'), or one sentence on what is wrong with it."""
    from dsagent_cbr.clock import parse_duration

    try:
        return parse_duration(budget)
    except ValueError as exc:
        raise CbrError(f"--budget: {exc}.") from None
