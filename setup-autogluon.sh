#!/usr/bin/env bash
# AutoGluon Tabular for `cbr bench`'s autogluon:SECONDS anchor, in an environment of its own: AutoGluon pins
# pandas below 3 and cbr runs on pandas 3, so it cannot go beside cbr (an extra would downgrade cbr's pandas).
# The venv sees cbr's own packages (--system-site-packages) and shadows only what AutoGluon pins; AutoGluon
# trials run `cbr run` under it (dsagent_cbr/bench/autogluon_script.py). Run after setup.sh, as root.
# Usage: bash setup-autogluon.sh [FOLDER]   (another FOLDER than /opt/cbr-autogluon: set
#        CBR_AUTOGLUON_PYTHON=FOLDER/bin/python for cbr)
set -euo pipefail
venv="${1:-/opt/cbr-autogluon}"
python="${PYTHON:-python}"  # the interpreter cbr is installed in
# --without-pip: the venv runs cbr's own pip (seen through --system-site-packages), not a copy of the older
# one venv bundles
"$python" -m venv --system-site-packages --without-pip "$venv"
# lightgbm, catboost and xgboost: AutoGluon's tree learners without its torch models
"$venv/bin/python" -m pip install "autogluon.tabular[lightgbm,catboost,xgboost]>=1.6,<1.7"
"$venv/bin/python" -c "import autogluon.tabular, dsagent_cbr; print('AutoGluon', autogluon.tabular.__version__, 'for cbr at', '$venv')"
