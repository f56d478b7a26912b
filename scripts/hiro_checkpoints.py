"""HIRO policy checkpoints on the command line: export one as an original TF1 checkpoint, or list what one holds.

Usage:
  python scripts/hiro_checkpoints.py export SRC OUT --config configs/ant_maze.gin   # port's policy -> TF1 one
  python scripts/hiro_checkpoints.py export SRC OUT                                 # every entry copied as it is
  python scripts/hiro_checkpoints.py list SRC                                       # names, shapes, what it is

The library under it is `uvf/checkpoints.py` (docs/hiro/checkpoints.md). Exit status 0, or 2 with one line `error:
...` on stderr (not a checkpoint, a checkpoint of another configuration, a bad gin file or binding).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import launcher  # pylint: disable=g-import-not-at-top,wrong-import-position

launcher.prepare_process()  # before TensorFlow loads
import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

from uvf import agent as agent_lib  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from uvf import build  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from uvf import checkpoints  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from uvf import representation  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import uvf.configurables  # noqa: F401,E402  pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from uvf.environments import create_maze_env  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


def build_policy_variables(config, gin_params):
  """{TF1 name: variable} of the policy of the gin configuration `config` (as training and evaluation build it).

  Raises:
    ValueError: the config file or a binding is bad (the launcher's message).
  """
  try:
    launcher.parse_gin([launcher.resolve_config_path(config)], list(gin_params))
  except launcher.LaunchError as e:
    raise ValueError(str(e)) from None
  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(create_maze_env.create_maze_env(), agent_lib.UvfAgent,
                                                                  agent_lib.MetaAgent, representation.StatePreprocess,
                                                                  representation.InverseDynamics)
  counters = [
      tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
      for name in ('global_step', 'num_episodes', 'num_resets')
  ]
  return build.policy_variables_by_tf1_name(uvf_agent, meta_agent, state_preprocess, *counters)


def main(argv=None):
  parser = argparse.ArgumentParser(prog='python scripts/hiro_checkpoints.py', description=__doc__.split('\n')[0])
  commands = parser.add_subparsers(dest='command', required=True)
  export = commands.add_parser('export', help='write a policy checkpoint (either format) as an original TF1 one')
  export.add_argument('source', help='policy checkpoint prefix, e.g. runs/ant_maze/policy/model.ckpt-300000')
  export.add_argument('output', help='prefix to write, e.g. /tmp/tf1/model.ckpt-300000')
  export.add_argument(
      '--config', help='gin file of the run: checks the checkpoint strictly against that policy. '
      'Without it, every policy entry is copied as it is.')
  export.add_argument('--gin_param', action='append', default=[], help='extra gin binding (repeatable)')
  export.add_argument('--allow_extra', action='store_true',
                      help='ignore training-only variables (a full training checkpoint)')
  listing = commands.add_parser('list', help='print the names, shapes and dtypes of a checkpoint')
  listing.add_argument('source')
  args = parser.parse_args(argv)
  try:
    if args.command == 'list':
      fmt, entries = checkpoints.read_policy_entries(args.source)
      print(f'{checkpoints.resolve_checkpoint_path(args.source)}: {fmt} format, {len(entries)} entries; '
            f'looks like {checkpoints.describe({n: s for n, (s, _) in entries.items()})}')
      for name, (shape, dtype) in entries.items():
        print(f'  {name}  {dtype.name}{shape}')
      return 0
    if args.config:
      variables = build_policy_variables(args.config, args.gin_param)
      source = checkpoints.restore_policy(args.source, variables, allow_extra=args.allow_extra)
    else:
      source, variables = checkpoints.read_policy_tensors(args.source, policy_only=args.allow_extra)
    written = checkpoints.export_tf1_policy(variables, args.output)
    print(f'wrote {written} ({len(variables)} variables) from {source}')
    return 0
  except (ValueError, OSError) as e:  # NotACheckpointError, CheckpointMismatchError, launcher errors as ValueError
    print(f'error: {e}', file=sys.stderr)
    return 2  # bad input: the error names the problem (no traceback)


if __name__ == '__main__':
  sys.exit(main())
