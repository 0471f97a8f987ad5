"""Where MLflow logs and how it is reached: the tracking URI, a quick check of a server, the folder a
local store keeps its artifacts in, and mlflow itself, imported only when used and kept quiet."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlparse
from urllib.request import getproxies, proxy_bypass

from dsagent_cbr.errors import CbrError

# the libraries under MLflow write INFO lines of their own into cbr's output: a new SQLite store says it
# is "Creating initial MLflow database tables...", alembic names its migrations, and ending a run on a
# server prints a "View run" link. cbr says in one line of its own where the run went.
QUIET = ("sqlalchemy", "alembic", "mlflow.store", "mlflow.tracking")

# a live run must not wait through MLflow's own retries (7 with backoff, about 4 minutes, per request)
# on a server that went down: a few seconds, then its observer gives up. A value the user set stays.
LIVE_HTTP = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}


def resolve_tracking_uri(uri: str | None) -> str:
    if uri:
        return uri
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def require_mlflow() -> None:
    """mlflow imported on first use (it is the optional extra `track`), the libraries under it kept quiet."""
    try:
        import mlflow.tracking  # noqa: F401
    except ImportError as exc:
        raise CbrError(
            'MLflow is not installed; install it with: pip install "dsagent-cbr[track]".'
        ) from exc
    for name in QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)


def mlflow_client(uri: str) -> Any:
    require_mlflow()
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def bound_retries() -> None:
    for name, value in LIVE_HTTP.items():
        os.environ.setdefault(name, value)


def check_server(uri: str) -> None:
    """Fail in seconds, not after MLflow's minutes of retries, when a tracking server does not answer."""
    url = urlparse(uri)
    if url.scheme not in ("http", "https") or (
        getproxies().get(url.scheme) and not proxy_bypass(url.hostname or "")
    ):
        return  # not a server, or one reached through a proxy that only MLflow's requests will use
    try:
        socket.create_connection(
            (url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout=5
        ).close()
    except OSError as exc:
        raise CbrError(
            f"The MLflow tracking server at {uri} does not answer ({exc.strerror or exc})."
        ) from exc


def artifact_root(uri: str) -> str | None:
    """For a local SQLite store, artifacts go beside the database (MLflow would use the current folder)."""
    if not uri.startswith("sqlite:///") or uri.endswith(":memory:"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts").as_uri()
