"""What a grid is: tasks x agents x trials, each trial with its own seed, and the folder it lives in."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsagent_cbr.errors import CbrError

# kind -> variants (the first is the default when only the kind is given)
VARIANTS: dict[str, tuple[str, ...]] = {
    "deploy": ("cbr", "zero-shot", "one-shot-random"),
    "develop": (
        "full",
        "no-rerank",
        "no-cbr",
        "search",
    ),  # search: --budget's wall clock, no node cap
    "flaml": ("60", "300"),
    "autogluon": ("60", "300"),
    "starter": ("",),
    "reference": ("",),
}
MODEL_KINDS = ("deploy", "develop")  # agents that take --model; the others are one per grid
# the AutoML anchors, kind -> the learner's name: each variant is its time budget in whole seconds
AUTOML_KINDS = {"flaml": "FLAML", "autogluon": "AutoGluon"}
ANCHOR_KINDS = (*AUTOML_KINDS, "starter", "reference")  # run --anchor-trials times, not --trials


@dataclass(frozen=True)
class Agent:
    kind: str
    variant: str = ""
    model: str | None = None

    @property
    def label(self) -> str:
        name = f"{self.kind}:{self.variant}" if self.variant else self.kind
        return f"{name}@{self.model}" if self.model is not None else name

    @property
    def slug(self) -> str:
        """The label as one folder name (models may be paths such as gguf:/x/y.gguf)."""
        return re.sub(r"[^A-Za-z0-9._@+-]+", "_", self.label.replace(":", "-"))

    @classmethod
    def parse(cls, label: str) -> Agent:
        name, _, model = label.partition("@")
        kind, _, variant = name.partition(":")
        return cls(kind, variant, model or None)


def parse_agents(names: list[str], models: list[str]) -> list[Agent]:
    """'deploy:cbr' with models none,local -> deploy:cbr@none, deploy:cbr@local; 'flaml:60' and
    'autogluon:60' stay one."""
    agents: list[Agent] = []
    for name in names:
        kind, _, variant = name.strip().partition(":")
        if kind not in VARIANTS:
            raise CbrError(
                f"Unknown agent {name!r}; agents are {', '.join(VARIANTS)} (e.g. deploy:zero-shot, flaml:300, autogluon:300)."
            )
        variant = variant or VARIANTS[kind][0]
        if kind in AUTOML_KINDS:
            if not variant.isdigit() or int(variant) <= 0:
                raise CbrError(
                    f"{AUTOML_KINDS[kind]}'s budget must be whole seconds, as in {kind}:60, not {name!r}."
                )
        elif variant not in VARIANTS[kind]:
            raise CbrError(
                f"{kind} has no variant {variant!r}; choose one of {', '.join(VARIANTS[kind])}."
            )
        if kind in MODEL_KINDS:
            if not models:
                raise CbrError(f"Agent {name} needs at least one --models entry.")
            agents += [Agent(kind, variant, m) for m in models]
        else:
            agents.append(Agent(kind, variant))
    if len({a.label for a in agents}) != len(agents):
        raise CbrError("An agent is named twice.")
    return agents


@dataclass(frozen=True)
class Trial:
    task: str
    agent: Agent
    index: int
    seed: int

    @property
    def id(self) -> str:
        return f"{self.task}/{self.agent.slug}/trial-{self.index}"


@dataclass
class GridSpec:
    tasks: list[str]
    agents: list[str]  # labels, as Agent.label
    # task name -> its folder, absolute, as --tasks found it when the grid was made: a resume and every Ray
    # worker use this folder whatever the current folder is, and it is part of the digest (another folder
    # of the same name is another grid)
    task_folders: dict[str, str] = field(default_factory=dict)
    trials: int = 2
    anchor_trials: int = 1
    seed: int = 0
    timeout: float = 600.0  # per script run, as the commands' --timeout
    memory_mb: float = 8192.0
    iterations: int = 5  # develop's -T
    budget: float = 300.0  # develop:search's --budget, seconds (FLAML's 300 is its equal)
    store: str = "faiss"
    max_cost: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def folder(self, task: str) -> Path:
        if task not in self.task_folders:
            raise CbrError(f"The grid names no folder for task {task}.")
        return Path(self.task_folders[task])

    def agent_list(self) -> list[Agent]:
        return [Agent.parse(label) for label in self.agents]

    def trial_list(self) -> list[Trial]:
        """Every trial of the grid; trial k of every agent gets seed `seed + k` (a paired design)."""
        out = []
        for task in self.tasks:
            for agent in self.agent_list():
                count = self.anchor_trials if agent.kind in ANCHOR_KINDS else self.trials
                out += [Trial(task, agent, k, self.seed + k) for k in range(count)]
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GridSpec:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:10]


def trial_dir(grid_dir: Path, trial: Trial) -> Path:
    return grid_dir / "trials" / trial.id
