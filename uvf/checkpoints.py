"""HIRO policy checkpoints: the original TF1 ones and this port's, read strictly by the original variable names.

Two formats hold the same policy (hiro.md section 4.1: both levels' actors and twin critics, `global_step`,
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

Run directories (`uvf.train.TrainingLoop`, docs/reliability.md): `list_checkpoints` scans a directory for
`model.ckpt-<step>` checkpoints (the `checkpoint` index file may be lost), `unreadable(prefix)` reads every tensor
(a truncated or corrupt file shows), `set_aside(prefix)` renames a corrupt one out of the way (kept for inspection),
`remove_partial_saves` deletes what an interrupted save left (`*_temp` folders), `write_index` rebuilds the
`checkpoint` index file, `storage_error` turns a failed write into one `RunDirectoryError` naming the directory, the
size needed and what is free.

`read_policy_tensors(path)` reads a checkpoint's entries by TF1 name, as they are.

This module is a library: it imports no other module of `uvf` (the command line that exports and lists checkpoints
is `scripts/hiro_checkpoints.py`).
"""

import collections
import errno
import glob
import os
import re
import shutil

from absl import logging
import tensorflow as tf

# Keys of this port's (object-based, TF2) policy checkpoints.
TF2_OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
TF2_VARIABLES_PREFIX = 'variables/'
TF2_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
TF2_SAVE_COUNTER_KEY = 'save_counter' + TF2_VALUE_SUFFIX

FORMAT_TF1 = 'original TF1 name-based'
FORMAT_TF2 = "TF2 object-based (this port's)"

GLOBAL_STEP_NAME = 'global_step'
_MAX_LISTED = 12  # names listed per kind of problem in an error message

# The names a policy checkpoint holds (hiro.md 4.1). `allow_extra` never ignores one of these.
_POLICY_NAME = re.compile(
    r'^((uvf_agent|meta_agent)/(actor_net|critic_net|critic_net2)/.+/(weights|biases)'
    r'|(uvf_agent|meta_agent)/action_context_\d+'
    r'|state_preprocess/(state_process_net|action_embed_net)/.+/(weights|biases)'
    r'|global_step|num_episodes|num_resets)$')
# Names only the original's full training checkpoint `<train_dir>/model.ckpt-<step>` has (hiro.md 4.2), to say
# "this is a full training checkpoint" in error messages.
_TRAINING_ONLY_NAME = re.compile(
    r'(/Adam(_\d+)?$|/beta[12]_power(_\d+)?$|^update_targets/|/target_(actor|critic)_net|/num_timer_steps'
    r'|^(agent|meta)/(BufferVariable_\d+|num_adds)$|^(num_updates|num_meta_updates|episode_rewards'
    r'|episode_meta_rewards|all_embed|states_var|actions_var|state_var|reward_var|meta_action_var'
    r'|meta_context_var\d+)$|^meta_agent/action_context_\d+_\d+$)')

# (goal setting, observation dim O, meta context dim M) -> the configs of this repository with those shapes.
_CONFIGS_BY_SHAPES = {
    ('hiro_orig', 30, 2): ['configs/ant_maze.gin', 'configs/ant_push.gin'],
    ('hiro_orig', 30, 3): ['configs/ant_fall.gin'],
    ('hiro_xy', 30, 2): ['configs/ant_maze_xy.gin'],
    ('hiro_xy', 33, 2): ['configs/ant_block.gin', 'configs/ant_block_maze.gin'],
    ('hiro_xy', 7, 2): ['configs/point_maze.gin'],
    ('hiro_repr', 30, 2): ['configs/ant_maze_repr.gin', 'configs/ant_push_repr.gin'],
    ('hiro_repr', 30, 3): ['configs/ant_fall_repr.gin'],
    ('hiro_repr', 33, 2): ['configs/ant_block_repr.gin', 'configs/ant_block_maze_repr.gin'],
    ('hiro_repr', 7, 2): ['configs/point_maze_repr.gin'],
}
_ROBOTS_BY_OBSERVATION_DIM = {7: 'Point: PointMaze', 30: 'Ant: AntMaze / AntPush / AntFall',
                              33: 'Ant: AntBlock / AntBlockMaze', 105: 'Ant with top-down images: the *_img tasks'}


