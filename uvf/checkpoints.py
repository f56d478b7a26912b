"""HIRO policy checkpoints: the original TF1 ones and this port's, read strictly by the original variable names.

Two formats hold the same policy (the variables of the original's `<train_dir>/policy/model.ckpt-<step>`, which
tensorflow/models research/efficient-hrl eval.py reads: both levels' actors and twin critics, `global_step`,
`num_episodes`, `num_resets`, the current contexts `uvf_agent/action_context_0` / `meta_agent/action_context_0` and,
with hiro_repr, the 12 `state_preprocess/...` variables):

* original TF1 checkpoints (`<train_dir>/policy/model.ckpt-<step>`, written by the original's `tf.train.Saver`):
  name-based, the keys are the variables' op names, e.g. `uvf_agent/actor_net/states/states_1/weights`;
* this port's policy checkpoints (`TrainingLoop`: `tf.train.Checkpoint(variables={TF1 name: variable})`):
  object-based, the key of name N is `variables/<N escaped>/.ATTRIBUTES/VARIABLE_VALUE`, where the escaping writes
  '.' as '..' and '/' as '.S' (`tf.train.Checkpoint`'s rule); they also hold `save_counter` and the object graph.

`restore_policy(path, variables_by_name)` reads either (it tells them apart by the object graph that only the second
has) into a {TF1 name: tf.Variable} map, typically `uvf.build.policy_variables_by_tf1_name(...)`, strictly: every
name must be there with its shape and dtype, and nothing else may be (see `allow_extra` for full training
checkpoints); nothing is assigned unless everything matches (`CheckpointMismatchError` otherwise).
`checkpoint_step(path)` is the global step of a checkpoint. `export_tf1_policy(variables_by_name, path)` writes a
name-based TF1 checkpoint, as the original's policy Saver did.

Resuming a run (`uvf.run_loop`, docs/design/reliability.md): `find_resumable(train_dir, policy_dir)` chooses the full
checkpoint to resume from with `rundir.checkpoints.resume`, which scans, sets aside and rebuilds (the run-directory
library shared with IMPALA), and refuses what HIRO cannot resume (an original TF1 full training checkpoint).

`read_policy_tensors(path)` reads a checkpoint's entries by TF1 name, as they are.

This module is a library: it imports no other module of `uvf`, only `rundir` (the command line that exports and lists
checkpoints is `scripts/hiro_checkpoints.py`). It knows no file of `configs/`: a caller that does passes
`restore_policy(..., known_configs=...)` to name them in its error messages (`uvf.eval.CONFIGS_BY_SHAPES`).
"""

import collections
import os
import re

import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from rundir import errors

# Keys of this port's (object-based, TF2) policy checkpoints.
TF2_OBJECT_GRAPH_KEY = run_checkpoints.OBJECT_GRAPH_KEY
TF2_VARIABLES_PREFIX = 'variables/'
TF2_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
TF2_SAVE_COUNTER_KEY = 'save_counter' + TF2_VALUE_SUFFIX

FORMAT_TF1 = 'original TF1 name-based'
FORMAT_TF2 = "TF2 object-based (this port's)"

GLOBAL_STEP_NAME = 'global_step'
_MAX_LISTED = 12  # names listed per kind of problem in an error message

# The names a policy checkpoint holds. `allow_extra` never ignores one of these.
_POLICY_NAME = re.compile(r'^((uvf_agent|meta_agent)/(actor_net|critic_net|critic_net2)/.+/(weights|biases)'
                          r'|(uvf_agent|meta_agent)/action_context_\d+'
                          r'|state_preprocess/(state_process_net|action_embed_net)/.+/(weights|biases)'
                          r'|global_step|num_episodes|num_resets)$')
# Names only the original's full training checkpoint `<train_dir>/model.ckpt-<step>` has, to say
# "this is a full training checkpoint" in error messages.
_TRAINING_ONLY_NAME = re.compile(
    r'(/Adam(_\d+)?$|/beta[12]_power(_\d+)?$|^update_targets/|/target_(actor|critic)_net|/num_timer_steps'
    r'|^(agent|meta)/(BufferVariable_\d+|num_adds)$|^(num_updates|num_meta_updates|episode_rewards'
    r'|episode_meta_rewards|all_embed|states_var|actions_var|state_var|reward_var|meta_action_var'
    r'|meta_context_var\d+)$|^meta_agent/action_context_\d+_\d+$)')

