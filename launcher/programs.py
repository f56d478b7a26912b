"""The two programs as a whole: their usage text and their main functions, for the scripts run_train.py and
run_eval.py of a checkout and for the commands `hiro-impala-train` and `hiro-impala-eval` of an installed package
(pyproject.toml's console scripts).

`script_main` does what a program does, in order: `prepare_process` (before TensorFlow loads), the flags
(`define_flags`; they are made the key flags of the main module, so that `--help` lists them), the usage text as the
main module's docstring (absl's `--help` prints that docstring) and `entry.run`. The usage text is one
(`USAGE`), with the command it shows (`python run_train.py`, `hiro-impala-train`) filled in.
"""

import sys

from absl import flags

from launcher import entry
from launcher import flags as launcher_flags

# The usage of each program (`--help`, above the flags; `USAGE`), `{command}` standing for the command that starts it.
_TRAIN = r"""Train HIRO (uvf) or IMPALA (scalable_agent); the gin configuration decides which.

Usage:
  {command} CONFIG.gin [CONFIG.gin ...] [--gin_param 'NAME.PARAM = VALUE' ...] [--train_dir DIR]

Examples:
  {command} configs/ant_maze.gin
  {command} configs/ant_maze.gin --gin_param 'train_uvf.batch_size = 64' --train_dir runs/maze_b64
  {command} configs/impala_dmlab.gin --num_actors=8 --batch_size=8

The original command lines keep working:
  HIRO:   {command} --train_dir=DIR --config_file=configs/base_uvf.gin \
            --config_file=configs/train_uvf.gin --config_file=context/configs/hiro_orig.gin \
            --config_file=context/configs/ant_maze.gin [--params='BINDING' ...]
  IMPALA: {command} --level_name=dmlab30 --num_actors=150 --batch_size=32 ... (experiment.py's flags)

The run directory (default runs/<config name>) records its configuration in run.json; rerunning the same
configuration resumes it, and a directory holding another run is refused.
"""
_EVAL = r"""Evaluate HIRO (uvf) checkpoints, or run IMPALA (scalable_agent) in test mode; the gin configuration decides.

Usage:
  {command} CONFIG.gin [--train_dir DIR] [--eval_dir DIR] [--gin_param 'NAME.PARAM = VALUE' ...]

Examples:
  {command} configs/ant_maze.gin                      # evaluates runs/ant_maze, writes runs/ant_maze/eval
  {command} configs/impala_dmlab30.gin --test_num_episodes=10

The original command lines keep working:
  HIRO:   {command} --checkpoint_dir=TRAIN_DIR --eval_dir=EVAL_DIR --config_file=configs/base_uvf.gin \
            --config_file=configs/eval_uvf.gin --config_file=context/configs/hiro_orig.gin \
            --config_file=context/configs/ant_maze.gin [--params='BINDING' ...]
  IMPALA: {command} --level_name=dmlab30 --logdir=DIR --test_num_episodes=10  (experiment.py --mode=test)
"""
USAGE = {'train': _TRAIN, 'eval': _EVAL}
# The installed commands (pyproject.toml [project.scripts]).
COMMANDS = {'train': 'hiro-impala-train', 'eval': 'hiro-impala-eval'}


def usage(program: str, command: str) -> str:
  """The usage text of `program` ('train' or 'eval') started by `command`."""
  return USAGE[program].replace('{command}', command)


def script_main(program: str, command: str) -> None:
  """The whole program `program` ('train' or 'eval'), started by `command` (shown by `--help`); exits."""
  launcher_flags.prepare_process()  # before TensorFlow loads
  launcher_flags.define_flags()
  # What the scripts' `flags.adopt_module_key_flags(launcher)` did from their own module: absl keys the main
  # module's flags (those `--help` lists) by sys.argv[0].
  for flag in flags.FLAGS.get_key_flags_for_module(launcher_flags.FLAGS_MODULE):
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  sys.modules['__main__'].__doc__ = usage(program, command)
  entry.run(program)


def train_main() -> None:
  """The command `hiro-impala-train`: run_train.py, installed."""
  script_main('train', COMMANDS['train'])


def eval_main() -> None:
  """The command `hiro-impala-eval`: run_eval.py, installed."""
  script_main('eval', COMMANDS['eval'])
