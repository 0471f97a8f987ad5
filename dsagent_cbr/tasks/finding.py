"""Where every command finds a task: one rule. A path to a task folder is taken as it is. A bare name is
looked up where the user is first (./tasks/NAME, then ./NAME), then among the recipes (the project's
tasks/, or --tasks-dir / CBR_TASKS_DIR). Listing shows the user's tasks before the recipes, and a
user's task shadows a recipe of the same name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsagent_cbr.tasks.loader import TaskError, detect_layout, discover_tasks
from dsagent_cbr.tasks.recipes import EXAMPLES

YOURS, RECIPE = "yours", "recipe"


@dataclass(frozen=True)
class Found:
    path: Path
    origin: str  # YOURS or RECIPE


def roots(recipes: Path) -> list[tuple[Path, str]]:
    """The folders searched, in order, each once: a working folder that is the recipes' is theirs."""
    here = Path.cwd()
    seen: set[Path] = set()
    ordered = []
    for folder, origin in ((recipes, RECIPE), (here / "tasks", YOURS), (here, YOURS)):
        key = folder.resolve()
        if folder.is_dir() and key not in seen:
            seen.add(key)
            ordered.append((folder, origin))
    return sorted(ordered, key=lambda r: r[1] == RECIPE)  # the user's folders first


def find_task(name_or_path: str, recipes: Path) -> Path:
    """The task folder a command line names: a path, or a name looked up where the user is, then among
    the recipes; one sentence naming every place looked when there is none."""
    path = Path(name_or_path)
    if path.is_dir() and detect_layout(path) is not None:
        return path
    searched = roots(recipes)
    if not path.is_absolute() and len(path.parts) == 1:
        for folder, _ in searched:
            if detect_layout(folder / name_or_path) is not None:
                return folder / name_or_path
    if path.is_dir():
        return path  # not a task folder: loading it says why
    places = ", ".join(str(folder) for folder, _ in searched)
    example = path.name if path.name in EXAMPLES else None
    make = (
        f"; make it with `cbr tasks new {name_or_path.rstrip('/')} --example {example}`"
        if example
        else ""
    )
    raise TaskError(f"No task folder {name_or_path!r} (looked in {places}){make}.")


def all_tasks(recipes: Path) -> list[Found]:
    """Every task the rule can find, the user's first; a name found twice is the first one found."""
    found: dict[str, Found] = {}
    for folder, origin in roots(recipes):
        for path in discover_tasks(folder):
            found.setdefault(path.name, Found(path, origin))
    return list(found.values())
