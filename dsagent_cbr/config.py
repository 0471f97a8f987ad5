"""One Settings object, layered: defaults < config file < environment (CBR_*) < command-line flags.

pydantic-settings reads the layers (TOML files, CBR_* variables); pydantic validates the merged values
once, in `Settings`, so a bad value from any layer, or one set later with `dataclasses.replace`, fails
with one sentence naming the setting."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic.dataclasses import dataclass
from pydantic_settings import BaseSettings, EnvSettingsSource, TomlConfigSettingsSource

from dsagent_cbr.errors import CbrError

# The source tree the package sits in. Its casebank/ and tasks/ are only the defaults of settings below
# (a user points elsewhere); the folders named after them are cbr's own code and data, shipped beside the
# package and found here, since nothing a user configures should move them.
PROJECT_ROOT = Path(__file__).resolve().parents[1]
CRAWLERS_DIR = PROJECT_ROOT / "crawlers"  # the Scrapy project ingest/crawl.py runs
# the maintained benchmarks: deployment references, the baselines table, results
BENCHMARKS_DIR = PROJECT_ROOT / "benchmarks"


def default_home() -> Path:
    """cbr's own folder (the bank, the index of runs, the model replies' cache): CBR_HOME, else the user's
    data folder, not a cache folder, because a bank grown by past runs cannot be rebuilt."""
    if os.environ.get("CBR_HOME"):
        return Path(os.environ["CBR_HOME"])
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "dsagent-cbr"


def config_paths() -> list[Path]:
    """Config files read in order; later ones win."""
    return [Path.home() / ".config" / "cbr" / "config.toml", Path.cwd() / "cbr.toml"]


# A dataclass (not a BaseSettings model) so that callers may `dataclasses.replace` it; pydantic still
# validates every construction, replace included.
@dataclass(frozen=True, config=ConfigDict(extra="forbid", validate_default=True))
class Settings:
    home: Path = Field(default_factory=default_home)
    runs_dir: Path = Path("runs")
    casebank_dir: Path = PROJECT_ROOT / "casebank"
    tasks_dir: Path = PROJECT_ROOT / "tasks"
    bank_dir: Path | None = None  # None: <home>/bank
    store: str = "chroma"  # one of stores.STORES (checked when the bank opens)
    chroma_url: str | None = None
    embedding_model: str = "all-MiniLM-L6-v2"
    # None: <bank>/embeddings.sqlite. One file may serve several banks: vectors are keyed by model and text
    embedding_cache: Path | None = None
    model: str = "none"
    base_url: str | None = None
    # what the server calls the model (an Ollama tag); None: the alias's name
    model_name: str | None = None
    api_key: str | None = None
    request_timeout: float = 120.0
    max_retries: int = 4
    max_cost: float | None = None
    max_tokens: int | None = None
    # the longest reply asked for (None: the server's limit; local: 1024)
    reply_tokens: int | None = None
    use_cache: bool = True

    @field_validator("home", "runs_dir", "casebank_dir", "tasks_dir", "bank_dir", "embedding_cache")
    @classmethod
    def _expand_user(cls, path: Path | None) -> Path | None:
        return None if path is None else path.expanduser()

    @property
    def bank_path(self) -> Path:
        return self.bank_dir if self.bank_dir is not None else self.home / "bank"

    @property
    def cache_path(self) -> Path:
        return self.home / "cache"


def _validated(build: Callable[[], Settings]) -> Settings:
    try:
        return build()
    except ValidationError as exc:
        problems = exc.errors()
        unknown = sorted(
            str(p["loc"][0]) for p in problems if p["type"] == "unexpected_keyword_argument"
        )
        if unknown:
            raise CbrError(f"Unknown setting(s): {', '.join(unknown)}.") from exc
        first = problems[0]
        reason = first["msg"].rstrip(".")
        raise CbrError(
            f"Setting {first['loc'][0]} has a bad value {first['input']!r}: {reason}."
        ) from exc


# The layers' reader knows the setting names; it passes values through untyped for Settings to check.
_Layers = create_model(
    "_Layers", __base__=BaseSettings, **{f.name: (Any, None) for f in fields(Settings)}
)
_NAMES = frozenset(f.name for f in fields(Settings))


class _ConfigFile(TomlConfigSettingsSource):
    """A TOML config file, its settings at the top level or under [cbr]; `max-cost` means `max_cost`."""

    def __init__(self, path: Path) -> None:
        super().__init__(_Layers, path)

    def _read_file(self, path: Path) -> dict[str, Any]:
        try:
            data = super()._read_file(path)
        except tomllib.TOMLDecodeError as exc:
            raise CbrError(f"Config file {path} is not valid TOML: {exc}.") from exc
        values = {
            k.replace("-", "_"): v
            for k, v in data.get("cbr", data).items()
            if not isinstance(v, dict)
        }
        if unknown := sorted(set(values) - _NAMES):
            raise CbrError(f"Config file {path} has unknown setting(s): {', '.join(unknown)}.")
        return values


class _Environment(EnvSettingsSource):
    """CBR_<NAME> variables of the given mapping (os.environ unless load_settings was given one)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(_Layers, env_prefix="CBR_")

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {key.lower(): value for key, value in self._environ.items()}


def load_settings(environ: Mapping[str, str] | None = None, **flags: Any) -> Settings:
    given: dict[str, Any] = {}
    for layer in (
        *map(_ConfigFile, config_paths()),
        _Environment(os.environ if environ is None else environ),
    ):
        given.update(layer())
    given.update({k: v for k, v in flags.items() if v is not None})
    return _validated(lambda: Settings(**given))
