"""Checkpoints: TF2 object-based checkpoints for our runs, and the original TF1 name-based checkpoints.

Our runs: `make_checkpoint_manager(directory, agent, optimizer, num_environment_frames)` writes
`<directory>/model.ckpt-<frames>` (the original's naming) with `tf.train.Checkpoint`; `save` writes one (a failed
save is one `RunDirectoryError`); `restore_latest` resumes from the newest readable checkpoint it finds in the
directory (the `checkpoint` index file may be lost; a corrupt newer one is set aside as `*.corrupt`; an original TF1
checkpoint resumes too). docs/reliability.md.

Original IMPALA checkpoints (`deepmind/scalable_agent`, TF 1.9; reference impala.md section 3.4) are keyed by
variable name: the 41 agent variables (`agent/batch_apply/convnet/conv_2d/w`, ...), for each of them the RMSProp
slots `<name>/RMSProp` (mean square, initialised to 1) and `<name>/RMSProp_1` (momentum), and the global step
`num_environment_frames` (int64, counts environment frames): 124 entries. `restore_tf1_checkpoint` loads one into an
`Agent` (and optionally the optimizer's slots) strictly by name; `export_tf1_checkpoint` writes one that
`tf.compat.v1.train.Saver` and the original code can restore.

The optimizer interface used here: `optimizer.slots_for(variable)` returns `(mean_square, momentum)`, two
tf.Variables shaped like `variable` (the learner's RMSProp with TF1 semantics).
"""

import collections
import errno
import glob
import os
import re
import shutil

from absl import logging
import numpy as np
import tensorflow as tf

GLOBAL_STEP_NAME = 'num_environment_frames'
MEAN_SQUARE_SLOT_SUFFIX = '/RMSProp'
MOMENTUM_SLOT_SUFFIX = '/RMSProp_1'
CHECKPOINT_NAME = 'model.ckpt'
CORRUPT_SUFFIX = '.corrupt'
TF2_OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'


class RunDirectoryError(ValueError):
  """The run directory cannot be used now: it holds checkpoints but none is readable, or a save failed (disk full,
  permission). The message names the files and the fix; `user_error` tells the launcher to print it alone, with
  exit status `exit_code` (launcher.EXIT_RUN_DIR)."""
  user_error = True
  exit_code = 4


def make_checkpoint(agent, optimizer=None, num_environment_frames=None):
  """A `tf.train.Checkpoint` of the agent, and of the optimizer and frame counter when given.

  Args:
    agent: the `Agent`.
    optimizer: optional trackable optimizer (a tf.Module or Keras optimizer), saved with its slots.
    num_environment_frames: optional int64 scalar tf.Variable, the global step.
  """
  trackables = {'agent': agent}
  if optimizer is not None:
    if not isinstance(optimizer, tf.__internal__.tracking.Trackable):
      raise ValueError(f'optimizer {optimizer!r} is not trackable: make it a tf.Module (or pass optimizer=None).')
    trackables['optimizer'] = optimizer
  if num_environment_frames is not None:
    trackables['num_environment_frames'] = num_environment_frames
  return tf.train.Checkpoint(**trackables)


class _FrameNumberedCheckpointManager(tf.train.CheckpointManager):
  """A CheckpointManager whose `save()` numbers checkpoints by the frame counter (`model.ckpt-<frames>`)."""

  def __init__(self, checkpoint, directory, max_to_keep, num_environment_frames):
    super().__init__(checkpoint, directory, max_to_keep=max_to_keep, checkpoint_name=CHECKPOINT_NAME)
    self._num_environment_frames = num_environment_frames
    self._arguments = (checkpoint, directory, max_to_keep, num_environment_frames)

  def reload(self):
    """Reads the directory's `checkpoint` index file again (after `restore_latest` rebuilt it)."""
    self.__init__(*self._arguments)

  def save(self, checkpoint_number=None, check_interval=True, options=None):
    if checkpoint_number is None and self._num_environment_frames is not None:
      checkpoint_number = self._num_environment_frames
    return super().save(checkpoint_number=checkpoint_number, check_interval=check_interval, options=options)


