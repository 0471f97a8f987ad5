#!/usr/bin/env bash
# What a fresh machine pays for the README's set-up: wall time and installed size.
#
# Runs the README's set-up line (its Python part; the apt-get step is the system's) in a new venv with
# pip's cache off, from the checkout given (default: this one), and prints the seconds, the venv's size
# and the load average, which says how far the timing can be trusted on a shared machine.
# Usage: experiments/setup_cost.sh [CHECKOUT]
set -euo pipefail
checkout=$(cd "${1:-$(dirname "$0")/..}" && pwd)
work=$(mktemp -d /tmp/setup-cost-XXXXXX)
trap 'rm -rf "$work"' EXIT
line=$(grep -A1 -x '# 1. set up' "$checkout/README.md" | tail -1)
python_part=${line#*bubblewrap && }  # everything after the system packages
python_part=${python_part//\~\/.cache\/dsagent-cbr\/sdists/$work/sdists}
cd "$checkout"
start=$(date +%s.%N)
python -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
export PIP_NO_CACHE_DIR=1 PIP_QUIET=1
eval "$python_part"
end=$(date +%s.%N)
echo "set-up $(python -c "print(round($end - $start, 1))") s; venv $(du -sm "$work/venv" | cut -f1) MB;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg); $(git -C "$checkout" rev-parse --short HEAD)"