class CheckpointMismatchError(ValueError):
  """A checkpoint's names, shapes or dtypes do not match the variables to restore (nothing was assigned).
  `user_error`: the launcher prints the message alone (e.g. a wrong `train_uvf.load_path`)."""
  user_error = True


class NotACheckpointError(ValueError):
  """The path is not a readable TensorFlow checkpoint (no `<prefix>.index`, or an unreadable one). `user_error`: as
  `CheckpointMismatchError`."""
  user_error = True


class RunDirectoryError(ValueError):
  """The run directory cannot be used now: its checkpoints are unreadable or of an unsupported kind, or the disk is
  full (at the start or during a save). The message names the files, the sizes and the fix; `user_error` tells the
  launcher to print it alone, with exit status `exit_code` (launcher.EXIT_RUN_DIR)."""
  user_error = True
  exit_code = 4


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
    policy_only: keep only the names of a policy checkpoint (hiro.md 4.1), dropping a full training checkpoint's
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
  names of training-only variables, hiro.md 4.2) or KIND_FULL (`uvf.train.TrainingLoop`'s: object-based, without
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


def _describe_shapes(shapes):
  """What a {TF1 name: shape list} map looks like: dict with 'setting', 'O', 'M', 'G' (None where unknown)."""
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
  d = _describe_shapes(shapes)
  parts = [d['setting'] or 'an unknown goal setting']
  if d['G'] is not None:
    parts.append(f'goal dim SUBGOAL_DIM={d["G"]}')
  if d['O'] is not None:
    robot = _ROBOTS_BY_OBSERVATION_DIM.get(d['O'])
    parts.append(f'observation dim {d["O"]}' + (f' ({robot})' if robot else ''))
  if d['M'] is not None:
    parts.append(f'task context dim {d["M"]}')
  return ', '.join(parts)


def _config_hint(checkpoint_shapes, model_shapes):
  found, built = _describe_shapes(checkpoint_shapes), _describe_shapes(model_shapes)
  if found == built:
    return ('The checkpoint and the model have the same goal setting and dims; check the network sizes '
            '(ddpg_actor_net.hidden_layers, ddpg_critic_net.*_hidden_layers) bound by the gin files.')
  configs = _CONFIGS_BY_SHAPES.get((found['setting'], found['O'], found['M']))
  advice = ('evaluate it with the configuration it was trained with, e.g. ' + ' or '.join(configs)) if configs else (
      'evaluate it with the gin configuration it was trained with')
  if found['setting'] == 'hiro_repr' and built['setting'] != 'hiro_repr':
    advice += ' (hiro_repr: StatePreprocess.trainable = True)'
  return (f'The checkpoint looks like {describe(checkpoint_shapes)}; the model was built as '
          f'{describe(model_shapes)}: {advice}.')


def _format_problems(entries, missing, unexpected, misshaped, targets, allow_extra):
  lines = [f'checkpoint {entries.path} ({entries.format} format) does not match the policy variables; nothing '
           'was restored:']
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
                 'slots, counters, replay buffers; hiro.md 4.2): this looks like the original\'s full training '
                 'checkpoint <train_dir>/model.ckpt-<step>. Pass its policy checkpoint '
                 '<train_dir>/policy/model.ckpt-<step>, or ignore them: run_eval.py --checkpoint_path reads a '
                 'full training checkpoint as it is, `python -m uvf.checkpoints export --allow_extra` and '
                 'restore_policy(..., allow_extra=True) ignore them.')
  if entries.entries and (misshaped or (missing and unexpected) or any(
      name.startswith('state_preprocess/') for name in list(missing) + list(unexpected))):
    lines.append('  ' + _config_hint(checkpoint_shapes, model_shapes))
  return '\n'.join(lines)


# ----------------------------------------------------------------------------------------------------------------------
# Restore and export.


