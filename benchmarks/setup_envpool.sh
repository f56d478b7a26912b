#!/usr/bin/env bash
# Installs EnvPool 1.2.5 (the comparison of benchmarks/envpool_atari_compare.py) in its own virtual environment
# OUTSIDE this repository. The venv is made from the same base interpreter as this repository's .venv, and a .pth
# file puts that .venv's site-packages on its path, so TensorFlow, ale-py, NumPy, gym(nasium) and the rest come from
# there; only what EnvPool adds is installed, each without its dependencies (--no-deps), so that nothing of the
# .venv's stack is shadowed by another version. The rest of envpool's declared requirements (the MuJoCo assets,
# glfw, matplotlib, pillow) are not needed for Atari. Installed:
#   * envpool 1.2.5 (C++ batched environments; it bundles its own ALE);
#   * envpool-assets 0.3.x (its Atari ROMs);
#   * dm-env (imported by envpool's Python side) and types-protobuf (type stubs, a declared requirement);
#   * optree 0.11.0: optree >= 0.12 needs a newer typing_extensions (TypeAliasType) than the .venv's 4.5.0, which
#     tf-agents pins (typing-extensions==4.5.0).
#
#   bash benchmarks/setup_envpool.sh [VENV_DIR]      # default ../venv_envpool; downloads about 120 MB
#
# Needs this repository's .venv. Prints the python to run benchmarks/envpool_atari_compare.py with.
set -euo pipefail
VENV="${1:-../venv_envpool}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
case "$(realpath -m "$VENV")/" in "$REPO"/*) echo "give a directory outside the repository, not $VENV" >&2; exit 2;; esac
MAIN_PYTHON="$REPO/.venv/bin/python"
[ -x "$MAIN_PYTHON" ] || { echo "no $MAIN_PYTHON: create this repository's .venv first" >&2; exit 2; }

BASE_PYTHON="$("$MAIN_PYTHON" -c 'import sys; print(sys._base_executable)')"
"$BASE_PYTHON" -m venv "$VENV"
MAIN_SITE="$("$MAIN_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$MAIN_SITE" > "$SITE/_repository_venv.pth"  # after the venv's own site-packages: its packages win

"$VENV/bin/pip" install -q --no-deps 'envpool==1.2.5' 'envpool-assets>=0.3.0,<0.4.0' dm-env types-protobuf \
    'optree==0.11.0'

# envpool's `import envpool` also loads registries that need packages not installed here;
# benchmarks/envpool_atari_compare.py imports only the Atari one, as this check does.
"$VENV/bin/python" - <<'EOF'
import sys, types
sys.modules['envpool.entry'] = types.ModuleType('envpool.entry')
import envpool
import envpool.atari.registration  # noqa: F401
envpool.make('Pong-v5', env_type='gymnasium', num_envs=1).reset()
print('envpool', envpool.__version__, 'makes Pong-v5')
EOF
echo "EnvPool ready: $VENV/bin/python benchmarks/envpool_atari_compare.py --compare"
