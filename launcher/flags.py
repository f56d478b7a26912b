"""The command-line flags of run_train.py and run_eval.py, and what a program does first (`prepare_process`).

Three kinds of flags: the project's own (`--gin_param`, `--train_dir`, `--eval_dir`); HIRO's original
train_utils/train.py and run_eval.py flags; IMPALA's original experiment.py flags (and the two of multi-machine
training), whose defaults and help come from `scalable_agent.original_flags`, their one source. The original flags
the user gives become gin bindings (`gin_config.flag_bindings`).

The flags are defined as flags of the module `launcher` (the package, `FLAGS_MODULE`), whose key flags
`programs.script_main` makes the main module's, so that `--help` lists them.
"""

from typing import Any, cast, Dict

from absl import flags

from launcher import console
from scalable_agent import original_flags

# HIRO's original train_utils/train.py flags that become gin bindings of `train_uvf`.
HIRO_TRAIN_FLAGS = ('goal_sample_strategy', 'save_interval_secs', 'save_summaries_secs', 'summarize_gradients')
# run_eval flags that become gin bindings of HIRO's `evaluate`.
HIRO_EVAL_FLAGS = ('checkpoint_path',)
# IMPALA's original experiment.py flags (deepmind/scalable_agent experiment.py L48-90): each is the gin parameter
# `experiment.<flag>` of the same name and default.
IMPALA_FLAGS = tuple(original_flags.ORIGINAL)
# Flags of multi-machine IMPALA (not in the original), also `experiment.<flag>` bindings:
# scalable_agent/distributed.py, docs/impala/distributed.md.
IMPALA_DISTRIBUTED_FLAGS = tuple(original_flags.DISTRIBUTED)
# The module the flags are defined for (`--helpfull` lists them under it).
FLAGS_MODULE = 'launcher'


def prepare_process() -> None:
  """What a program of this repository does first, before TensorFlow loads: TensorFlow's native log lines off unless
  the user set TF_CPP_MIN_LOG_LEVEL (`console.default_native_log_level`). Importing the launcher changes nothing."""
  console.default_native_log_level()


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags of both scripts on `fv` (tests pass a fresh `FlagValues`)."""
  d: Dict[str, Any] = dict(flag_values=fv, module_name=FLAGS_MODULE)
  flags.DEFINE_multi_string(
      'gin_param', [], 'A gin binding, e.g. "train_uvf.batch_size = 64". Repeatable; '
      'applied after the config files, in order.', **d)
  flags.DEFINE_string(
      'train_dir', None, 'Run directory (checkpoints, summaries, run.json). Default: '
      'runs/<config name> under the current directory.', **d)
  flags.DEFINE_string('eval_dir', None, 'run_eval: where evaluation results go. Default: <train_dir>/eval.', **d)
  # HIRO (efficient-hrl) original flags.
  flags.DEFINE_multi_string('config_file', [], 'HIRO original: a gin file (repeatable), same as a positional '
                            'argument.', **d)
  flags.DEFINE_multi_string('params', [], 'HIRO original: a gin binding (repeatable), same as --gin_param.', **d)
  flags.DEFINE_string('checkpoint_dir', None, 'HIRO original (run_eval): the training directory to evaluate; '
                      'same as --train_dir.', **d)
  flags.DEFINE_string(
      'checkpoint_path', None, 'run_eval (HIRO): evaluate this one policy checkpoint, relative to '
      '<train_dir>/policy (e.g. model.ckpt-300000) or a path (evaluate.checkpoint_path). Default: '
      'every policy checkpoint as training writes it.', **d)
  flags.DEFINE_enum('goal_sample_strategy', 'sample', ['sample', 'FuN', 'None'],
                    'HIRO original: off-policy correction of meta goals (train_uvf.goal_sample_strategy).', **d)
  flags.DEFINE_string('master', 'local', 'HIRO original: TF1 session master; only local training exists.', **d)
  flags.DEFINE_integer('save_interval_secs', 300, 'HIRO original: seconds between full checkpoints '
                       '(train_uvf.save_interval_secs).', **d)
  flags.DEFINE_integer('save_summaries_secs', 30, 'HIRO original: seconds between summaries '
                       '(train_uvf.save_summaries_secs).', **d)
  flags.DEFINE_boolean('summarize_gradients', False, 'HIRO original: gradient summaries '
                       '(train_uvf.summarize_gradients).', **d)
  # IMPALA (scalable_agent experiment.py) original flags, original defaults; each maps to experiment.<name>.
  flags.DEFINE_string(
      'logdir', None, 'IMPALA original: TensorFlow log and checkpoint directory; same as '
      '--train_dir. (Original default /tmp/agent; here runs/<config name>.)', **d)
  for name, flag in original_flags.ORIGINAL.items():
    _define(name, flag, 'IMPALA original: ' + flag.help, d)
  # IMPALA multi-machine training (docs/impala/distributed.md).
  for name, flag in original_flags.DISTRIBUTED.items():
    _define(name, flag, flag.help, d)


def _define(name: str, flag: original_flags.Flag, help_text: str, d: Dict[str, Any]) -> None:
  """Defines the flag `name` of the kind its default and choices say: enum, integer, float or string."""
  if flag.choices:
    flags.DEFINE_enum(name, cast(str, flag.default), list(flag.choices), help_text, **d)
  elif isinstance(flag.default, int):
    flags.DEFINE_integer(name, flag.default, help_text, **d)
  elif isinstance(flag.default, float):
    flags.DEFINE_float(name, flag.default, help_text, **d)
  else:
    flags.DEFINE_string(name, flag.default, help_text, **d)


def present(fv: flags.FlagValues, name: str) -> bool:
  """Whether the flag `name` was given on the command line."""
  return bool(fv[name].present)
