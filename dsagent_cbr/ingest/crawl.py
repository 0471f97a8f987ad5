"""Run a spider of the crawlers/ Scrapy project in a child process and read back its items.

A child process keeps Twisted's reactor (which cannot be restarted) out of ours, so the CLI stays
responsive and one process can crawl many times; items come back as JSON lines, errors as items too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.config import CRAWLERS_DIR, PROJECT_ROOT
from dsagent_cbr.errors import CbrError
from dsagent_cbr.ingest.documents import RawDoc, SourceError


@dataclass
class CrawlResult:
    docs: list[RawDoc] = field(default_factory=list)
    errors: list[SourceError] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. the competition's metadata
    log_tail: str = ""

    @property
    def fatal(self) -> list[SourceError]:
        return [e for e in self.errors if e.fatal]


def parse_items(lines: list[str]) -> CrawlResult:
    result = CrawlResult()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            result.errors.append(
                SourceError(url="", reason=f"crawler item {n} is not JSON: {exc.msg}")
            )
            continue
        kind = item.get("type")
        try:
            if kind == "doc":
                result.docs.append(RawDoc.from_item(item))
            elif kind == "error":
                result.errors.append(SourceError.from_item(item))
            elif kind == "competition":
                result.meta = {k: v for k, v in item.items() if k != "type"}
        except (TypeError, ValueError) as exc:
            result.errors.append(
                SourceError(url=str(item.get("url", "")), reason=f"bad crawler item: {exc}")
            )
    return result


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def run_spider(
    spider: str,
    args: Mapping[str, Any],
    *,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 1800,
    on_tick: Callable[[int], None] | None = None,
    crawlers_dir: Path = CRAWLERS_DIR,
) -> CrawlResult:
    """`scrapy crawl SPIDER -a k=v ... -s K=V ... -O items.jsonl` in crawlers/, waiting for it while
    calling on_tick(items so far) about twice a second."""
    if not (crawlers_dir / "scrapy.cfg").is_file():
        raise CbrError(
            f"The crawlers project is missing ({crawlers_dir}/scrapy.cfg); install dsagent-cbr from "
            "its source tree (pip install -e .) to crawl."
        )
    with tempfile.TemporaryDirectory(prefix="cbr-crawl-") as tmp:
        out = Path(tmp) / "items.jsonl"
        log = Path(tmp) / "crawl.log"
        cmd = _scrapy_command(spider, args, overrides or {}, out, log)
        errors = Path(tmp) / "stderr.txt"
        returncode = _wait_for_child(
            cmd, crawlers_dir, _child_env(env or {}), errors, spider, timeout, on_tick, out
        )
        return _read_result(spider, returncode, out, log, errors, on_tick)


def _scrapy_command(
    spider: str, args: Mapping[str, Any], overrides: Mapping[str, Any], out: Path, log: Path
) -> list[str]:
    """The crawl's command line: the spider's arguments (-a), the settings overridden (-s), its items
    to `out` and its log to `log`."""
    cmd = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        spider,
        "-O",
        f"{out}:jsonlines",
        "-s",
        f"LOG_FILE={log}",
    ]
    for key, value in args.items():
        cmd += ["-a", f"{key}={value}"]
    for key, value in overrides.items():
        cmd += ["-s", f"{key}={value}"]
    return cmd


def _child_env(env: Mapping[str, str]) -> dict[str, str]:
    """Our environment with `env` over it, for the crawler's child process."""
    child_env = {**os.environ, **env}
    # the child imports dsagent_cbr from this tree even when it is not installed
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), child_env.get("PYTHONPATH")) if p
    )
    child_env.pop("SCRAPY_SETTINGS_MODULE", None)
    return child_env


def _wait_for_child(
    cmd: list[str],
    crawlers_dir: Path,
    child_env: dict[str, str],
    errors: Path,
    spider: str,
    timeout: float,
    on_tick: Callable[[int], None] | None,
    out: Path,
) -> int:
    """Run the crawl, its stderr to `errors`, ticking with its items so far in `out`; killed when it
    outlasts `timeout` (or we are stopped). Returns its exit code."""
    # a file, not a pipe: a chatty child cannot block on a full pipe
    with errors.open("wb") as err_fh:
        proc = subprocess.Popen(
            cmd,
            cwd=crawlers_dir,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=err_fh,
            start_new_session=True,
        )
        started = time.monotonic()
        try:
            while proc.poll() is None:
                if time.monotonic() - started > timeout:
                    raise CbrError(
                        f"The {spider} crawl took longer than {timeout:.0f} s and was stopped."
                    )
                if on_tick:
                    on_tick(_count_lines(out))
                time.sleep(0.5)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return proc.returncode


def _read_result(
    spider: str,
    returncode: int,
    out: Path,
    log: Path,
    errors: Path,
    on_tick: Callable[[int], None] | None,
) -> CrawlResult:
    """The finished crawl's items, with the tail of its log and stderr; a failed crawl is an error, and
    a spider closed for a reason of its own a fatal error among the items'."""
    stderr = errors.read_text(encoding="utf-8", errors="replace")
    log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    tail = "\n".join((log_text + stderr).strip().splitlines()[-30:])
    if returncode != 0:
        raise CbrError(
            f"The {spider} crawler failed (exit {returncode}).", details=tail.splitlines()
        )
    lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
    result = parse_items(lines)
    result.log_tail = tail
    closed = _close_reason(log_text)
    if closed and closed not in ("finished", "shutdown"):
        result.errors.append(SourceError(url="", reason=closed, stage="crawl", fatal=True))
    if on_tick:
        on_tick(len(lines))
    return result


def _close_reason(log_text: str) -> str:
    """Scrapy logs "Spider closed (reason)"; a CloseSpider from the spider puts its message there."""
    for line in reversed(log_text.splitlines()):
        if "Spider closed (" in line:
            return line.split("Spider closed (", 1)[1].rsplit(")", 1)[0]
    return ""
