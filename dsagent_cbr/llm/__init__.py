"""The LLM layer: model resolution, one client (retries, ledger, budget, cache), the embedded
llama.cpp server, prompts and reply parsers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:
    from dsagent_cbr.config import Settings
    from dsagent_cbr.llm.client import LLMClient

LOCAL_MAX_TOKENS = 1024  # a small model left unbounded can ramble to the end of its context
# On a CPU a long prompt can take minutes; a timed-out request also keeps the one-slot server busy, so
# retrying it only queues the same work again.
LOCAL_TIMEOUT, LOCAL_RETRIES = 1800.0, 1


@contextlib.contextmanager
def open_llm(settings: Settings, run_dir: Path | None = None, seed: int = 0) -> Iterator[LLMClient]:
    """A ready client for settings.model; for local and gguf: models, the server lives as long as the
    block. `seed` is the trial's: it seeds every call's sampling and is part of every cache key."""
    from dsagent_cbr.llm.cache import ResponseCache
    from dsagent_cbr.llm.client import LLMClient
    from dsagent_cbr.llm.ledger import Ledger
    from dsagent_cbr.llm.local_server import local_server
    from dsagent_cbr.llm.models import settings_model

    spec = settings_model(settings)
    if spec.provider == "none":
        raise CbrError(
            "No model configured: pass --model (e.g. gpt-4o, mixtral, local) or set CBR_MODEL."
        )
    ledger = Ledger(
        run_dir / "ledger.jsonl" if run_dir else None, settings.max_cost, settings.max_tokens
    )
    cache = ResponseCache(settings.cache_path / "responses.sqlite") if settings.use_cache else None
    try:
        with contextlib.ExitStack() as stack:
            max_tokens = settings.reply_tokens
            timeout = settings.request_timeout
            retries = settings.max_retries
            if spec.provider == "local":
                assert spec.gguf is not None
                url = stack.enter_context(
                    local_server(
                        spec.gguf, log_path=run_dir / "llm-server.log" if run_dir else None
                    )
                )
                spec, max_tokens = (
                    replace(spec, base_url=url, api_key="not-needed"),
                    max_tokens or LOCAL_MAX_TOKENS,
                )
                timeout, retries = max(timeout, LOCAL_TIMEOUT), min(retries, LOCAL_RETRIES)
            yield LLMClient(
                spec,
                ledger=ledger,
                cache=cache,
                timeout=timeout,
                max_retries=retries,
                default_max_tokens=max_tokens,
                seed=seed,
            )
    finally:
        if cache is not None:
            cache.close()
