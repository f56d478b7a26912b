"""The checkpoints of a run directory: scanning, completeness, unreadable ones, interrupted saves, the index file.

Both systems write TensorFlow checkpoints `<directory>/<name>-<n>` (`name` 'model.ckpt'; n: HIRO's global step,
IMPALA's environment frames), each an index file `<prefix>.index` and data shards `<prefix>.data-<i>-of-<N>` (5
digits each), listed by the directory's `checkpoint` index file. What can go wrong with them, and what this module
does about it (docs/design/reliability.md):

* the index file is lost or stale (a partial copy, an rsync): `list_checkpoints` scans the files instead, and
  `write_index` rebuilds the index file as `tf.train.CheckpointManager` writes it;
* a checkpoint is still being written (another process) or a shard is missing: `is_complete` / `complete_shards`;
* a checkpoint is truncated or corrupt: `unreadable` reads every tensor (checksums verified), and `set_aside` renames
  its files `<file>.corrupt` (kept for inspection; no later save overwrites them);
* a save was interrupted (a kill, a full disk): `remove_partial_saves` deletes the `<name>-<n>_temp` folders and
  `checkpoint.tmp*` files it left;
* where a run resumes: `newest_readable` (changes nothing) and `resume` (the whole procedure: clean-up, scan,
  refusal of a directory it cannot resume, set-aside, index rebuild);
* a checkpoint to keep beyond the manager's rotation (say one every 20M frames, to test later): `keep` links or
  copies its files into a folder of their own, whole or not at all; `list_kept` lists them.

Paths are local paths or URLs of a TensorFlow file system (gs://, ...). Local files are scanned with the standard
library, so that listing checkpoints does not load TensorFlow; reading a checkpoint, the index file, and any URL
load it (inside the functions that need it). Checkpoints are read or copied whole, never written, here: the format of what they hold
is the systems' (`uvf.checkpoints`, `scalable_agent.checkpoints`).
"""

import glob
import os
import re
import shutil
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

from absl import logging

from rundir import errors
from rundir import storage

CHECKPOINT_NAME = 'model.ckpt'  # the original's naming of both systems: <directory>/model.ckpt-<n>
INDEX_FILE = 'checkpoint'  # the index file of a directory (`tf.train.get_checkpoint_state`)
CORRUPT_SUFFIX = '.corrupt'  # the files of an unreadable checkpoint, set aside: <file>.corrupt, <file>.corrupt.1, ...
OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'  # the entry only object-based (TF2) checkpoints have
_SHARD = re.compile(r'\.data-(\d{5})-of-(\d{5})$')

# ----------------------------------------------------------------------------------------------------------------------
# Files: the standard library for local paths, tf.io.gfile for URLs.


def _tf() -> Any:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only where a checkpoint or a URL is read)
  return tf


def _is_url(path: str) -> bool:
  return '://' in path


def _glob(pattern: str) -> List[str]:
  return sorted(_tf().io.gfile.glob(pattern) if _is_url(pattern) else glob.glob(pattern))


def _exists(path: str) -> bool:
  return bool(_tf().io.gfile.exists(path)) if _is_url(path) else os.path.exists(path)


def _isdir(path: str) -> bool:
  return bool(_tf().io.gfile.isdir(path)) if _is_url(path) else os.path.isdir(path)


def _size(path: str) -> int:
  return int(_tf().io.gfile.stat(path).length) if _is_url(path) else os.path.getsize(path)


def _rename(source: str, target: str) -> None:
  if _is_url(source):
    _tf().io.gfile.rename(source, target)
  else:
    os.rename(source, target)


def _remove(path: str) -> None:
  """Deletes the file or folder `path`."""
  if _is_url(path):
    gfile = _tf().io.gfile
    if gfile.isdir(path):
      gfile.rmtree(path)
    else:
      gfile.remove(path)
  elif os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path)
  else:
    os.remove(path)


def _absolute(path: str) -> str:
  """`path` made absolute, unless it is a URL."""
  return path if _is_url(path) else os.path.abspath(path)


def error_text(error: BaseException) -> str:
  """'DataLossError: <the first line of its message>': an exception as one line of a user message."""
  lines = (getattr(error, 'message', None) or str(error)).strip().splitlines()
  return f'{type(error).__name__}: {lines[0] if lines else ""}'


