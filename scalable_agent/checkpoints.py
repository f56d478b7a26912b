"""Checkpoints: TF2 object-based checkpoints for our runs, and the original TF1 name-based checkpoints.

Our runs: `make_checkpoint_manager(directory, agent, optimizer, num_environment_frames)` writes
`<directory>/model.ckpt-<frames>` (the original's naming) with `tf.train.Checkpoint`; `save` writes one (a failed
save is one `rundir.errors.RunDirectoryError`); `restore_latest` resumes from the newest readable checkpoint it finds
in the directory (the `checkpoint` index file may be lost; a corrupt newer one is set aside as `*.corrupt`; an
original TF1 checkpoint resumes too). The scanning and repair are the run-directory library's (`rundir.checkpoints`,
shared with HIRO); docs/design/reliability.md.

Original IMPALA checkpoints (`deepmind/scalable_agent` experiment.py, TF 1.9, Sonnet 1) are keyed by
variable name: the 41 agent variables (`agent/batch_apply/convnet/conv_2d/w`, ...), for each of them the RMSProp
slots `<name>/RMSProp` (mean square, initialised to 1) and `<name>/RMSProp_1` (momentum), and the global step
`num_environment_frames` (int64, counts environment frames): 124 entries. `restore_tf1_checkpoint` loads one into an
`Agent` (and optionally the optimizer's slots) strictly by name; `export_tf1_checkpoint` writes one that
`tf.compat.v1.train.Saver` and the original code can restore.

The optimizer interface used here: `optimizer.slots_for(variable)` returns `(mean_square, momentum)`, two
tf.Variables shaped like `variable` (the learner's RMSProp with TF1 semantics).
"""

import collections
import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from absl import logging
import numpy as np
import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from rundir import errors
from rundir import storage

GLOBAL_STEP_NAME = 'num_environment_frames'
MEAN_SQUARE_SLOT_SUFFIX = '/RMSProp'
MOMENTUM_SLOT_SUFFIX = '/RMSProp_1'


def make_checkpoint(agent: tf.Module, optimizer: Optional[tf.Module] = None,
                    num_environment_frames: Optional[tf.Variable] = None) -> tf.train.Checkpoint:
  """A `tf.train.Checkpoint` of the agent, and of the optimizer and frame counter when given.

  Args:
    agent: the `Agent`.
    optimizer: optional trackable optimizer (a tf.Module or Keras optimizer), saved with its slots.
    num_environment_frames: optional int64 scalar tf.Variable, the global step.
  """
  trackables: Dict[str, Any] = {'agent': agent}
  if optimizer is not None:
    if not isinstance(optimizer, tf.__internal__.tracking.Trackable):
      raise ValueError(f'optimizer {optimizer!r} is not trackable: make it a tf.Module (or pass optimizer=None).')
    trackables['optimizer'] = optimizer
  if num_environment_frames is not None:
    trackables['num_environment_frames'] = num_environment_frames
  return tf.train.Checkpoint(**trackables)


class _FrameNumberedCheckpointManager(tf.train.CheckpointManager):
  """A CheckpointManager whose `save()` numbers checkpoints by the frame counter (`model.ckpt-<frames>`)."""

  def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, max_to_keep: Optional[int],
               num_environment_frames: Optional[tf.Variable]) -> None:
    super().__init__(checkpoint, directory, max_to_keep=max_to_keep, checkpoint_name=run_checkpoints.CHECKPOINT_NAME)
    self._num_environment_frames = num_environment_frames
    self._arguments = (checkpoint, directory, max_to_keep, num_environment_frames)

  def reload(self) -> None:
    """Reads the directory's `checkpoint` index file again (after `restore_latest` rebuilt it)."""
    self.__init__(*self._arguments)  # type: ignore[misc]  # (re-initialised as made: this class's __init__)

  def save(self, checkpoint_number: Any = None, check_interval: bool = True, options: Any = None) -> Optional[str]:
    if checkpoint_number is None and self._num_environment_frames is not None:
      checkpoint_number = self._num_environment_frames
    return super().save(checkpoint_number=checkpoint_number, check_interval=check_interval, options=options)


def make_checkpoint_manager(directory: str, agent: tf.Module, optimizer: Optional[tf.Module] = None,
                            num_environment_frames: Optional[tf.Variable] = None,
                            max_to_keep: Optional[int] = 5) -> tf.train.CheckpointManager:
  """A `tf.train.CheckpointManager` of `make_checkpoint(...)` writing `<directory>/model.ckpt-<number>`.

  `manager.save()` numbers the checkpoint by `num_environment_frames` when it is given (the original's naming),
  else 1, 2, ...
  """
  checkpoint = make_checkpoint(agent, optimizer, num_environment_frames)
  return _FrameNumberedCheckpointManager(checkpoint, directory, max_to_keep, num_environment_frames)


KEPT_DIR = 'kept'  # <logdir>/kept/<frames>/model.ckpt-<frames>: checkpoints kept beyond the rotation


def kept_checkpoints(logdir: str) -> List[Tuple[int, str]]:
  """[(frames, prefix)] of the checkpoints kept in `<logdir>/kept/` (`keep_checkpoint`), by frames."""
  return run_checkpoints.list_kept(os.path.join(logdir, KEPT_DIR))