def make_checkpoint_manager(directory, agent, optimizer=None, num_environment_frames=None, max_to_keep=5):
  """A `tf.train.CheckpointManager` of `make_checkpoint(...)` writing `<directory>/model.ckpt-<number>`.

  `manager.save()` numbers the checkpoint by `num_environment_frames` when it is given (the original's naming),
  else 1, 2, ...
  """
  checkpoint = make_checkpoint(agent, optimizer, num_environment_frames)
  return _FrameNumberedCheckpointManager(checkpoint, directory, max_to_keep, num_environment_frames)


def _error_text(error):
  lines = (getattr(error, 'message', None) or str(error)).strip().splitlines()
  return f'{type(error).__name__}: {lines[0] if lines else ""}'


def _unreadable(prefix):
  """None if every tensor of the checkpoint reads back (checksums verified), else the error's text."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for key in reader.get_variable_to_shape_map():
      reader.get_tensor(key)
  except (tf.errors.OpError, ValueError, IndexError, EOFError, OSError) as e:
    return _error_text(e)
  return None


def _remove_partial_saves(directory):
  """Removes what interrupted saves left: `model.ckpt-<n>_temp` folders and `checkpoint.tmp*` files."""
  for pattern, remove in ((CHECKPOINT_NAME + '-*_temp', tf.io.gfile.rmtree), ('checkpoint.tmp*', tf.io.gfile.remove)):
    for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), pattern)):
      remove(path)
      logging.warning('Removed %s, left by an interrupted save.', path)


def newest_readable(directory):
  """Scans `directory` (its files, not its `checkpoint` index file); changes nothing.

  Returns:
    (prefix of the newest `model.ckpt-<n>` whose every tensor reads back, or None; [(prefix, error text)] of the
    newer ones that do not; every prefix found, oldest first).
  """
  found = []
  if tf.io.gfile.isdir(directory):
    for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), CHECKPOINT_NAME + '-*.index')):
      match = re.search(r'-(\d+)\.index$', path)
      if match:
        found.append((int(match.group(1)), path[:-len('.index')]))
  found = [prefix for _, prefix in sorted(found)]
  bad = []
  for prefix in reversed(found):
    error = _unreadable(prefix)
    if error is None:
      return prefix, bad, found
    bad.append((prefix, error))
  return None, bad, found


def restore_latest(manager):
  """Restores the newest readable checkpoint of the manager's directory, if any; returns its path or None (a fresh
  directory: nothing restored).

  The directory is scanned, not only its `checkpoint` index file. A newer checkpoint that cannot be read (truncated,
  corrupt) is set aside, renamed `<file>.corrupt` (kept for inspection, never overwritten), with a warning; the index
  file is rebuilt when it does not name the checkpoint restored. An original TF1 (name-based) checkpoint is restored
  with `restore_tf1_checkpoint` (agent, RMSProp slots and frame counter: all of the learner's state).

  Raises:
    RunDirectoryError: checkpoint files exist but none is readable (nothing is changed), or the checkpoint does not
      match the tracked objects (written by another network).
  """
  directory = manager.directory
  if tf.io.gfile.isdir(directory):
    _remove_partial_saves(directory)
  prefix, bad, found = newest_readable(directory)
  indexed = manager.checkpoints
  if not found:
    leftovers = indexed + tf.io.gfile.glob(os.path.join(glob.escape(directory), f'*{CORRUPT_SUFFIX}*'))
    if leftovers:
      raise RunDirectoryError(
          f'{directory} cannot be resumed: it holds no checkpoint {CHECKPOINT_NAME}-<frames>, but '
          f'{", ".join(os.path.basename(p) for p in leftovers)}. Starting from 0 frames here would overwrite the '
          'run: nothing was changed. Restore the checkpoint files, or use another --logdir.')
    return None
  if prefix is None:
    raise RunDirectoryError(
        f'{directory} holds checkpoints but none is readable ('
        f'{"; ".join(f"{os.path.basename(p)}: {e}" for p, e in bad)}). Nothing was changed (starting from 0 frames '
        'here would overwrite the run): copy intact checkpoint files back, or use another --logdir.')
  for bad_prefix, error in bad:
    for path in tf.io.gfile.glob(glob.escape(bad_prefix) + '.index') + tf.io.gfile.glob(
        glob.escape(bad_prefix) + '.data-?????-of-?????'):
      target, n = path + CORRUPT_SUFFIX, 0
      while tf.io.gfile.exists(target):
        n += 1
        target = f'{path}{CORRUPT_SUFFIX}.{n}'
      tf.io.gfile.rename(path, target)
    logging.warning('%s is unreadable (%s): resuming from the older %s instead; its files are kept as *%s.',
                    bad_prefix, error, os.path.basename(prefix), CORRUPT_SUFFIX)
  checkpoint = manager.checkpoint
  if TF2_OBJECT_GRAPH_KEY not in tf.train.load_checkpoint(prefix).get_variable_to_shape_map():
    frames = restore_tf1_checkpoint(prefix, checkpoint.agent, getattr(checkpoint, 'optimizer', None))
    if getattr(checkpoint, 'num_environment_frames', None) is not None:
      checkpoint.num_environment_frames.assign(frames)
    logging.info('Restored the original TF1 checkpoint %s (%d environment frames).', prefix, frames)
  else:
    try:
      checkpoint.restore(prefix).assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:
      raise RunDirectoryError(f'{prefix} does not match this configuration\'s agent and learner ({_error_text(e)}): '
                              'it was written by another network or version. Use another --logdir.') from None
  if not indexed or os.path.basename(indexed[-1]) != os.path.basename(prefix):
    kept = [p for p in found if p not in dict(bad)]
    times = [tf.io.gfile.stat(p + '.index').mtime_nsec / 1e9 for p in kept]
    tf.compat.v1.train.update_checkpoint_state(directory, os.path.basename(prefix), [os.path.basename(p) for p in kept],
                                               all_model_checkpoint_timestamps=times,
                                               last_preserved_timestamp=min(times) - 1.)
    manager.reload()  # It read the old index file when it was made.
    logging.warning('Rebuilt the checkpoint index file of %s: %s.', directory,
                    ', '.join(os.path.basename(p) for p in kept))
  return prefix


def save(manager):
  """`manager.save()`; a failed save (disk full, permission) removes what it left and raises one
  `RunDirectoryError` naming the directory, the size needed and what is free (the previous checkpoint is intact)."""
  try:
    return manager.save()
  except (tf.errors.OpError, OSError) as e:
    directory = manager.directory
    for path in tf.io.gfile.glob(os.path.join(glob.escape(directory), CHECKPOINT_NAME + '-*_temp')):
      tf.io.gfile.rmtree(path)
    latest = manager.latest_checkpoint
    needed = sum(tf.io.gfile.stat(p).length for p in tf.io.gfile.glob(glob.escape(latest) + '.index') +
                 tf.io.gfile.glob(glob.escape(latest) + '.data-?????-of-?????')) if latest else None
    full = (isinstance(e, (tf.errors.ResourceExhaustedError)) or 'No space left' in str(e) or
            (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)))
    try:
      free = f'{shutil.disk_usage(directory).free / 1e6:.1f} MB free there'
    except OSError:
      free = 'free space unknown'
    need = f'it needs about {needed / 1e6:.1f} MB, ' if needed else ''
    keep = f'The previous checkpoint {latest} is intact: ' if latest else ''
    raise RunDirectoryError(
        f'writing a checkpoint into {directory} failed: {"the disk is full" if full else _error_text(e)} ({need}'
        f'{free}). {keep}free some space (or fix the directory) and run the same command to resume.') from None


def tf1_variable_map(agent, optimizer=None):
  """OrderedDict TF1 checkpoint name -> tf.Variable: the agent's 41 variables, then their RMSProp slots if given."""
  variables = agent.tf1_variables()
  names = collections.OrderedDict(variables)
  if optimizer is not None:
    for name, variable in variables.items():
      mean_square, momentum = optimizer.slots_for(variable)
      for slot_name, slot in ((name + MEAN_SQUARE_SLOT_SUFFIX, mean_square), (name + MOMENTUM_SLOT_SUFFIX, momentum)):
        if slot.shape != variable.shape:
          raise ValueError(f'optimizer slot for {name} has shape {slot.shape}, expected {variable.shape}.')
        names[slot_name] = slot
  return names


def _format_problems(path, missing, unexpected, misshaped):
  lines = [f'TF1 checkpoint {path} does not match the agent:']
  if missing:
    lines.append(f'  missing in the checkpoint ({len(missing)}): ' + ', '.join(missing))
  if unexpected:
    lines.append(f'  unexpected in the checkpoint ({len(unexpected)}): ' + ', '.join(unexpected))
  if misshaped:
    lines.append(f'  wrong shape or dtype ({len(misshaped)}): ' + '; '.join(misshaped))
  return '\n'.join(lines)


def restore_tf1_checkpoint(path, agent, optimizer=None):
  """Loads an original name-based TF1 IMPALA checkpoint into `agent` (and the RMSProp slots into `optimizer`).

  Strict: every agent variable (and, with an optimizer, both slots of each) and `num_environment_frames` must be in
  the checkpoint with the right shape and dtype, and the checkpoint may hold nothing else (RMSProp slots are
  allowed, and ignored, when `optimizer` is None). Nothing is assigned unless everything matches.

  Args:
    path: checkpoint prefix (e.g. `.../model.ckpt-12800`) or a directory with a `checkpoint` state file.
    agent: the `Agent`.
    optimizer: optional; `optimizer.slots_for(variable)` -> (mean_square, momentum) tf.Variables.

  Returns:
    int, the global step `num_environment_frames` (environment frames) stored in the checkpoint.

  Raises:
    ValueError: listing every missing, unexpected and mis-shaped name.
  """
  reader = tf.train.load_checkpoint(path)
  shapes = reader.get_variable_to_shape_map()
  dtypes = reader.get_variable_to_dtype_map()
  targets = tf1_variable_map(agent, optimizer)
  ignored = set()
  if optimizer is None:
    for name in targets:
      ignored.update((name + MEAN_SQUARE_SLOT_SUFFIX, name + MOMENTUM_SLOT_SUFFIX))

  missing = [name for name in list(targets) + [GLOBAL_STEP_NAME] if name not in shapes]
  unexpected = sorted(name for name in shapes if name not in targets and name != GLOBAL_STEP_NAME
                      and name not in ignored)
  misshaped = []
  for name, variable in targets.items():
    if name in shapes and (list(shapes[name]) != variable.shape.as_list() or dtypes[name] != variable.dtype):
      misshaped.append(f'{name} is {dtypes[name].name}{list(shapes[name])} in the checkpoint, '
                       f'{variable.dtype.name}{variable.shape.as_list()} in the agent')
  if GLOBAL_STEP_NAME in shapes and (shapes[GLOBAL_STEP_NAME] or not dtypes[GLOBAL_STEP_NAME].is_integer):
    misshaped.append(f'{GLOBAL_STEP_NAME} is {dtypes[GLOBAL_STEP_NAME].name}{list(shapes[GLOBAL_STEP_NAME])} in the '
                     'checkpoint, expected an integer scalar')
  if missing or unexpected or misshaped:
    raise ValueError(_format_problems(path, missing, unexpected, misshaped))

  for name, variable in targets.items():
    variable.assign(reader.get_tensor(name))
  return int(reader.get_tensor(GLOBAL_STEP_NAME))


def export_tf1_checkpoint(path, agent, optimizer=None, global_step=0):
  """Writes the agent (and the optimizer's RMSProp slots) as an original-style name-based TF1 checkpoint.

  The checkpoint is written by `tf.compat.v1.train.Saver` in a private graph, as `<path>-<global_step>` (TF1
  `Saver.save` naming: pass `<directory>/model.ckpt` to get the original's `model.ckpt-<frames>`), and the
  `checkpoint` state file of the directory is updated, so `tf.train.latest_checkpoint` finds it.

  Args:
    path: checkpoint prefix, without the step.
    agent: the `Agent`.
    optimizer: optional; its `slots_for` slots are written as `<name>/RMSProp` and `<name>/RMSProp_1`.
    global_step: int, written as `num_environment_frames` (int64).

  Returns:
    str, the prefix written (`<path>-<global_step>`).
  """
  values = collections.OrderedDict((name, variable.numpy()) for name, variable in tf1_variable_map(agent,
                                                                                                   optimizer).items())
  values[GLOBAL_STEP_NAME] = np.int64(global_step)
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  with tf.Graph().as_default():
    placeholders = collections.OrderedDict()
    var_list = collections.OrderedDict()
    for name, value in values.items():
      placeholders[name] = tf.compat.v1.placeholder(tf.as_dtype(value.dtype), shape=value.shape)
      var_list[name] = tf.compat.v1.Variable(placeholders[name], name=name)
    saver = tf.compat.v1.train.Saver(var_list=var_list, max_to_keep=None)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer(),
                  feed_dict={placeholders[name]: value for name, value in values.items()})
      return saver.save(session, path, global_step=int(global_step), write_meta_graph=False)