# ----------------------------------------------------------------------------------------------------------------------
# Scanning.


def step_of(path: storage.PathLike) -> Optional[int]:
  """n of a checkpoint prefix `.../<name>-<n>` or of one of its files (`.index`, `.data-00000-of-00001`); None
  when the name is not numbered (e.g. 'model.ckpt')."""
  path = re.sub(r'\.(index|data-\d+-of-\d+|meta)$', '', os.path.basename(os.fspath(path)))
  match = re.search(r'-(\d+)$', path)
  return int(match.group(1)) if match else None


def list_checkpoints(directory: storage.PathLike, name: str = CHECKPOINT_NAME,
                     complete_only: bool = False) -> List[Tuple[int, str]]:
  """The checkpoints `<directory>/<name>-<n>` found by their index files, not by the `checkpoint` index file.

  Args:
    directory: the directory (a missing one holds none).
    name: the checkpoints' name before '-<n>'.
    complete_only: keep only those with all their data shards (`is_complete`).

  Returns:
    [(n, prefix)], oldest (smallest n) first; the prefixes are `directory` joined with `<name>-<n>`.
  """
  directory = os.fspath(directory)
  if not _isdir(directory):
    return []
  found = []
  for path in _glob(glob.escape(os.path.join(directory, name)) + '-*.index'):
    match = re.search(re.escape(name) + r'-(\d+)\.index$', path)
    if match and (not complete_only or is_complete(path[:-len('.index')])):
      found.append((int(match.group(1)), path[:-len('.index')]))
  return sorted(found)


def checkpoint_files(prefix: storage.PathLike) -> List[str]:
  """The files of the checkpoint `prefix` that exist: its index file and data shards, sorted."""
  prefix = os.fspath(prefix)
  return sorted(_glob(glob.escape(prefix) + '.index') + _glob(glob.escape(prefix) + '.data-?????-of-?????'))


def checkpoint_bytes(prefix: storage.PathLike) -> int:
  """Bytes on disk of the checkpoint `prefix` (the files that exist)."""
  return sum(_size(path) for path in checkpoint_files(prefix))


def complete_shards(prefix: storage.PathLike) -> Optional[List[str]]:
  """The data shards of the checkpoint `prefix`, sorted, when its index file and every shard `.data-<i>-of-<N>`,
  i = 0 .. N-1, are there (and no shard of another N); None when it is not complete (being written, or broken)."""
  prefix = os.fspath(prefix)
  if not _exists(prefix + '.index'):
    return None
  shards = _glob(glob.escape(prefix) + '.data-*-of-*')
  found = [_SHARD.search(path) for path in shards]
  numbers = [match for match in found if match is not None]
  if not shards or len(numbers) != len(found):
    return None
  totals = {int(match.group(2)) for match in numbers}
  if len(totals) != 1 or sorted(int(match.group(1)) for match in numbers) != list(range(totals.pop())):
    return None
  return shards


def is_complete(prefix: storage.PathLike) -> bool:
  """Whether the checkpoint `prefix` has its index file and all its data shards (`complete_shards`). Says nothing
  of their contents: see `unreadable`."""
  return complete_shards(prefix) is not None


def unreadable(prefix: storage.PathLike) -> Optional[str]:
  """None when every tensor of the checkpoint `prefix` reads back (their checksums verified), else what failed as
  one line (`error_text`). A truncated, corrupt or half-written checkpoint shows here ('DataLossError: ...',
  'IndexError: Read less bytes than requested', a truncated index: 'not an sstable')."""
  tf = _tf()
  try:
    reader = tf.train.load_checkpoint(os.fspath(prefix))
    for key in reader.get_variable_to_shape_map():
      reader.get_tensor(key)
  except (tf.errors.OpError, ValueError, IndexError, EOFError, OSError) as e:
    return error_text(e)
  return None


def is_name_based(prefix: storage.PathLike) -> bool:
  """Whether the checkpoint `prefix` is a TF1 name-based one (written by `tf.compat.v1.train.Saver`: no object
  graph), e.g. an original checkpoint of efficient-hrl or deepmind/scalable_agent."""
  return OBJECT_GRAPH_KEY not in _tf().train.load_checkpoint(os.fspath(prefix)).get_variable_to_shape_map()


