"""dsagent-cbr: a case-based-reasoning LLM agent for data science.

The Python API (dsagent_cbr.develop, deploy, predict, analyze, runs, Run: see api/) is imported on
first use, so that `import dsagent_cbr` and `cbr --help` stay instant."""

__version__ = "0.1.0"

API = ("Answer", "Run", "analyze", "deploy", "develop", "predict", "runs")


def __getattr__(name: str) -> object:
    if name in API:
        from dsagent_cbr import api

        return getattr(api, name)
    raise AttributeError(f"module 'dsagent_cbr' has no attribute {name!r}")


def __dir__() -> list[str]:
    return [*globals(), *API]
