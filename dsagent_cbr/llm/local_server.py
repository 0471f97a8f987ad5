"""The embedded model: llama.cpp's own OpenAI-compatible server (the xllamacpp wheel) serving a GGUF
file on 127.0.0.1. It runs in a child process of its own, so stopping it is a kill that always works."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from dsagent_cbr.cores import usable_cores
from dsagent_cbr.errors import InfrastructureError

DEFAULT_CTX = 8192


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(
    gguf: Path,
    port: int,
    host: str = "127.0.0.1",
    n_ctx: int = DEFAULT_CTX,
    threads: int | None = None,
    parent: int | None = None,
) -> None:
    """Start the server in this process and block until a signal ends it, or until `parent` is gone."""
    try:
        import xllamacpp
    except ImportError as exc:
        raise InfrastructureError(
            "The local server needs the xllamacpp package: pip install -e '.[local]'."
        ) from exc
    params = xllamacpp.CommonParams()
    params.model.path = str(gguf)
    params.n_ctx = n_ctx
    params.port = port
    params.hostnames = [host]
    threads = threads or usable_cores()
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xllamacpp.Server(params)
    print(
        f"serving {gguf.name} at http://{host}:{port}/v1 ({server.listening_address})", flush=True
    )
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with contextlib.suppress(KeyboardInterrupt):
        # a parent killed with SIGKILL cannot stop us, and we run in a session of our own: once it is
        # gone we are re-parented, and a server nobody will ever stop must not hold the cores
        while not stop and (parent is None or os.getppid() == parent):
            time.sleep(0.2)


def wait_ready(
    health_url: str, proc: subprocess.Popen, timeout: float, what: str = "The local model server"
) -> None:
    """Poll `health_url` until it answers 200; InfrastructureError if `proc` exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise InfrastructureError(
                f"{what} exited with code {proc.returncode} before it was ready."
            )
        try:
            with urllib.request.urlopen(health_url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise InfrastructureError(f"{what} did not answer {health_url} within {timeout:g}s.")


@contextlib.contextmanager
def local_server(
    gguf: Path, *, port: int | None = None, log_path: Path | None = None, ready_timeout: float = 180
) -> Iterator[str]:
    """Run the server for the length of a `with` block; yields its base URL. Stopped on any exit,
    errors and Ctrl-C included."""
    port = port or free_port()
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsagent_cbr.llm.local_server",
            "--gguf",
            str(gguf),
            "--port",
            str(port),
            "--parent",
            str(os.getpid()),
        ],
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(f"{url}/models", proc, ready_timeout)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if log_path:
            log.close()  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a GGUF model with llama.cpp on 127.0.0.1.")
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--ctx", type=int, default=DEFAULT_CTX)
    parser.add_argument("--parent", type=int, help="Stop when this process is gone.")
    args = parser.parse_args()
    serve(args.gguf, args.port, args.host, args.ctx, parent=args.parent)


if __name__ == "__main__":
    main()
