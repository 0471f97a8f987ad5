"""`--allow-network` shares the host's network namespace: what that opens beyond the internet (the
host's loopback services and abstract unix sockets) is true, and the README and --help say so."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import socket, sys
def reach(family, address):
    try:
        with socket.socket(family) as s:
            s.settimeout(3)
            s.connect(address)
        return "open"
    except OSError:
        return "closed"
print("loopback", reach(socket.AF_INET, ("127.0.0.1", {port})))
print("abstract", reach(socket.AF_UNIX, "\\0{name}"))
"""


def probe(concrete, tmp_path: Path, *flags: str) -> dict[str, str]:
    """What a script run by `cbr run` can reach of a TCP listener and an abstract socket on this host."""
    name = f"cbr-test-{os.getpid()}-{len(flags)}"
    with socket.socket() as tcp, socket.socket(socket.AF_UNIX) as abstract:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        abstract.bind("\0" + name)
        abstract.listen()
        script = tmp_path / f"probe{len(flags)}.py"
        script.write_text(textwrap.dedent(PROBE.format(port=tcp.getsockname()[1], name=name)))
        out = tmp_path / f"run{len(flags)}"
        proc = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "run", str(concrete.root), str(script),
                               "--out", str(out), "--timeout", "60", *flags], capture_output=True, text=True)
    assert "Traceback" not in proc.stderr, proc.stderr
    stdout = json.loads((out / "result.json").read_text())["stdout"]
    return dict(re.findall(r"^(loopback|abstract) (open|closed)$", stdout, re.M))


@pytest.mark.integration
def test_allow_network_opens_host_loopback_and_abstract_sockets_and_says_so(concrete, tmp_path):
    assert probe(concrete, tmp_path) == {"loopback": "closed", "abstract": "closed"}
    assert probe(concrete, tmp_path, "--allow-network") == {"loopback": "open", "abstract": "open"}
    helps = subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "develop", "--help"], capture_output=True,
                           text=True).stdout
    flat = " ".join(helps.split())
    assert "host's network namespace" in flat and "loopback" in flat and "abstract unix sockets" in flat
    page = " ".join((REPO / "docs" / "sandbox.md").read_text(encoding="utf-8").split())
    sandbox = page.split("## The network: `--allow-network`", 1)[1].split("## ", 1)[0]
    assert "`--allow-network` shares the host's network namespace" in sandbox
    assert "loopback" in sandbox and "abstract unix sockets" in sandbox