def indexed_checkpoints(directory: storage.PathLike) -> List[str]:
  """The prefixes the `checkpoint` index file of `directory` lists, oldest first ([] without a readable one). They
  may not exist."""
  tf = _tf()
  try:
    state = tf.train.get_checkpoint_state(os.fspath(directory))
  except (tf.errors.OpError, ValueError):
    return []
  return list(state.all_model_checkpoint_paths) if state else []


def set_aside_files(directory: storage.PathLike) -> List[str]:
  """The files in `directory` that `set_aside` renamed (`*.corrupt`, `*.corrupt.<k>`), sorted."""
  return _glob(os.path.join(glob.escape(os.fspath(directory)), f'*{CORRUPT_SUFFIX}*'))


# ----------------------------------------------------------------------------------------------------------------------
# Repair.


def set_aside(prefix: storage.PathLike) -> List[str]:
  """Renames the files of the checkpoint `prefix` to `<file>.corrupt` (`<file>.corrupt.1`, ... when taken), so that
  no scan finds it and no later save of the same n overwrites it. Returns the new names."""
  renamed = []
  for path in checkpoint_files(prefix):
    target, k = path + CORRUPT_SUFFIX, 0
    while _exists(target):
      k += 1
      target = f'{path}{CORRUPT_SUFFIX}.{k}'
    _rename(path, target)
    renamed.append(target)
  return renamed


def remove_partial_saves(directory: storage.PathLike, name: str = CHECKPOINT_NAME) -> List[str]:
  """Deletes what interrupted saves left in `directory`, each with a warning in the log: `<name>-<n>_temp` (TensorFlow
  writes a checkpoint there, then moves its files into place) and `checkpoint.tmp*` (an index file being replaced).
  Returns the paths removed ([] for a missing directory)."""
  directory = os.fspath(directory)
  removed: List[str] = []
  if not _isdir(directory):
    return removed
  for pattern in (glob.escape(os.path.join(directory, name)) + '-*_temp',
                  os.path.join(glob.escape(directory), INDEX_FILE + '.tmp*')):
    for path in _glob(pattern):
      _remove(path)
      logging.warning('Removed %s, left by an interrupted save.', path)
      removed.append(path)
  return removed


def write_index(directory: storage.PathLike, prefixes: Sequence[str]) -> None:
  """Rewrites the `checkpoint` index file of `directory` to list `prefixes` (checkpoints in it, oldest first; the last
  is the latest) as `tf.train.CheckpointManager` writes it, with their index files' times, so that a manager made
  afterwards rotates them as its own.

  Raises:
    ValueError: `prefixes` is empty.
  """
  if not prefixes:
    raise ValueError(f'write_index({directory!r}): no checkpoint to list.')
  tf = _tf()
  times = [tf.io.gfile.stat(prefix + '.index').mtime_nsec / 1e9 for prefix in prefixes]
  tf.compat.v1.train.update_checkpoint_state(os.fspath(directory), os.path.basename(prefixes[-1]),
                                             [os.path.basename(p) for p in prefixes],
                                             all_model_checkpoint_timestamps=times,
                                             last_preserved_timestamp=min(times) - 1.)


def add_to_index(prefix: storage.PathLike) -> None:
  """Makes the checkpoint `prefix` the latest of the `checkpoint` index file of its directory, keeping the others
  listed (as `tf.compat.v1.train.Saver.save` does; no timestamps). Paths in that directory are written relative."""
  tf = _tf()
  prefix = _absolute(os.fspath(prefix))
  directory = os.path.dirname(prefix)
  state = tf.train.get_checkpoint_state(directory)
  previous = [p for p in (state.all_model_checkpoint_paths if state else []) if _absolute(p) != prefix]

  def relative(p: str) -> str:
    return os.path.basename(p) if os.path.dirname(_absolute(p)) == directory else p

  paths = [relative(p) for p in previous + [prefix]]
  lines = [f'model_checkpoint_path: "{paths[-1]}"'] + [f'all_model_checkpoint_paths: "{p}"' for p in paths]
  with tf.io.gfile.GFile(os.path.join(directory, INDEX_FILE), 'w') as f:
    f.write('\n'.join(lines) + '\n')