_ROBOTS_BY_OBSERVATION_DIM = {
    7: 'Point: PointMaze',
    30: 'Ant: AntMaze / AntPush / AntFall',
    33: 'Ant: AntBlock / AntBlockMaze',
    105: 'Ant with top-down images: the *_img tasks'
}


class CheckpointMismatchError(errors.UserError, ValueError):
  """A checkpoint's names, shapes or dtypes do not match the variables to restore (nothing was assigned). A user
  error: the launcher prints the message alone (e.g. a wrong `train_uvf.load_path`), exit status 2."""


class NotACheckpointError(errors.UserError, ValueError):
  """The path is not a readable TensorFlow checkpoint (no `<prefix>.index`, or an unreadable one). A user error, as
  `CheckpointMismatchError`."""


# ----------------------------------------------------------------------------------------------------------------------
# Names and keys.


def escape_tf2_key(name):
  """The key under which `tf.train.Checkpoint(variables={name: v})` stores `v`."""
  return TF2_VARIABLES_PREFIX + name.replace('.', '..').replace('/', '.S') + TF2_VALUE_SUFFIX


def _unescape_component(text):
  out, i = [], 0
  while i < len(text):
    if text[i] == '.' and i + 1 < len(text) and text[i + 1] in '.S':
      out.append('.' if text[i + 1] == '.' else '/')
      i += 2
    else:
      out.append(text[i])
      i += 1
  return ''.join(out)


def unescape_tf2_key(key):
  """The TF1 name of a `variables/<escaped>/.ATTRIBUTES/VARIABLE_VALUE` key (inverse of `escape_tf2_key`), or None
  for any other key."""
  if not (key.startswith(TF2_VARIABLES_PREFIX) and key.endswith(TF2_VALUE_SUFFIX)):
    return None
  escaped = key[len(TF2_VARIABLES_PREFIX):-len(TF2_VALUE_SUFFIX)]
  if '/' in escaped:  # an object nested deeper than one dict entry: not a policy variable
    return None
  return _unescape_component(escaped)


# ----------------------------------------------------------------------------------------------------------------------
# Reading.


def resolve_checkpoint_path(path):
  """The checkpoint prefix of `path`: a prefix (`.../model.ckpt-300000`), one of its files (`.index`, `.data-...`),
  or a directory with a `checkpoint` state file (its newest checkpoint).

  Raises:
    NotACheckpointError: nothing there is a checkpoint.
  """
  path = os.fspath(path)
  if tf.io.gfile.isdir(path):
    latest = tf.train.latest_checkpoint(path)
    if latest is None:
      raise NotACheckpointError(
          f'{path} is a directory without a `checkpoint` state file naming a checkpoint; pass a checkpoint prefix '
          f'such as {os.path.join(path, "model.ckpt-300000")} (the name of its .index file without ".index").')
    return latest
  path = re.sub(r'\.(index|data-\d+-of-\d+|meta)$', '', path)
  if not tf.io.gfile.exists(path + '.index'):
    directory = os.path.dirname(path) or '.'
    hint = ''
    if tf.io.gfile.isdir(directory):
      prefixes = sorted(name[:-len('.index')] for name in tf.io.gfile.listdir(directory) if name.endswith('.index'))
      if prefixes:
        hint = ' Checkpoints in that directory: ' + _shorten(prefixes, 6) + '.'
    raise NotACheckpointError(f'no checkpoint at {path}: {path}.index does not exist. Pass a checkpoint prefix such '
                              f'as <train_dir>/policy/model.ckpt-300000.{hint}')
  return path


def _open(path):
  """(prefix, reader) of the checkpoint at `path`."""
  path = resolve_checkpoint_path(path)
  try:
    return path, tf.train.load_checkpoint(path)
  except (tf.errors.OpError, ValueError) as e:
    message = getattr(e, 'message', None) or str(e)
    raise NotACheckpointError(f'{path} is not a readable TensorFlow checkpoint: {message.strip()}') from None


