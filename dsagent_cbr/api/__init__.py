"""The Python API: the commands as calls that speak DataFrames, for notebooks and scripts.

    run = dsagent_cbr.develop(train, target="Status", test=test, budget="1m")
    run.submission, run.leaderboard, run.report, run.folder, run.predict(new_rows)

Each call runs the code its command runs (no subprocess), says what it does as the command does, and
leaves its run in a folder that `cbr runs` lists. The heavy imports happen inside the calls."""

from dsagent_cbr.api.analyze import Answer, analyze
from dsagent_cbr.api.develop import deploy, develop
from dsagent_cbr.api.run import Run
from dsagent_cbr.api.runs import predict, runs

__all__ = ["Answer", "Run", "analyze", "deploy", "develop", "predict", "runs"]