def keep_checkpoint(prefix: str, logdir: str) -> str:
  """Keeps the checkpoint `prefix` (`<logdir>/model.ckpt-<frames>`) as `<logdir>/kept/<frames>/model.ckpt-<frames>`
  (hard links, else copies: `rundir.checkpoints.keep`), out of reach of the manager's rotation; test mode scores it
  with `--logdir <logdir>/kept/<frames>`. Returns the kept prefix.

  Raises:
    rundir.errors.RunDirectoryError: the copy failed (disk full, permission); nothing half-kept remains.
  """
  frames = run_checkpoints.step_of(prefix)
  directory = os.path.join(logdir, KEPT_DIR, str(frames))
  try:
    return run_checkpoints.keep(prefix, directory)
  except (tf.errors.OpError, OSError) as e:
    raise storage.storage_error(e, directory, 'a kept checkpoint', needed=run_checkpoints.checkpoint_bytes(prefix),
                                intact=prefix) from None


def restore_latest(manager: tf.train.CheckpointManager) -> Optional[str]:
  """Restores the newest readable checkpoint of the manager's directory, if any; returns its path or None (a fresh
  directory: nothing restored).

  `rundir.checkpoints.resume` with IMPALA's words: what interrupted saves left is removed; the directory is scanned,
  not only its `checkpoint` index file; the checkpoint is restored; then a newer checkpoint that cannot be read
  (truncated, corrupt) is set aside, renamed `<file>.corrupt` (kept for inspection, never overwritten), with a
  warning, and the index file is rebuilt when it does not name the checkpoint restored (and the manager re-reads
  it). An original TF1 (name-based) checkpoint is restored with `restore_tf1_checkpoint` (agent, RMSProp slots and
  frame counter: all of the learner's state).

  Raises:
    rundir.errors.RunDirectoryError: checkpoint files exist but none is readable, or only signs of a run (an index
      file naming missing checkpoints, checkpoints set aside), or the checkpoint does not match the tracked objects
      (written by another network); no checkpoint file was changed.
  """
  checkpoint = manager.checkpoint

  def restore(prefix: str) -> None:
    if run_checkpoints.is_name_based(prefix):
      frames = restore_tf1_checkpoint(prefix, checkpoint.agent, getattr(checkpoint, 'optimizer', None))
      if getattr(checkpoint, 'num_environment_frames', None) is not None:
        checkpoint.num_environment_frames.assign(frames)
      logging.info('Restored the original TF1 checkpoint %s (%d environment frames).', prefix, frames)
      return
    try:
      checkpoint.restore(prefix).assert_existing_objects_matched()
    except (AssertionError, ValueError) as e:
      raise errors.RunDirectoryError(
          f'{prefix} does not match this configuration\'s agent and learner ({run_checkpoints.error_text(e)}): it was '
          'written by another network or version. Nothing was changed; use another --logdir.') from None

  resumed = run_checkpoints.resume(manager.directory, what='checkpoint', unit='frames', start='0 frames',
                                   flag='--logdir', check=restore)
  if resumed is None:
    return None
  if resumed.index_rebuilt:
    manager.reload()  # It read the old index file when it was made.
  return resumed.prefix


def save(manager: tf.train.CheckpointManager) -> Optional[str]:
  """`manager.save()`; a failed save (disk full, permission) removes what it left and raises one
  `rundir.errors.RunDirectoryError` naming the directory, the size needed and what is free (`rundir.storage`; the
  previous checkpoint is intact)."""
  try:
    return manager.save()
  except (tf.errors.OpError, OSError) as e:
    directory = manager.directory
    run_checkpoints.remove_partial_saves(directory)
    latest = manager.latest_checkpoint
    raise storage.storage_error(e, directory, 'a checkpoint',
                                needed=run_checkpoints.checkpoint_bytes(latest) if latest else None,
                                intact=latest) from None


def tf1_variable_map(agent: Any, optimizer: Any = None) -> Dict[str, tf.Variable]:
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


def _format_problems(path: str, missing: Sequence[str], unexpected: Sequence[str], misshaped: Sequence[str]) -> str:
  lines = [f'TF1 checkpoint {path} does not match the agent:']
  if missing:
    lines.append(f'  missing in the checkpoint ({len(missing)}): ' + ', '.join(missing))
  if unexpected:
    lines.append(f'  unexpected in the checkpoint ({len(unexpected)}): ' + ', '.join(unexpected))
  if misshaped:
    lines.append(f'  wrong shape or dtype ({len(misshaped)}): ' + '; '.join(misshaped))
  return '\n'.join(lines)


def restore_tf1_checkpoint(path: str, agent: Any, optimizer: Any = None) -> int:
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
  ignored: Set[str] = set()
  if optimizer is None:
    for name in targets:
      ignored.update((name + MEAN_SQUARE_SLOT_SUFFIX, name + MOMENTUM_SLOT_SUFFIX))

  missing = [name for name in list(targets) + [GLOBAL_STEP_NAME] if name not in shapes]
  unexpected = sorted(
      name for name in shapes if name not in targets and name != GLOBAL_STEP_NAME and name not in ignored)
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


def export_tf1_checkpoint(path: str, agent: Any, optimizer: Any = None, global_step: int = 0) -> str:
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
  values = collections.OrderedDict(
      (name, variable.numpy()) for name, variable in tf1_variable_map(agent, optimizer).items())
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
      session.run(tf.compat.v1.global_variables_initializer(), feed_dict={
          placeholders[name]: value for name, value in values.items()
      })
      return saver.save(session, path, global_step=int(global_step), write_meta_graph=False)
