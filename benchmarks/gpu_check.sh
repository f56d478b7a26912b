#!/usr/bin/env bash
# The prepared GPU check: one table of learner frames/s for IMPALA's deep (DMLab) agent at batch 32 x
# unroll 100 and the shallow Atari expert, and HIRO's update steps/s, on this machine's GPU. Under 5 minutes.
#
# On a bare machine with this repository and Python 3.11 (and the network, for pip):
#   sed 's/^tensorflow==/tensorflow[and-cuda]==/' requirements.txt > /tmp/requirements-gpu.txt
#   python3.11 -m venv /tmp/venv-gpu && /tmp/venv-gpu/bin/pip install -r /tmp/requirements-gpu.txt
#   bash benchmarks/gpu_check.sh /tmp/venv-gpu/bin/python
# With the project's `device` tool (the venv already on the device, or carried): from the repository root,
#   bash benchmarks/gpu_check.sh PYTHON        (PYTHON defaults to .venv/bin/python, then python3)
# Extra arguments go to benchmarks/gpu_check.py (--quick: a smoke test; --skip_hiro; --steps N).
# Exit status: the script's, or 124 if it ran past GPU_CHECK_TIMEOUT_S (default 290 s).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:-}"
if [[ -n "$PYTHON" && "$PYTHON" != -* ]]; then shift; else
  PYTHON=.venv/bin/python; [[ -x "$PYTHON" ]] || PYTHON=python3
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader \
  || echo "nvidia-smi not found: no NVIDIA driver here; the table will show where TensorFlow ran instead"
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' || {
  echo "need the project's Python 3.11 venv (requirements.txt; tensorflow[and-cuda] for a GPU): got $PYTHON" >&2; exit 2; }
export TF_CPP_MIN_LOG_LEVEL=2
timeout "${GPU_CHECK_TIMEOUT_S:-290}" "$PYTHON" benchmarks/gpu_check.py "$@"