def list_kept(root: str, name: str = CHECKPOINT_NAME) -> List[Tuple[int, str]]:
  """The checkpoints kept one per folder, `<root>/<n>/<name>-<n>` (`keep`'s layout), as [(n, prefix)] by n; a
  missing `root` holds none. Local folders are listed without TensorFlow."""
  root = os.fspath(root)
  if not _isdir(root):
    return []
  found = []
  for folder in _glob(os.path.join(glob.escape(root), '*')):
    number = os.path.basename(folder.rstrip('/'))
    if number.isdigit():
      found += [(n, prefix) for n, prefix in list_checkpoints(folder, name) if n == int(number)]
  return sorted(found)


def keep(prefix: storage.PathLike, directory: storage.PathLike) -> str:
  """Keeps the complete checkpoint `prefix` as `<directory>/<its name>` (`directory` made if needed), out of reach of
  the rotation that deletes old checkpoints: hard links where the file system allows them (no space used), else
  copies. The files go into `<directory>.tmp`, which is then renamed: `directory` holds the whole checkpoint or does
  not exist. Returns the kept prefix.

  Raises:
    FileExistsError: `directory` exists already (a kept checkpoint is never overwritten).
    ValueError: `prefix` is not a complete checkpoint.
    OSError (or a TensorFlow error for URLs): the copy failed; `<directory>.tmp` is removed.
  """
  prefix, directory = os.fspath(prefix), os.fspath(directory).rstrip('/')
  shards = complete_shards(prefix)
  if shards is None:
    raise ValueError(f'{prefix} is not a complete checkpoint (its .index file and every data shard); nothing kept.')
  if _exists(directory):
    raise FileExistsError(f'{directory} exists already; a kept checkpoint is never overwritten.')
  temporary = directory + '.tmp'
  if _exists(temporary):  # what an interrupted keep left
    _remove(temporary)
  try:
    if _is_url(temporary):
      gfile = _tf().io.gfile
      gfile.makedirs(temporary)
      for path in [prefix + '.index'] + shards:
        gfile.copy(path, os.path.join(temporary, os.path.basename(path)))
    else:
      os.makedirs(temporary)
      for path in [prefix + '.index'] + shards:
        target = os.path.join(temporary, os.path.basename(path))
        try:
          os.link(path, target)
        except OSError:  # another file system, or one without hard links
          shutil.copy2(path, target)
    _rename(temporary, directory)
  except BaseException:
    if _exists(temporary):
      _remove(temporary)
    raise
  return os.path.join(directory, os.path.basename(prefix))


# ----------------------------------------------------------------------------------------------------------------------
# Where a run resumes.


class Scan(NamedTuple):
  """What `newest_readable` found."""
  prefix: Optional[str]  # the newest checkpoint whose every tensor reads back, or None
  unreadable: List[Tuple[str, str]]  # [(prefix, error text)] of the newer ones that do not, newest first
  found: List[str]  # every checkpoint found, oldest first


class Resume(NamedTuple):
  """What `resume` chose and repaired."""
  prefix: str  # the checkpoint to resume from
  set_aside: List[Tuple[str, str, List[str]]]  # [(prefix, error text, its files' new names)] of the newer ones
  index_rebuilt: bool  # whether the `checkpoint` index file was rewritten (a manager made before must re-read it)


def newest_readable(directory: storage.PathLike, name: str = CHECKPOINT_NAME) -> Scan:
  """Scans `directory` for `<name>-<n>` checkpoints (its files, not its index file) and reads them, newest first,
  until one reads back whole. Changes nothing."""
  found = [prefix for _, prefix in list_checkpoints(directory, name)]
  bad: List[Tuple[str, str]] = []
  for prefix in reversed(found):
    error = unreadable(prefix)
    if error is None:
      return Scan(prefix, bad, found)
    bad.append((prefix, error))
  return Scan(None, bad, found)


def _listing(paths: Sequence[str], limit: int = 3) -> str:
  names = [os.path.basename(p) for p in paths]
  return ', '.join(names[:limit]) + (f', ... ({len(names) - limit} more)' if len(names) > limit else '')


