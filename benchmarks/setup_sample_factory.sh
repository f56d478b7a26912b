#!/usr/bin/env bash
# Installs sample-factory 2.1.1 (the comparison of benchmarks/atari_vs_sample_factory.py) in its own virtual
# environment OUTSIDE this repository, with the two fixes it needs to run its Atari example:
#   1. its ale-py (0.8) has no ROMs: they are imported from this repository's ale-py (ale-import-roms);
#   2. 2.1.1 crashes in its first learner summary with V-trace (`var.mb.advantages` does not exist then): the two
#      lines that read it are guarded.
#
#   bash benchmarks/setup_sample_factory.sh [VENV_DIR]      # default ../venv_sf19; takes a few minutes
#
# Needs python3.11 and this repository's .venv (for the ROMs). Prints the python to pass as --sf_python.
set -euo pipefail
VENV="${1:-../venv_sf19}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
case "$(realpath -m "$VENV")/" in "$REPO"/*) echo "give a directory outside the repository, not $VENV" >&2; exit 2;; esac
python3.11 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
# The CPU build of torch (the default Linux wheel brings CUDA libraries); fall back to the default index.
"$VENV/bin/pip" install -q torch --index-url https://download.pytorch.org/whl/cpu || "$VENV/bin/pip" install -q torch
"$VENV/bin/pip" install -q 'sample-factory==2.1.1' 'gymnasium[atari]<1.0'

ROMS="$(mktemp -d)"
cp "$REPO"/.venv/lib/python3.11/site-packages/ale_py/roms/{pong,breakout}.bin "$ROMS"/
"$VENV/bin/ale-import-roms" "$ROMS"
rm -rf "$ROMS"

LEARNER="$("$VENV/bin/python" -c 'import sample_factory.algo.learning.learner as m; print(m.__file__)')"
"$VENV/bin/python" - "$LEARNER" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
old = ('        stats.adv_min = var.mb.advantages.min()\n'
       '        stats.adv_max = var.mb.advantages.max()\n')
new = ('        if "advantages" in var.mb:  # absent with V-trace: 2.1.1 crashes here otherwise\n'
       '            stats.adv_min = var.mb.advantages.min()\n'
       '            stats.adv_max = var.mb.advantages.max()\n')
if old in text:
  open(path, 'w').write(text.replace(old, new))
  print('patched', path)
elif new in text:
  print('already patched', path)
else:
  sys.exit(f'unexpected sample-factory source in {path}: not patched')
EOF
echo "sample-factory ready: --sf_python $VENV/bin/python"
