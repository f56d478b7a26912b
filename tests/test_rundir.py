"""rundir: the run-directory library, through its public API, against hand-worked cases.

formatting (strings worked out by hand), storage (the message of a full disk), lock (one writer, who holds it, a
stale lock taken over), progress (the file's round trip), checkpoints (real tiny TensorFlow checkpoints written here
with tf.train.Checkpoint: listing, completeness, unreadable ones set aside, interrupted saves, the index file, where a
run resumes).
"""

import collections
import errno
import json
import os
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from rundir import checkpoints
from rundir import errors
from rundir import formatting
from rundir import lock
from rundir import progress
from rundir import storage

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------------------------------------------------
# errors, formatting, storage.


def test_exit_codes_of_the_errors():
  assert (errors.UserError.exit_code, errors.UnavailableError.exit_code, errors.RunDirectoryError.exit_code,
          errors.DivergedError.exit_code) == (2, 3, 4, 5)
  assert all(e.user_error for e in (errors.UserError, errors.RunDirectoryError, errors.DivergedError))
  assert issubclass(errors.RunDirectoryError, ValueError) and issubclass(errors.DivergedError, ValueError)
  assert (errors.signal_exit_code(2), errors.signal_exit_code(15)) == (130, 143)


@pytest.mark.parametrize('n, text', [(None, '?'), (0, '0 bytes'), (812, '812 bytes'), (999, '999 bytes'),
                                     (1000, '1.0 KB'), (1234, '1.2 KB'), (459_200_000, '459.2 MB'),
                                     (11_560_000, '11.6 MB'), (2_500_000_000, '2.5 GB'), (1.5e12, '1.5 TB'),
                                     (2.25e15, '2250.0 TB')])
def test_format_bytes(n, text):
  assert formatting.format_bytes(n) == text


@pytest.mark.parametrize('seconds, text, short', [(None, '?', '?'), (float('nan'), '?', '?'), (float('inf'), '?', '?'),
                                                  (-5, '0s', '0s'), (0, '0s', '0s'), (45, '45s', '45s'),
                                                  (59.9, '59s', '59s'), (60, '1m00s', '1m'), (725, '12m05s', '12m'),
                                                  (3 * 3600 + 7 * 60 + 5, '3h07m05s', '3h07m'),
                                                  (2 * 86400 + 3 * 3600 + 7 * 60 + 5, '2d03h07m05s', '2d03h07m'),
                                                  (86400, '1d00h00m00s', '1d00h00m')])
def test_format_duration(seconds, text, short):
  assert formatting.format_duration(seconds) == text
  assert formatting.format_duration(seconds, show_seconds=False) == short


def test_storage_error_of_a_full_disk(tmp_path, monkeypatch):
  usage = collections.namedtuple('usage', 'total used free')
  monkeypatch.setattr(storage.shutil, 'disk_usage', lambda path: usage(10**9, 10**9 - 5_500_000, 5_500_000))
  error = storage.storage_error(OSError(errno.ENOSPC,
                                        'No space left on device'), tmp_path, 'the full checkpoint model.ckpt-300',
                                needed=11_560_000, intact='/runs/a/model.ckpt-200')
  assert isinstance(error, errors.RunDirectoryError) and error.exit_code == 4
  assert str(error) == (
      f'writing the full checkpoint model.ckpt-300 into {tmp_path} failed: the disk is full. It '
      'needs about 11.6 MB; 5.5 MB free there. The previous checkpoint /runs/a/model.ckpt-200 is intact: '
      'free some space and run the same command to resume from it.')
  other = storage.storage_error(PermissionError(errno.EACCES, 'Permission denied'), tmp_path, 'a checkpoint')
  assert str(other) == (f'writing a checkpoint into {tmp_path} failed: PermissionError: [Errno 13] Permission denied. '
                        '5.5 MB free there. Free some space (or fix the directory) and run the same command again.')


