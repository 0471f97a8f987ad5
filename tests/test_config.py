"""Settings layering: defaults < ~/.config/cbr/config.toml < ./cbr.toml < CBR_* environment < flags."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from dsagent_cbr.config import PROJECT_ROOT, Settings, config_paths, load_settings
from dsagent_cbr.errors import CbrError


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A home and a working folder of our own, with no CBR_* variables from the machine."""
    user = tmp_path / "user"
    (user / ".config" / "cbr").mkdir(parents=True)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.chdir(project)
    for key in [k for k in __import__("os").environ if k.startswith("CBR_") or k == "XDG_DATA_HOME"]:
        monkeypatch.delenv(key)
    return user


def test_defaults(home):
    settings = load_settings()
    assert settings.model == "none" and settings.store == "chroma" and settings.max_cost is None
    # a data folder, not a cache: a bank that past runs grew cannot be rebuilt
    assert settings.home == home / ".local" / "share" / "dsagent-cbr" and settings.bank_path == settings.home / "bank"
    assert settings.cache_path == settings.home / "cache" and settings.tasks_dir == PROJECT_ROOT / "tasks"
    assert config_paths() == [home / ".config" / "cbr" / "config.toml", Path.cwd() / "cbr.toml"]


def test_each_layer_beats_the_one_below(home, monkeypatch):
    (home / ".config/cbr/config.toml").write_text(
        'model = "gpt-4o"\nmax-cost = 5\nmax_tokens = 1000\nstore = "faiss"\nrequest_timeout = 30\n')
    Path("cbr.toml").write_text('[cbr]\nmodel = "mixtral"\nmax_cost = 2.5\nmax_tokens = 2000\n[models.extra]\nx = 1\n')
    monkeypatch.setenv("CBR_MAX_COST", "1.5")
    monkeypatch.setenv("CBR_MAX_TOKENS", "3000")
    monkeypatch.setenv("CBR_USE_CACHE", "no")
    monkeypatch.setenv("CBR_NOT_A_SETTING", "ignored")  # other CBR_ variables are not settings
    settings = load_settings(max_tokens=4000, model=None, bank_dir="~/bank")
    assert settings.request_timeout == 30.0 and settings.store == "faiss"  # user file only
    assert settings.model == "mixtral"  # project file beats user file; a None flag is not given
    assert settings.max_cost == 1.5 and settings.use_cache is False  # environment beats files
    assert settings.max_tokens == 4000  # flag beats environment
    assert settings.bank_dir == home / "bank"  # ~ expanded

    assert load_settings(environ={}).max_cost == 2.5  # a given environment replaces os.environ
    assert load_settings(environ={"CBR_MODEL": "local"}).model == "local"


def test_flags_and_replace_are_validated(home):
    assert load_settings(max_cost="0.5", runs_dir=None).max_cost == 0.5
    assert load_settings(runs_dir="~/runs").runs_dir == home / "runs"
    settings = load_settings()
    assert replace(settings, base_url="http://127.0.0.1:1/v1").base_url == "http://127.0.0.1:1/v1"
    with pytest.raises(CbrError, match=r"^Unknown setting\(s\): colour, shape\.$"):
        load_settings(shape=1, colour="red")
    with pytest.raises(Exception, match="max_retries"):
        replace(settings, max_retries="many")
    with pytest.raises(AttributeError):
        settings.model = "x"  # frozen
    assert isinstance(settings, Settings)


@pytest.mark.parametrize(("where", "text", "message"), [
    ("env", "CBR_MAX_COST=lots", r"^Setting max_cost has a bad value 'lots': .+\.$"),
    ("env", "CBR_USE_CACHE=maybe", r"^Setting use_cache has a bad value 'maybe': .+\.$"),
    ("flag", "max_tokens=1.5", r"^Setting max_tokens has a bad value 1\.5: .+\.$"),
    ("flag", "colour=red", r"^Unknown setting\(s\): colour\.$"),
    ("file", 'modle = "gpt-4o"\n', r"^Config file .*cbr\.toml has unknown setting\(s\): modle\.$"),
    ("file", 'model = "gpt-4o\n', r"^Config file .*cbr\.toml is not valid TOML: .+\.$"),
    ("file", "request_timeout = \"soon\"\n", r"^Setting request_timeout has a bad value 'soon': .+\.$"),
])
def test_bad_values_are_one_sentence(home, where, text, message):
    key, _, value = text.partition("=")
    if where == "file":
        Path("cbr.toml").write_text(text)
        call = dict(environ={})
    elif where == "env":
        call = dict(environ={key: value})
    else:
        call = {key: float(value) if value[0].isdigit() else value}
    with pytest.raises(CbrError, match=message):
        load_settings(**call)