def restore_policy(path, variables_by_name, allow_extra=False, subset=False):
  """Restores a policy checkpoint (original TF1, or this port's) into `variables_by_name`, strictly.

  Every name of `variables_by_name` must be in the checkpoint with the variable's shape and dtype, and the checkpoint
  may hold no other name. The object-based format's own entries (`save_counter`, the object graph) are not names.
  Everything is checked and read before anything is assigned: on any error no variable changed.

  Args:
    path: checkpoint prefix (`<train_dir>/policy/model.ckpt-300000`), one of its files, or a directory with a
      `checkpoint` state file (its newest checkpoint).
    variables_by_name: {original TF1 name: tf.Variable}, e.g. `uvf.build.policy_variables_by_tf1_name(...)`.
    allow_extra: if True, names of the checkpoint that are not policy variables are ignored: the variables of the
      original's full training checkpoint `<train_dir>/model.ckpt-<step>` (hiro.md 4.2: target networks, Adam slots
      and beta powers, `update_targets/...counter...`, timers, replay buffers, ...). Policy names (hiro.md 4.1:
      actors, critics, counters, contexts, `state_preprocess/...`) are never ignored: an extra one means the
      checkpoint was trained with another configuration.
    subset: if True, `variables_by_name` is a part of what the checkpoint holds (e.g. the low level alone, the
      original's `load_path`): every one of them must be there, and all other names are ignored.

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
  unexpected = [name for name in entries.entries if name not in targets and
                not (allow_extra and not _POLICY_NAME.match(name))]
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
    raise CheckpointMismatchError(_format_problems(entries, missing, unexpected, misshaped, targets, allow_extra))

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
# Run directories: scanning, repair, disk space.

CHECKPOINT_NAME = 'model.ckpt'
CORRUPT_SUFFIX = '.corrupt'


def list_checkpoints(directory, name=CHECKPOINT_NAME):
  """[(step, prefix)] of the `<name>-<step>.index` files in `directory`, oldest first (the files, not the index)."""
  found = []
  for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), name + '-*.index')):
    match = re.search(re.escape(name) + r'-(\d+)\.index$', path)
    if match:
      found.append((int(match.group(1)), path[:-len('.index')]))
  return sorted(found)


def unreadable(prefix):
  """None if every tensor of the checkpoint `prefix` reads back (their checksums verified), else the error's text.
  A truncated, corrupt or half-written checkpoint shows here (DataLossError, 'Read less bytes than requested')."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for key in reader.get_variable_to_shape_map():
      reader.get_tensor(key)
  except (tf.errors.OpError, ValueError, IndexError, EOFError, OSError) as e:
    message = (getattr(e, 'message', None) or str(e)).strip().splitlines()
    return f'{type(e).__name__}: {message[0] if message else ""}'
  return None


def is_name_based(prefix):
  """Whether the checkpoint `prefix` is a TF1 name-based one (an original efficient-hrl checkpoint: no object
  graph)."""
  return TF2_OBJECT_GRAPH_KEY not in tf.train.load_checkpoint(prefix).get_variable_to_shape_map()


def checkpoint_files(prefix):
  """The files of the checkpoint `prefix` (its index and data shards)."""
  return sorted(tf.io.gfile.glob(glob.escape(prefix) + '.index') +
                tf.io.gfile.glob(glob.escape(prefix) + '.data-?????-of-?????'))


def checkpoint_bytes(prefix):
  """Bytes on disk of the checkpoint `prefix`."""
  return sum(tf.io.gfile.stat(path).length for path in checkpoint_files(prefix))


def set_aside(prefix):
  """Renames the files of the checkpoint `prefix` to `<file>.corrupt` (`.corrupt.1`, ... if taken), so that no scan
  finds it and no save overwrites it; returns the new names."""
  renamed = []
  for path in checkpoint_files(prefix):
    target, n = path + CORRUPT_SUFFIX, 0
    while tf.io.gfile.exists(target):
      n += 1
      target = f'{path}{CORRUPT_SUFFIX}.{n}'
    tf.io.gfile.rename(path, target)
    renamed.append(target)
  return renamed


def remove_partial_saves(directory, name=CHECKPOINT_NAME):
  """Deletes what interrupted saves left in `directory`: `<name>-<step>_temp` folders (TensorFlow writes a
  checkpoint there, then moves it into place) and `checkpoint.tmp*` index files. Returns the paths removed."""
  removed = []
  if not tf.io.gfile.isdir(directory):
    return removed
  for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), name + '-*_temp')):
    tf.io.gfile.rmtree(path)
    removed.append(path)
  for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), 'checkpoint.tmp*')):
    tf.io.gfile.remove(path)
    removed.append(path)
  return removed


def write_index(directory, prefixes):
  """Rewrites the `checkpoint` index file of `directory` to list `prefixes` (checkpoints in it, oldest first; the
  last is the latest) as `tf.train.CheckpointManager` writes it, with their files' times, so that the manager
  rotates them as its own."""
  times = [tf.io.gfile.stat(prefix + '.index').mtime_nsec / 1e9 for prefix in prefixes]
  tf.compat.v1.train.update_checkpoint_state(
      directory, os.path.basename(prefixes[-1]), [os.path.basename(p) for p in prefixes],
      all_model_checkpoint_timestamps=times, last_preserved_timestamp=min(times) - 1.)