def test_is_disk_full_and_free_bytes(tmp_path, monkeypatch):
  assert storage.is_disk_full(OSError(errno.ENOSPC, 'x')) and storage.is_disk_full(OSError(errno.EDQUOT, 'x'))
  assert not storage.is_disk_full(OSError(errno.EACCES, 'x')) and not storage.is_disk_full(ValueError('x'))
  assert storage.is_disk_full(tf.errors.ResourceExhaustedError(None, None, 'out of space'))
  assert storage.is_disk_full(RuntimeError('write failed: No space left on device'))
  seen = []
  usage = collections.namedtuple('usage', 'total used free')
  monkeypatch.setattr(storage.shutil, 'disk_usage', lambda path: seen.append(path) or usage(3, 2, 1))
  assert storage.free_bytes(tmp_path / 'not' / 'yet') == 1 and seen == [str(tmp_path)]  # its nearest parent
  assert storage.free_bytes('gs://bucket/run') is None


# ----------------------------------------------------------------------------------------------------------------------
# lock.


def test_run_lock_one_writer_and_its_holder(tmp_path):
  assert lock.current_holder(tmp_path) is None  # no lock file
  first = lock.RunLock(tmp_path)
  first.acquire()
  try:
    holder = lock.current_holder(tmp_path)
    assert holder['pid'] == os.getpid() and holder['host'] == socket.gethostname()
    second = lock.RunLock(tmp_path)  # flock: per open file description, so this process conflicts with itself
    with pytest.raises(errors.RunDirectoryError) as info:
      second.acquire()
    assert info.value.exit_code == 4 and f'PID {os.getpid()} on host' in str(info.value)
    assert f'{tmp_path} is in use by another process' in str(info.value)
  finally:
    first.release()
  assert lock.current_holder(tmp_path) is None and (tmp_path / lock.LOCK_FILE).read_text() == ''
  again = lock.RunLock(tmp_path)
  again.acquire()  # free again
  assert again.stale is None
  again.release()


def test_a_reader_of_the_holder_does_not_block_a_writer(tmp_path):
  """`current_holder` takes a shared lock for an instant (here: 0.2 s, by hand); a writer starting then waits it out
  instead of reporting the directory in use."""
  (tmp_path / lock.LOCK_FILE).write_text('')
  reader = subprocess.Popen([
      sys.executable, '-c',
      ('import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_SH); '
       'print("held", flush=True); time.sleep(0.2)'),
      str(tmp_path / lock.LOCK_FILE)
  ], stdout=subprocess.PIPE, text=True)
  try:
    assert reader.stdout.readline().strip() == 'held'
    writer = lock.RunLock(tmp_path)
    writer.acquire()
    writer.release()
  finally:
    reader.wait()


def test_a_stale_lock_file_is_taken_over(tmp_path):
  dead = subprocess.Popen([sys.executable, '-c', 'pass'])
  dead.wait()
  record = {'host': socket.gethostname(), 'pid': dead.pid, 'started': '2026-01-01T00:00:00', 'command': ['x']}
  (tmp_path / lock.LOCK_FILE).write_text(json.dumps(record) + '\n')
  assert lock.current_holder(tmp_path) is None  # the file names a holder, but nobody holds the lock
  taken = lock.RunLock(tmp_path)
  taken.acquire()
  try:
    assert taken.stale == record
    assert lock.current_holder(tmp_path)['pid'] == os.getpid()
  finally:
    taken.release()


# ----------------------------------------------------------------------------------------------------------------------
# progress.


def test_progress_round_trip_and_unreadable_files(tmp_path):
  assert progress.read_progress(tmp_path) is None
  assert progress.write_progress(tmp_path, 1200, total_steps=5000, rate=12.5, state='running')
  record = progress.read_progress(tmp_path)
  assert {
      k: record[k] for k in ('step', 'total_steps', 'rate', 'state', 'pid')
  } == {
      'step': 1200,
      'total_steps': 5000,
      'rate': 12.5,
      'state': 'running',
      'pid': os.getpid()
  }
  assert isinstance(record['time'], float) and os.listdir(tmp_path) == [progress.PROGRESS_FILE]
  (tmp_path / progress.PROGRESS_FILE).write_text('{"step": 12')  # cut short
  assert progress.read_progress(tmp_path) is None
  (tmp_path / progress.PROGRESS_FILE).write_text('{"rate": 1.0}')  # no step
  assert progress.read_progress(tmp_path) is None
  assert not progress.write_progress(tmp_path / 'missing', 1)