class _Entries(object):
  """The policy-relevant entries of a checkpoint: {TF1 name: (key, shape, dtype)} and its format."""

  def __init__(self, path, reader):
    self.path = path
    self.reader = reader
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    self.entries = collections.OrderedDict()
    self.other_keys = []  # object-based checkpoints: keys that are not a `variables/<name>` entry nor metadata
    if TF2_OBJECT_GRAPH_KEY in shapes:
      self.format = FORMAT_TF2
      for key in sorted(shapes):
        name = unescape_tf2_key(key)
        if name is not None:
          self.entries[name] = (key, list(shapes[key]), dtypes[key])
        elif key not in (TF2_OBJECT_GRAPH_KEY, TF2_SAVE_COUNTER_KEY):
          self.other_keys.append(key)
    else:
      self.format = FORMAT_TF1
      for key in sorted(shapes):
        self.entries[key] = (key, list(shapes[key]), dtypes[key])

  def read(self, name):
    return self.reader.get_tensor(self.entries[name][0])


def read_policy_entries(path):
  """(format, {TF1 name: (shape list, tf.DType)}) of the checkpoint at `path` (either format)."""
  path, reader = _open(path)
  entries = _Entries(path, reader)
  return entries.format, collections.OrderedDict((n, (s, d)) for n, (_, s, d) in entries.entries.items())


def read_policy_tensors(path, policy_only=False):
  """(prefix, {TF1 name: numpy array}) of the checkpoint at `path` (either format), every entry as it is stored.

  Args:
    path: a checkpoint prefix or a directory with a `checkpoint` state file (`resolve_checkpoint_path`).
    policy_only: keep only the names of a policy checkpoint, dropping a full training checkpoint's
      training-only variables.

  Raises:
    NotACheckpointError: `path` is not a readable checkpoint.
  """
  path, reader = _open(path)
  entries = _Entries(path, reader)
  names = [n for n in entries.entries if not policy_only or _POLICY_NAME.match(n)]
  return path, collections.OrderedDict((name, entries.read(name)) for name in names)


KIND_POLICY = 'policy'  # a policy checkpoint, original TF1 or this port's
KIND_FULL_TF1 = 'original TF1 full training checkpoint'
KIND_FULL = "this port's full training checkpoint"


def checkpoint_kind(path):
  """What the checkpoint at `path` is: KIND_POLICY, KIND_FULL_TF1 (the original's `<train_dir>/model.ckpt-<step>`:
  names of training-only variables) or KIND_FULL (`uvf.train.TrainingLoop`'s: object-based, without
  `variables/<name>` entries).

  Raises:
    NotACheckpointError: `path` is not a readable checkpoint.
  """
  path, reader = _open(path)
  entries = _Entries(path, reader)
  if entries.format == FORMAT_TF2:
    return KIND_POLICY if entries.entries else KIND_FULL
  return KIND_FULL_TF1 if any(_TRAINING_ONLY_NAME.search(name) for name in entries.entries) else KIND_POLICY


def checkpoint_step(path):
  """The global step of a checkpoint: N of a `...-N` prefix, else its stored `global_step`.

  Args:
    path: checkpoint prefix (`.../model.ckpt-300000`), one of its files, or a directory with a `checkpoint` file.

  Raises:
    NotACheckpointError: `path` is not a checkpoint.
    ValueError: the prefix is not numbered and the checkpoint holds no integer scalar `global_step`.
  """
  path, reader = _open(path)
  match = re.search(r'-(\d+)$', os.path.basename(path))
  if match:
    return int(match.group(1))
  entries = _Entries(path, reader)
  if GLOBAL_STEP_NAME in entries.entries:
    _, shape, dtype = entries.entries[GLOBAL_STEP_NAME]
    if not shape and dtype.is_integer:
      return int(entries.read(GLOBAL_STEP_NAME))
  raise ValueError(f'{path} has no step: its name does not end in -<step> and it holds no integer scalar '
                   f'{GLOBAL_STEP_NAME}.')


# ----------------------------------------------------------------------------------------------------------------------
# Diagnosis of mismatches.


def _shorten(names, limit=_MAX_LISTED):
  names = list(names)
  if len(names) <= limit:
    return ', '.join(names)
  return ', '.join(names[:limit]) + f', ... ({len(names) - limit} more)'