def resume(directory: storage.PathLike, name: str = CHECKPOINT_NAME, what: str = 'checkpoint', unit: str = 'step',
           start: str = 'step 0', flag: str = '--train_dir', also_held: Sequence[str] = (),
           check: Optional[Callable[[str], None]] = None) -> Optional[Resume]:
  """The checkpoint a run in `directory` resumes from, after the repairs that needs; None for a fresh directory.

  In order: removes what interrupted saves left (`remove_partial_saves`); scans the directory (`newest_readable`);
  refuses a directory that holds no checkpoint but signs of a run (its index file names checkpoints, checkpoints
  set aside, `also_held`), or whose checkpoints are all unreadable; calls `check(prefix)` on the one chosen; then
  sets aside the newer unreadable ones (`set_aside`; a warning printed and logged for each) and rebuilds the index
  file when it does not name the one chosen (`write_index`). A refusal changes nothing but the clean-up.

  Args:
    directory: the run directory (or the directory of its checkpoints).
    name: the checkpoints' name before '-<n>'.
    what: what the messages call one checkpoint: 'checkpoint', 'full checkpoint'.
    unit: what n counts, for the messages: 'step', 'frames'.
    start: where a fresh run starts, for the messages: 'step 0', '0 frames'.
    flag: the command-line flag that chooses the directory, for the messages: '--train_dir', '--logdir'.
    also_held: what else of the run the directory holds, one phrase each (e.g. 'policy checkpoints up to step 200
      in <dir>'): with no checkpoint, a refusal rather than a fresh start over them.
    check: called with the chosen prefix before anything is set aside or rewritten; raises to refuse it (e.g. a
      checkpoint of an unsupported kind) or restores it.

  Returns:
    `Resume`, or None when the directory holds no checkpoint and no sign of a run.

  Raises:
    errors.RunDirectoryError: no checkpoint but signs of a run, or no readable checkpoint (nothing was changed).
    Whatever `check` raises.
  """
  directory = os.fspath(directory)
  remove_partial_saves(directory, name)
  scan = newest_readable(directory, name)
  if not scan.found:
    indexed, corrupt = indexed_checkpoints(directory), set_aside_files(directory)
    held = ([f'a checkpoint index file naming {_listing(indexed)}, which do not exist'] if indexed else
            []) + ([f'checkpoints set aside as unreadable ({_listing(corrupt)})'] if corrupt else []) + list(also_held)
    if held:
      raise errors.RunDirectoryError(
          f'{directory} cannot be resumed: it holds no {what} {name}-<{unit}>, but it holds {"; ".join(held)}. '
          f'Starting again from {start} here would overwrite them: nothing was changed. Restore the missing {what} '
          f'files, or use another {flag}.')
    return None
  if scan.prefix is None:
    listing = '; '.join(f'{os.path.basename(p)}: {e}' for p, e in scan.unreadable)
    raise errors.RunDirectoryError(
        f'{directory} holds {what}s but none is readable ({listing}). Nothing was changed (starting again from '
        f'{start} here would overwrite the run): copy intact checkpoint files back, or use another {flag}.')
  prefix = scan.prefix
  if check is not None:
    check(prefix)
  set_aside_now = []
  for bad_prefix, error in scan.unreadable:
    renamed = set_aside(bad_prefix)
    set_aside_now.append((bad_prefix, error, renamed))
    logging.warning('%s is unreadable (%s); kept as %s.', bad_prefix, error, ', '.join(renamed))
    print(
        f'warning: the {what} {bad_prefix} is unreadable ({error}): the run resumes from the older '
        f'{os.path.basename(prefix)}, and its files are kept as {", ".join(os.path.basename(p) for p in renamed)}.',
        flush=True)
  indexed = indexed_checkpoints(directory)
  rebuilt = not indexed or os.path.basename(indexed[-1]) != os.path.basename(prefix)
  if rebuilt:
    kept = [p for _, p in list_checkpoints(directory, name)]
    write_index(directory, kept)
    logging.warning('Rebuilt the checkpoint index file of %s (it was %s): %s.', directory,
                    'missing' if not indexed else f'naming {os.path.basename(indexed[-1])}',
                    ', '.join(os.path.basename(p) for p in kept))
  return Resume(prefix, set_aside_now, rebuilt)