# ----------------------------------------------------------------------------------------------------------------------
# checkpoints.


def save_checkpoints(directory, steps, max_to_keep=5):
  """Writes `<directory>/model.ckpt-<step>` holding v = step (float32) for each step, as the systems' managers do;
  returns {step: prefix}."""
  variable = tf.Variable(0.0)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=variable), str(directory), max_to_keep=max_to_keep,
                                       checkpoint_name='model.ckpt')
  prefixes = {}
  for step in steps:
    variable.assign(float(step))
    prefixes[step] = manager.save(checkpoint_number=step)
  return prefixes


def stored_value(prefix):
  variable = tf.Variable(-1.0)
  tf.train.Checkpoint(v=variable).restore(prefix).assert_existing_objects_matched()
  return float(variable.numpy())


def files(directory):
  return sorted(os.listdir(directory))


def test_listing_steps_files_and_bytes(tmp_path):
  p = save_checkpoints(tmp_path, [100, 20, 300])
  (tmp_path / 'model.ckpt-abc.index').write_text('')
  (tmp_path / 'other.ckpt-5.index').write_text('')
  assert checkpoints.list_checkpoints(tmp_path) == [(20, p[20]), (100, p[100]), (300, p[300])]
  assert p[300] == str(tmp_path / 'model.ckpt-300')
  assert checkpoints.list_checkpoints(tmp_path, 'other.ckpt') == [(5, str(tmp_path / 'other.ckpt-5'))]
  assert checkpoints.list_checkpoints(tmp_path / 'missing') == []
  assert [
      checkpoints.step_of(tmp_path / name)
      for name in ('model.ckpt-300', 'model.ckpt-300.index', 'model.ckpt-300.data-00000-of-00001', 'model.ckpt')
  ] == [300, 300, 300, None]
  assert checkpoints.checkpoint_files(p[300]) == [p[300] + '.data-00000-of-00001', p[300] + '.index']
  assert checkpoints.checkpoint_bytes(p[300]) == sum(
      os.path.getsize(p[300] + ext) for ext in ('.index', '.data-00000-of-00001'))
  assert checkpoints.indexed_checkpoints(tmp_path) == [p[100], p[20], p[300]]  # the manager's: in the order saved


def test_listing_local_checkpoints_does_not_load_tensorflow(tmp_path):
  (tmp_path / 'model.ckpt-7.index').write_text('')
  (tmp_path / 'model.ckpt-7.data-00000-of-00001').write_text('')
  code = ('import sys; from rundir import checkpoints, errors, formatting, lock, progress, storage\n'
          f'print(checkpoints.list_checkpoints({str(tmp_path)!r}, complete_only=True), '
          '"tensorflow" in sys.modules)')
  out = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, check=True).stdout
  assert out.strip() == f"[(7, '{tmp_path}/model.ckpt-7')] False"


def test_complete_checkpoints_have_all_their_shards(tmp_path):
  p = save_checkpoints(tmp_path, [1, 2])
  assert checkpoints.is_complete(p[1])
  assert checkpoints.complete_shards(p[1]) == [p[1] + '.data-00000-of-00001']
  os.remove(p[2] + '.data-00000-of-00001')  # a missing data shard
  assert not checkpoints.is_complete(p[2]) and checkpoints.complete_shards(p[2]) is None
  assert checkpoints.list_checkpoints(tmp_path, complete_only=True) == [(1, p[1])]
  assert checkpoints.list_checkpoints(tmp_path) == [(1, p[1]), (2, p[2])]
  two = str(tmp_path / 'model.ckpt-3')
  for name in ('.index', '.data-00001-of-00002'):
    (tmp_path / f'model.ckpt-3{name}').write_text('')
  assert not checkpoints.is_complete(two)  # shard 0 of 2 missing
  (tmp_path / 'model.ckpt-3.data-00000-of-00002').write_text('')
  assert checkpoints.complete_shards(two) == [two + '.data-00000-of-00002', two + '.data-00001-of-00002']
  (tmp_path / 'model.ckpt-3.data-00000-of-00003').write_text('')  # a shard of another save
  assert not checkpoints.is_complete(two)
  os.remove(p[1] + '.index')
  assert not checkpoints.is_complete(p[1])


