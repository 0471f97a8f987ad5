"""One Settings object, layered: defaults < config file < environment (CBR_*) < command-line flags."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def default_home() -> Path:
    return Path(os.environ.get("CBR_HOME", Path.home() / ".cache" / "dsagent-cbr"))


def config_paths() -> list[Path]:
    """Config files read in order; later ones win."""
    return [Path.home() / ".config" / "cbr" / "config.toml", Path.cwd() / "cbr.toml"]


@dataclass(frozen=True)
class Settings:
    home: Path = field(default_factory=default_home)
    runs_dir: Path = Path("runs")
    casebank_dir: Path = PROJECT_ROOT / "casebank"
    tasks_dir: Path = PROJECT_ROOT / "tasks"
    bank_dir: Path | None = None  # None: <home>/bank
    store: str = "chroma"  # chroma | faiss
    chroma_url: str | None = None
    embedding_model: str = "all-MiniLM-L6-v2"
    model: str = "none"
    base_url: str | None = None
    model_name: str | None = None  # what the server calls the model (an Ollama tag); None: the alias's name
    api_key: str | None = None
    request_timeout: float = 120.0
    max_retries: int = 4
    max_cost: float | None = None
    max_tokens: int | None = None
    use_cache: bool = True

    @property
    def bank_path(self) -> Path:
        return self.bank_dir if self.bank_dir is not None else self.home / "bank"

    @property
    def cache_path(self) -> Path:
        return self.home / "cache"

    def with_overrides(self, **values: Any) -> Settings:
        """Apply command-line flags; None means 'not given' and keeps the layer below."""
        given = {k: _coerce(k, v) for k, v in values.items() if v is not None}
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise CbrError(f"Unknown setting(s): {', '.join(sorted(unknown))}.")
        return replace(self, **given)


_PATH_FIELDS = {"home", "runs_dir", "casebank_dir", "tasks_dir", "bank_dir"}
_FLOAT_FIELDS = {"request_timeout", "max_cost"}
_INT_FIELDS = {"max_retries", "max_tokens"}
_BOOL_FIELDS = {"use_cache"}


def _coerce(name: str, value: Any) -> Any:
    try:
        if name in _PATH_FIELDS:
            return Path(value).expanduser()
        if name in _FLOAT_FIELDS:
            return float(value)
        if name in _INT_FIELDS:
            return int(value)
        if name in _BOOL_FIELDS and isinstance(value, str):
            return value.strip().lower() in {"1", "true", "yes", "on"}
    except ValueError as exc:
        raise CbrError(f"Setting {name} has a bad value {value!r}: {exc}.") from exc
    return value


def _from_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise CbrError(f"Config file {path} is not valid TOML: {exc}.") from exc
    section = data.get("cbr", data)
    return {k.replace("-", "_"): v for k, v in section.items() if not isinstance(v, dict)}


def _from_env(environ: dict[str, str]) -> dict[str, Any]:
    names = {f.name for f in fields(Settings)}
    out = {}
    for key, value in environ.items():
        if key.startswith("CBR_") and key[4:].lower() in names:
            out[key[4:].lower()] = value
    return out


def load_settings(environ: dict[str, str] | None = None, **flags: Any) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    settings = Settings()
    for path in config_paths():
        if path.is_file():
            settings = settings.with_overrides(**_from_file(path))
    settings = settings.with_overrides(**_from_env(environ))
    return settings.with_overrides(**flags)