def describe_shapes(shapes):
  """What a {TF1 name: shape list} map looks like: {'setting': goal setting 'hiro_orig' / 'hiro_xy' / 'hiro_repr',
  'O': observation dim, 'M': meta (task) context dim, 'G': goal dim}, None where unknown."""

  def dim(name, axis):
    shape = shapes.get(name)
    return int(shape[axis]) if shape is not None and len(shape) > axis else None

  g = dim('meta_agent/actor_net/actions/weights', 1) or dim('uvf_agent/action_context_0', 0)
  m = dim('meta_agent/action_context_0', 0)
  o = None
  meta_in = dim('meta_agent/actor_net/states/states_1/weights', 0)
  low_in = dim('uvf_agent/actor_net/states/states_1/weights', 0)
  if meta_in is not None and m is not None:
    o = meta_in - m
  elif low_in is not None and g is not None:
    o = low_in - g
  if any(name.startswith('state_preprocess/') for name in shapes):
    setting = 'hiro_repr'
  elif g == 15:
    setting = 'hiro_orig'
  elif g == 2:
    setting = 'hiro_xy'
  else:
    setting = None
  return {'setting': setting, 'O': o, 'M': m, 'G': g}


def describe(shapes):
  """A one-line description of the configuration a {TF1 name: shape} map was built with."""
  d = describe_shapes(shapes)
  parts = [d['setting'] or 'an unknown goal setting']
  if d['G'] is not None:
    parts.append(f'goal dim SUBGOAL_DIM={d["G"]}')
  if d['O'] is not None:
    robot = _ROBOTS_BY_OBSERVATION_DIM.get(d['O'])
    parts.append(f'observation dim {d["O"]}' + (f' ({robot})' if robot else ''))
  if d['M'] is not None:
    parts.append(f'task context dim {d["M"]}')
  return ', '.join(parts)


def _config_hint(checkpoint_shapes, model_shapes, known_configs=None):
  found, built = describe_shapes(checkpoint_shapes), describe_shapes(model_shapes)
  if found == built:
    return ('The checkpoint and the model have the same goal setting and dims; check the network sizes '
            '(ddpg_actor_net.hidden_layers, ddpg_critic_net.*_hidden_layers) bound by the gin files.')
  configs = (known_configs or {}).get((found['setting'], found['O'], found['M']))
  advice = ('evaluate it with the configuration it was trained with, e.g. ' +
            ' or '.join(configs)) if configs else ('evaluate it with the gin configuration it was trained with')
  if found['setting'] == 'hiro_repr' and built['setting'] != 'hiro_repr':
    advice += ' (hiro_repr: StatePreprocess.trainable = True)'
  return (f'The checkpoint looks like {describe(checkpoint_shapes)}; the model was built as '
          f'{describe(model_shapes)}: {advice}.')


def _format_problems(entries, missing, unexpected, misshaped, targets, allow_extra, known_configs=None):
  lines = [
      f'checkpoint {entries.path} ({entries.format} format) does not match the policy variables; nothing '
      'was restored:'
  ]
  if missing:
    lines.append(f'  missing in the checkpoint ({len(missing)}): ' + _shorten(missing))
  if unexpected:
    lines.append(f'  unexpected in the checkpoint ({len(unexpected)}): ' + _shorten(unexpected))
  if misshaped:
    lines.append(f'  wrong shape or dtype ({len(misshaped)}):')
    lines.extend('    ' + problem for problem in misshaped[:_MAX_LISTED])
    if len(misshaped) > _MAX_LISTED:
      lines.append(f'    ... ({len(misshaped) - _MAX_LISTED} more)')
  checkpoint_shapes = {name: shape for name, (_, shape, _) in entries.entries.items()}
  model_shapes = {name: variable.shape.as_list() for name, variable in targets.items()}
  training_only = [name for name in unexpected if _TRAINING_ONLY_NAME.search(name)]
  if entries.format == FORMAT_TF2 and not entries.entries:
    lines.append(f'  This is not a policy checkpoint of this port (it has no {TF2_VARIABLES_PREFIX}<name> entries): '
                 'a full training checkpoint <train_dir>/model.ckpt-<step> perhaps; pass '
                 '<train_dir>/policy/model.ckpt-<step>.')
  elif training_only and not allow_extra:
    lines.append(f'  {len(training_only)} unexpected names are training-only variables (target networks, Adam '
                 'slots, counters, replay buffers): this looks like the original\'s full training '
                 'checkpoint <train_dir>/model.ckpt-<step>. Pass its policy checkpoint '
                 '<train_dir>/policy/model.ckpt-<step>, or ignore them: run_eval.py --checkpoint_path reads a '
                 'full training checkpoint as it is, `python -m uvf.checkpoints export --allow_extra` and '
                 'restore_policy(..., allow_extra=True) ignore them.')
  if entries.entries and (misshaped or (missing and unexpected) or
                          any(name.startswith('state_preprocess/') for name in list(missing) + list(unexpected))):
    lines.append('  ' + _config_hint(checkpoint_shapes, model_shapes, known_configs))
  return '\n'.join(lines)