def test_unreadable_checkpoints_and_set_aside(tmp_path):
  p = save_checkpoints(tmp_path, [1, 2, 3])
  assert checkpoints.unreadable(p[1]) is None and not checkpoints.is_name_based(p[1])
  index = p[2] + '.index'
  with open(index, 'r+b') as f:
    f.truncate(os.path.getsize(index) // 2)  # a truncated index
  data = p[3] + '.data-00000-of-00001'
  with open(data, 'r+b') as f:
    f.truncate(1)  # a truncated data shard
  assert checkpoints.unreadable(p[2]) and checkpoints.unreadable(p[3])
  assert '\n' not in checkpoints.unreadable(p[2]) and checkpoints.unreadable(p[2]).split(':')[0].endswith('Error')
  before = {name: (tmp_path / name).read_bytes() for name in files(tmp_path) if name.startswith('model.ckpt-2.')}
  renamed = checkpoints.set_aside(p[2])
  assert renamed == [p[2] + '.data-00000-of-00001.corrupt', p[2] + '.index.corrupt']
  assert {name: (tmp_path / (name + '.corrupt')).read_bytes() for name in before} == before  # kept as they were
  assert checkpoints.list_checkpoints(tmp_path) == [(1, p[1]), (3, p[3])]
  assert checkpoints.set_aside_files(tmp_path) == renamed
  for name in before:  # the same step written again, and found unreadable again: the first ones are not overwritten
    (tmp_path / name).write_bytes(b'x')
  assert checkpoints.set_aside(p[2]) == [p[2] + '.data-00000-of-00001.corrupt.1', p[2] + '.index.corrupt.1']
  assert (tmp_path / 'model.ckpt-2.index.corrupt').read_bytes() == before['model.ckpt-2.index']


def test_keep_links_a_whole_checkpoint_into_its_own_folder(tmp_path):
  p = save_checkpoints(tmp_path / 'run', [1, 2])
  kept = checkpoints.keep(p[1], tmp_path / 'kept' / '1')
  assert kept == str(tmp_path / 'kept' / '1' / 'model.ckpt-1')
  assert files(tmp_path / 'kept' / '1') == ['model.ckpt-1.data-00000-of-00001', 'model.ckpt-1.index']
  assert os.path.samefile(kept + '.index', p[1] + '.index')  # a hard link: no space used
  for name in checkpoints.checkpoint_files(p[1]):
    os.remove(name)  # the rotation deletes the original: the kept one still reads back
  assert stored_value(kept) == 1.0 and checkpoints.list_checkpoints(tmp_path / 'kept' / '1') == [(1, kept)]
  (tmp_path / 'kept' / '7').mkdir()  # a folder holding no checkpoint of its number: not a kept one
  assert checkpoints.list_kept(str(tmp_path / 'kept')) == [(1, kept)]
  assert checkpoints.list_kept(str(tmp_path / 'missing')) == []
  with pytest.raises(FileExistsError, match='never overwritten'):
    checkpoints.keep(p[2], tmp_path / 'kept' / '1')
  assert stored_value(kept) == 1.0
  os.remove(p[2] + '.data-00000-of-00001')
  with pytest.raises(ValueError, match='not a complete checkpoint'):
    checkpoints.keep(p[2], tmp_path / 'kept' / '2')
  assert not (tmp_path / 'kept' / '2').exists() and not (tmp_path / 'kept' / '2.tmp').exists()


def test_keep_copies_across_file_systems_and_replaces_an_interrupted_keep(tmp_path, monkeypatch):
  p = save_checkpoints(tmp_path / 'run', [3])
  (tmp_path / 'kept' / '3.tmp').mkdir(parents=True)  # what a keep killed half-way left
  (tmp_path / 'kept' / '3.tmp' / 'model.ckpt-3.index').write_text('half')

  def no_links(source, target):
    raise OSError(errno.EXDEV, 'Invalid cross-device link')

  monkeypatch.setattr(os, 'link', no_links)
  kept = checkpoints.keep(p[3], tmp_path / 'kept' / '3')
  assert not os.path.samefile(kept + '.index', p[3] + '.index') and stored_value(kept) == 3.0
  assert files(tmp_path / 'kept') == ['3']


def test_partial_saves_are_removed(tmp_path):
  p = save_checkpoints(tmp_path, [1])
  (tmp_path / 'model.ckpt-2_temp').mkdir()
  (tmp_path / 'model.ckpt-2_temp' / 'part-00000-of-00001.index').write_text('half')
  (tmp_path / 'checkpoint.tmp3f2a').write_text('half')
  (tmp_path / 'notes_temp').write_text('kept')
  removed = checkpoints.remove_partial_saves(tmp_path)
  assert sorted(removed) == [str(tmp_path / 'checkpoint.tmp3f2a'), str(tmp_path / 'model.ckpt-2_temp')]
  assert files(tmp_path) == ['checkpoint', 'model.ckpt-1.data-00000-of-00001', 'model.ckpt-1.index', 'notes_temp']
  assert checkpoints.unreadable(p[1]) is None
  assert checkpoints.remove_partial_saves(tmp_path) == [] and checkpoints.remove_partial_saves(tmp_path / 'x') == []


def test_index_rebuilt_and_added_to(tmp_path):
  p = save_checkpoints(tmp_path, [10, 20, 30])
  os.remove(tmp_path / 'checkpoint')
  assert checkpoints.indexed_checkpoints(tmp_path) == [] and tf.train.latest_checkpoint(str(tmp_path)) is None
  checkpoints.write_index(tmp_path, [p[10], p[20]])
  assert tf.train.latest_checkpoint(str(tmp_path)) == p[20]
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert list(state.all_model_checkpoint_paths) == [p[10], p[20]]
  times = [os.path.getmtime(p[step] + '.index') for step in (10, 20)]
  assert all(abs(a - b) < 1.0 for a, b in zip(state.all_model_checkpoint_timestamps, times))
  assert state.last_preserved_timestamp == state.all_model_checkpoint_timestamps[0] - 1
  with pytest.raises(ValueError):
    checkpoints.write_index(tmp_path, [])
  checkpoints.add_to_index(p[10])  # made the latest, listed once
  assert (tmp_path / 'checkpoint').read_text() == ('model_checkpoint_path: "model.ckpt-10"\n'
                                                   'all_model_checkpoint_paths: "model.ckpt-20"\n'
                                                   'all_model_checkpoint_paths: "model.ckpt-10"\n')


def test_newest_readable_falls_back_past_corrupt_ones(tmp_path):
  p = save_checkpoints(tmp_path, [1, 2, 3])
  assert checkpoints.newest_readable(tmp_path) == (p[3], [], [p[1], p[2], p[3]])
  for step in (2, 3):
    with open(p[step] + '.data-00000-of-00001', 'r+b') as f:
      f.truncate(1)
  before = files(tmp_path)
  scan = checkpoints.newest_readable(tmp_path)
  assert scan.prefix == p[1] and [prefix for prefix, _ in scan.unreadable] == [p[3], p[2]]
  assert scan.found == [p[1], p[2], p[3]] and files(tmp_path) == before  # changes nothing
  assert checkpoints.newest_readable(tmp_path / 'missing') == (None, [], [])


def test_resume_sets_aside_the_corrupt_newest_and_rebuilds_the_lost_index(tmp_path, capsys):
  p = save_checkpoints(tmp_path, [100, 200, 300])
  os.remove(tmp_path / 'checkpoint')
  with open(p[300] + '.index', 'r+b') as f:
    f.truncate(10)
  (tmp_path / 'model.ckpt-400_temp').mkdir()
  checked = []
  resumed = checkpoints.resume(tmp_path, what='full checkpoint', check=checked.append)
  assert resumed.prefix == p[200] and resumed.index_rebuilt and checked == [p[200]]
  assert [(prefix, renamed) for prefix, _, renamed in resumed.set_aside
         ] == [(p[300], [p[300] + '.data-00000-of-00001.corrupt', p[300] + '.index.corrupt'])]
  assert files(tmp_path) == [
      'checkpoint', 'model.ckpt-100.data-00000-of-00001', 'model.ckpt-100.index', 'model.ckpt-200.data-00000-of-00001',
      'model.ckpt-200.index', 'model.ckpt-300.data-00000-of-00001.corrupt', 'model.ckpt-300.index.corrupt'
  ]
  assert tf.train.latest_checkpoint(str(tmp_path)) == p[200] and stored_value(p[200]) == 200.0
  assert f'warning: the full checkpoint {p[300]} is unreadable (' in capsys.readouterr().out
  again = checkpoints.resume(tmp_path)  # nothing left to repair
  assert again == (p[200], [], False)


def test_resume_refuses_without_changing_anything(tmp_path):
  assert checkpoints.resume(tmp_path / 'fresh') is None and checkpoints.resume(tmp_path) is None
  p = save_checkpoints(tmp_path / 'bad', [1, 2])
  for step in (1, 2):
    with open(p[step] + '.data-00000-of-00001', 'r+b') as f:
      f.truncate(1)
  before = files(tmp_path / 'bad')
  with pytest.raises(errors.RunDirectoryError) as info:
    checkpoints.resume(tmp_path / 'bad', unit='frames', start='0 frames', flag='--logdir')
  message = str(info.value)
  assert info.value.exit_code == 4 and files(tmp_path / 'bad') == before
  assert message.startswith(f'{tmp_path / "bad"} holds checkpoints but none is readable (model.ckpt-2: ')
  assert message.endswith('Nothing was changed (starting again from 0 frames here would overwrite the run): copy '
                          'intact checkpoint files back, or use another --logdir.')
  checkpoints.set_aside(p[2])
  os.remove(p[1] + '.index')
  with pytest.raises(errors.RunDirectoryError) as info:
    checkpoints.resume(tmp_path / 'bad', what='full checkpoint')
  assert str(info.value) == (
      f'{tmp_path / "bad"} cannot be resumed: it holds no full checkpoint model.ckpt-<step>, but it holds a checkpoint '
      'index file naming model.ckpt-1, model.ckpt-2, which do not exist; checkpoints set aside as unreadable '
      '(model.ckpt-2.data-00000-of-00001.corrupt, model.ckpt-2.index.corrupt). Starting again from step 0 here '
      'would overwrite them: nothing was changed. Restore the missing full checkpoint files, or use another '
      '--train_dir.')
  (tmp_path / 'policy_only').mkdir()
  with pytest.raises(
      errors.RunDirectoryError, match='no checkpoint model.ckpt-<step>, but it holds policy checkpoints '
      'up to step 5. Starting again'):
    checkpoints.resume(tmp_path / 'policy_only', also_held=['policy checkpoints up to step 5'])


def test_resume_check_refuses_before_anything_is_set_aside(tmp_path):
  p = save_checkpoints(tmp_path, [1, 2])
  with open(p[2] + '.index', 'r+b') as f:
    f.truncate(10)
  os.remove(tmp_path / 'checkpoint')
  before = files(tmp_path)

  def refuse(prefix):
    raise errors.RunDirectoryError(f'not {os.path.basename(prefix)}')

  with pytest.raises(errors.RunDirectoryError, match='^not model.ckpt-1$'):
    checkpoints.resume(tmp_path, check=refuse)
  assert files(tmp_path) == before