def indexed_checkpoints(directory):
  """The prefixes the `checkpoint` index file of `directory` lists ([] if it has none)."""
  try:
    state = tf.train.get_checkpoint_state(directory)
  except (tf.errors.OpError, ValueError):
    return []
  return list(state.all_model_checkpoint_paths) if state else []


def find_resumable(train_dir, policy_dir=None):
  """The newest readable full checkpoint of `train_dir` to resume from, None for a fresh directory.

  First removes what interrupted saves left (`remove_partial_saves`, in train_dir and policy_dir). The directory
  is scanned, not only its `checkpoint` index file (which may be lost or stale). A newer checkpoint that cannot be
  read is set aside (`set_aside`: renamed `*.corrupt`, kept) with a warning, and the index file is rebuilt when it
  does not name the checkpoint chosen.

  Args:
    train_dir: the run directory (full checkpoints `model.ckpt-<step>`).
    policy_dir: its policy checkpoints' directory (`<train_dir>/policy`), or None.

  Raises:
    RunDirectoryError (nothing is changed): checkpoint files exist (policy checkpoints, an index file naming
      checkpoints, checkpoints set aside) but no full checkpoint, or none is readable; or the newest readable one
      is an original TF1 (efficient-hrl) full training checkpoint, which cannot be resumed as a run.
  """
  for directory in [train_dir] + ([policy_dir] if policy_dir else []):
    for path in remove_partial_saves(directory):
      logging.warning('Removed %s, left by an interrupted save.', path)
  found = list_checkpoints(train_dir)
  if not found:
    indexed = indexed_checkpoints(train_dir)
    policies = list_checkpoints(policy_dir) if policy_dir else []
    corrupt = tf.io.gfile.glob(os.path.join(glob.escape(train_dir), f'{CHECKPOINT_NAME}-*{CORRUPT_SUFFIX}*'))
    if indexed or policies or corrupt:
      what = (f'its checkpoint index names {", ".join(os.path.basename(p) for p in indexed)}, which do not exist'
              if indexed else f'it holds no full checkpoint {CHECKPOINT_NAME}-<step>')
      held = [f'policy checkpoints up to step {policies[-1][0]} in {policy_dir}'] if policies else []
      held += [f'checkpoints set aside as corrupt ({os.path.basename(corrupt[0])}, ...)'] if corrupt else []
      raise RunDirectoryError(
          f'{train_dir} cannot be resumed: {what}, but it holds {"; ".join(held) or "checkpoint files"}. Starting '
          'again from step 0 here would overwrite them: nothing was changed. Restore the missing full checkpoint '
          'files, or use another --train_dir.')
    return None
  bad = []
  for _, prefix in reversed(found):
    error = unreadable(prefix)
    if error is None:
      break
    bad.append((prefix, error))
  else:
    listing = '; '.join(f'{os.path.basename(p)}: {e}' for p, e in bad)
    raise RunDirectoryError(
        f'{train_dir} holds full checkpoints but none is readable ({listing}). Nothing was changed (starting from '
        'step 0 here would overwrite the run): copy intact checkpoint files back, or use another --train_dir.')
  if is_name_based(prefix):
    raise RunDirectoryError(
        f'{prefix} is an original TF1 (efficient-hrl) full training checkpoint: resuming it as a run is not '
        'supported (its replay buffers, optimizer and collection state are not kept as this port keeps them). '
        f'Evaluate its policy with run_eval.py CONFIG --checkpoint_path {prefix}, or start a new run in another '
        f'--train_dir from its low level with --gin_param "train_uvf.load_path = \'{prefix}\'". Nothing was '
        'changed.')
  for bad_prefix, error in bad:
    renamed = set_aside(bad_prefix)
    logging.warning('%s is unreadable (%s); kept as %s.', bad_prefix, error, ', '.join(renamed))
    print(f'warning: the full checkpoint {bad_prefix} is unreadable ({error}): the run resumes from the older '
          f'{os.path.basename(prefix)}, and its files are kept as {", ".join(os.path.basename(p) for p in renamed)}.',
          flush=True)
  indexed = indexed_checkpoints(train_dir)
  if not indexed or os.path.basename(indexed[-1]) != os.path.basename(prefix):
    kept = [p for _, p in list_checkpoints(train_dir)]
    write_index(train_dir, kept)
    logging.warning('Rebuilt the checkpoint index file of %s (it was %s): %s.', train_dir,
                    'missing' if not indexed else f'naming {os.path.basename(indexed[-1])}',
                    ', '.join(os.path.basename(p) for p in kept))
  return prefix