# ----------------------------------------------------------------------------------------------------------------------
# Restore and export.


def restore_policy(path, variables_by_name, allow_extra=False, subset=False, known_configs=None):
  """Restores a policy checkpoint (original TF1, or this port's) into `variables_by_name`, strictly.

  Every name of `variables_by_name` must be in the checkpoint with the variable's shape and dtype, and the checkpoint
  may hold no other name. The object-based format's own entries (`save_counter`, the object graph) are not names.
  Everything is checked and read before anything is assigned: on any error no variable changed.

  Args:
    path: checkpoint prefix (`<train_dir>/policy/model.ckpt-300000`), one of its files, or a directory with a
      `checkpoint` state file (its newest checkpoint).
    variables_by_name: {original TF1 name: tf.Variable}, e.g. `uvf.build.policy_variables_by_tf1_name(...)`.
    allow_extra: if True, names of the checkpoint that are not policy variables are ignored: the variables of the
      original's full training checkpoint `<train_dir>/model.ckpt-<step>` (target networks, Adam slots and beta
      powers, `update_targets/...counter...`, timers, replay buffers, ...). Policy names (those of a policy
      checkpoint: actors, critics, counters, contexts, `state_preprocess/...`) are never ignored: an extra one means the
      checkpoint was trained with another configuration.
    subset: if True, `variables_by_name` is a part of what the checkpoint holds (e.g. the low level alone, the
      original's `load_path`): every one of them must be there, and all other names are ignored.
    known_configs: None, or {(goal setting, observation dim O, meta context dim M): [configuration names]} (see
      `describe_shapes`): the configurations a mismatch's hint names for a checkpoint of those shapes (without it,
      the hint describes the checkpoint: goal setting, dims, robot).

  Returns:
    str, the checkpoint prefix restored (resolved, e.g. when `path` is a directory).

  Raises:
    NotACheckpointError: `path` is not a readable checkpoint.
    CheckpointMismatchError (a ValueError): listing the missing, unexpected and mis-shaped / mis-typed names, with a
      hint on the configuration the checkpoint looks trained with.
  """
  path, reader = _open(path)
  entries = _Entries(path, reader)
  targets = collections.OrderedDict(variables_by_name)
  if not targets:
    raise ValueError('restore_policy: variables_by_name is empty.')

  missing = [name for name in targets if name not in entries.entries]
  unexpected = [
      name for name in entries.entries if name not in targets and not (allow_extra and not _POLICY_NAME.match(name))
  ]
  unexpected += entries.other_keys if not allow_extra else []
  if subset:
    unexpected = []
  misshaped = []
  for name, variable in targets.items():
    if name not in entries.entries:
      continue
    _, shape, dtype = entries.entries[name]
    if shape != variable.shape.as_list() or dtype != variable.dtype.base_dtype:
      misshaped.append(f'{name} is {dtype.name}{shape} in the checkpoint, '
                       f'{variable.dtype.base_dtype.name}{variable.shape.as_list()} in the model')
  if missing or unexpected or misshaped:
    raise CheckpointMismatchError(
        _format_problems(entries, missing, unexpected, misshaped, targets, allow_extra, known_configs))

  values = collections.OrderedDict()
  for name in targets:
    try:
      values[name] = entries.read(name)
    except tf.errors.OpError as e:
      raise NotACheckpointError(f'{path}: could not read {name}: {e.message.strip()}') from None
  for name, variable in targets.items():
    variable.assign(values[name])
  return path


# ----------------------------------------------------------------------------------------------------------------------
# Resuming a HIRO run (the scanning and repair of a run directory: `rundir.checkpoints`).


def _refuse_original_full_checkpoint(prefix):
  """`rundir.checkpoints.resume`'s check: an original TF1 full training checkpoint cannot be resumed as a run."""
  if run_checkpoints.is_name_based(prefix):
    raise errors.RunDirectoryError(
        f'{prefix} is an original TF1 (efficient-hrl) full training checkpoint: resuming it as a run is not '
        'supported (its replay buffers, optimizer and collection state are not kept as this port keeps them). '
        f'Evaluate its policy with run_eval.py CONFIG --checkpoint_path {prefix}, or start a new run in another '
        f'--train_dir from its low level with --gin_param "train_uvf.load_path = \'{prefix}\'". Nothing was '
        'changed.')


def find_resumable(train_dir, policy_dir=None):
  """The newest readable full checkpoint `<train_dir>/model.ckpt-<step>` to resume from; None for a fresh directory.

  `rundir.checkpoints.resume` with HIRO's words: what interrupted saves left is removed (in train_dir and
  policy_dir); the directory is scanned, not only its `checkpoint` index file (which may be lost or stale); a newer
  full checkpoint that cannot be read is set aside (renamed `*.corrupt`, kept) with a warning, and the index file is
  rebuilt when it does not name the checkpoint chosen.

  Args:
    train_dir: the run directory (full checkpoints `model.ckpt-<step>`).
    policy_dir: its policy checkpoints' directory (`<train_dir>/policy`), or None.

  Raises:
    rundir.errors.RunDirectoryError (nothing is changed): checkpoint files exist (policy checkpoints, an index file
      naming checkpoints, checkpoints set aside) but no full checkpoint, or none is readable; or the newest readable
      one is an original TF1 (efficient-hrl) full training checkpoint, which cannot be resumed as a run.
  """
  policies = []
  if policy_dir:
    run_checkpoints.remove_partial_saves(policy_dir)
    policies = run_checkpoints.list_checkpoints(policy_dir)
  held = [f'policy checkpoints up to step {policies[-1][0]} in {policy_dir}'] if policies else []
  resumed = run_checkpoints.resume(train_dir, what='full checkpoint', unit='step', start='step 0', flag='--train_dir',
                                   also_held=held, check=_refuse_original_full_checkpoint)
  return resumed.prefix if resumed else None


def export_tf1_policy(variables_by_name, path):
  """Writes `variables_by_name` as a name-based TF1 checkpoint, as the original's policy `tf.train.Saver` did.

  The keys are the names themselves (the variables' op names in the original graph), so `tf.compat.v1.train.Saver()`
  in a graph whose variables have those names (the original's eval graph) restores it, and so does
  `restore_policy`. The `checkpoint` state file of the directory is updated (`tf.train.latest_checkpoint` finds it).

  Args:
    variables_by_name: {original TF1 name: tf.Variable or array}, e.g. `uvf.build.policy_variables_by_tf1_name(...)`.
    path: the checkpoint prefix to write, e.g. `out/policy/model.ckpt-300000` (no step is appended).

  Returns:
    str, the prefix written (`path`).
  """
  path = os.fspath(path)
  if not variables_by_name:
    raise ValueError('export_tf1_policy: variables_by_name is empty.')
  bad = [
      name for name in variables_by_name
      if not re.match(r'^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$', name) or name.endswith('/') or '//' in name
  ]
  if bad:
    raise ValueError('export_tf1_policy: not valid TF1 variable names: ' + _shorten(map(repr, bad)))
  names = list(variables_by_name)
  tensors = [tf.convert_to_tensor(variables_by_name[name]) for name in names]
  tf.io.gfile.makedirs(os.path.dirname(path if '://' in path else os.path.abspath(path)))
  with tf.device('/cpu:0'):
    tf.raw_ops.SaveV2(prefix=path, tensor_names=names, shape_and_slices=[''] * len(names), tensors=tensors)
  run_checkpoints.add_to_index(path)
  return path