def free_bytes(directory):
  """Free bytes on the file system of `directory` (or of its nearest existing parent); None if unknown (a remote
  file system such as gs://)."""
  path = os.path.abspath(directory) if '://' not in directory else None
  while path:
    if os.path.exists(path):
      try:
        return shutil.disk_usage(path).free
      except OSError:
        return None
    parent = os.path.dirname(path)
    path = parent if parent != path else None
  return None


def format_bytes(n):
  """'459.2 MB' (decimal units), '?' for None."""
  if n is None:
    return '?'
  n = float(n)
  for unit in ('bytes', 'KB', 'MB', 'GB'):
    if n < 1000:
      return f'{n:.0f} {unit}' if unit == 'bytes' else f'{n:.1f} {unit}'
    n /= 1000
  return f'{n:.1f} TB'


def is_disk_full(error):
  """Whether an exception of a write says the disk (or a quota) is full."""
  if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
    return True
  text = str(getattr(error, 'message', '') or error)
  return isinstance(error, tf.errors.ResourceExhaustedError) or 'No space left on device' in text


def storage_error(error, directory, what, needed=None, intact=None):
  """The `RunDirectoryError` of a failed write of `what` into `directory` (disk full, permission, ...).

  Args:
    error: the exception the write raised.
    directory: where it wrote.
    what: e.g. 'the full checkpoint model.ckpt-300000'.
    needed: bytes the write needs, if known.
    intact: the checkpoint the run resumes from (named in the message), if any.
  """
  message = (getattr(error, 'message', None) or str(error)).strip().splitlines()
  reason = 'the disk is full' if is_disk_full(error) else f'{type(error).__name__}: {message[0] if message else ""}'
  need = f' It needs about {format_bytes(needed)};' if needed else ''
  keep = (f' The previous checkpoint {intact} is intact: free some space and run the same command to resume from '
          f'it.' if intact else ' Free some space (or fix the directory) and run the same command again.')
  return RunDirectoryError(f'writing {what} into {directory} failed: {reason}.{need} '
                           f'{format_bytes(free_bytes(directory))} free there.{keep}')


def _absolute(path):
  """`path` made absolute, unless it is a URL of a TensorFlow file system (gs://, ram://, s3://, ...)."""
  return path if '://' in path else os.path.abspath(path)


def _add_to_checkpoint_state(directory, path):
  """Makes `path` the newest checkpoint of the `checkpoint` state file of `directory` (as `Saver.save` does)."""
  state = tf.train.get_checkpoint_state(directory)
  previous = [p for p in (state.all_model_checkpoint_paths if state else []) if _absolute(p) != _absolute(path)]

  def relative(p):
    return os.path.basename(p) if os.path.dirname(_absolute(p)) == directory else p

  paths = [relative(p) for p in previous + [_absolute(path)]]
  lines = [f'model_checkpoint_path: "{paths[-1]}"'] + [f'all_model_checkpoint_paths: "{p}"' for p in paths]
  with tf.io.gfile.GFile(os.path.join(directory, 'checkpoint'), 'w') as f:
    f.write('\n'.join(lines) + '\n')


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
  bad = [name for name in variables_by_name
         if not re.match(r'^[A-Za-z0-9.][A-Za-z0-9_.\-/]*$', name) or name.endswith('/') or '//' in name]
  if bad:
    raise ValueError('export_tf1_policy: not valid TF1 variable names: ' + _shorten(map(repr, bad)))
  names = list(variables_by_name)
  tensors = [tf.convert_to_tensor(variables_by_name[name]) for name in names]
  directory = os.path.dirname(_absolute(path))
  tf.io.gfile.makedirs(directory)
  with tf.device('/cpu:0'):
    tf.raw_ops.SaveV2(prefix=path, tensor_names=names, shape_and_slices=[''] * len(names), tensors=tensors)
  _add_to_checkpoint_state(directory, path)
  return path
