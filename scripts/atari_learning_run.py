r"""The Atari learning run (the paper's shallow expert on Pong, or Breakout), in the background,
resumable across sessions, and its learning curve (frames and training wall time) written to docs/results/.

  python scripts/atari_learning_run.py start  [--game pong] [--logdir runs/impala_atari_pong] [--nice 10]
                                              [--keep_every 20000000]
  python scripts/atari_learning_run.py pause | resume | stop | status   [--game ...] [--logdir ...]
  python scripts/atari_learning_run.py test   [--game pong] [--games 200] [--frames F ...]
  python scripts/atari_learning_run.py curve  [--game pong] [--target T] [--paper S] [--window 100] [--every 1]
                                              [--output NAME]
  python scripts/atari_learning_run.py curve  --game breakout --from_csv docs/results/impala_atari_breakout_curve.csv \
      --test_results docs/results/impala_atari_breakout_test_results-*.json

start   runs `run_train.py configs/impala_atari.gin --train_dir LOGDIR` (plus `--level_name=atari/GAME` for another
        game than Pong) detached from this terminal, under `nice`, its output appended to LOGDIR.control/train.log
        and its process id in LOGDIR.control/train.pid. Run it again after a stop, a crash or a reboot: training resumes from the
        latest checkpoint (written every 10 minutes and on stop) with its frame counter and learning-rate decay.
        The learner also keeps the first checkpoint at or past each multiple of --keep_every frames (0 and the end
        included) in LOGDIR/kept/<frames>/ (`experiment.checkpoint_keep_every_frames`; 0: none kept), for `test`.
pause   stops every process of the run (SIGSTOP to its process group; e.g. while benchmarking), resume continues it
        (SIGCONT); both are logged in LOGDIR.control/pauses.log so that paused time does not count as training time.
stop    Ctrl-C for the learner (SIGINT): it writes a checkpoint and stops its actors.
test    test mode on each kept checkpoint (LOGDIR/kept/<frames>/, or those of --frames) that has no result of --games
        games yet: `run_eval.py` with `experiment.test_num_episodes = GAMES`, under `nice`, one after the other;
        each writes LOGDIR/kept/<frames>/test_results-<frames>.json. 200 whole games, each after 1-30 random no-ops,
        is the protocol of the paper's Table C.1 (Section 5.3.2). Runs beside the training (pause it to go faster).
status  running / paused / stopped, frames of the latest checkpoint, the mean return of the last `window`
        episodes printed to its log (with --verbosity=1; else the last progress line's mean of the last 100).
curve   reads the run's TensorBoard episode returns and writes docs/results/impala_atari_GAME_curve.csv (one row per
        episode: frames, training hours, return, mean of the last `window` episodes; with --every N only every
        N-th episode's row and the last, the means still over all episodes: games with lives have one episode
        per life, many more rows) and ..._curve.png (or
        docs/results/NAME.csv / .png with --output NAME, e.g. for a second run of the same game); prints the
        frames and training hours at which the windowed mean first reached `target`. Training hours add up the
        sessions (each events file is one) minus the logged pauses. For a score as the paper reports it (whole
        games, up to 30 no-ops, sampled actions) run `python run_eval.py configs/impala_atari.gin --train_dir
        LOGDIR` (plus `--level_name=atari/GAME` for another game than Pong; 30 games; test_results-<frames>.json
        and LOGDIR/test/ in TensorBoard), or `test` above: `curve` prints those results, in LOGDIR and
        LOGDIR/kept/*/, and draws them (green, mean +- s.e.), with --paper a published score as a dotted line. In
        games with lives a training episode is one life (training ends an episode at a lost life), so only the
        test results are whole-game scores. The PNG (`figures.curves`) has a legend, and its title the frames and
        training hours. With --from_csv the PNG is drawn again from a CSV alone (beside it, or --output NAME), with
        the test results of --test_results (the run's test_results-<frames>.json files); the episode count is not in
        the CSV of --every N.

The paper's expert reaches 20.40 on Pong at 200M frames (Table C.1); the target of this run is a windowed mean of
+18 from the start's -21.
"""

import argparse
import glob
import os
import re
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, 'scripts'))

sys.path.insert(0, REPO_ROOT)

import atari_curve  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

from launcher import console  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from rundir import checkpoints as run_checkpoints  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

CONFIG = 'configs/impala_atari.gin'
KEEP_EVERY = 20000000  # `start`: a checkpoint kept every this many frames (about 10 over the paper's 200M)


def _paths(args, create=False):
  """(run directory, pid file, pauses log). This script's files live beside the run directory, in
  `<logdir>.control/` (made by `start` only): the launcher refuses a first run in a directory that already holds
  files."""
  logdir = os.path.abspath(args.logdir or os.path.join(REPO_ROOT, 'runs', f'impala_atari_{args.game}'))
  control = logdir + '.control'
  if create:
    os.makedirs(control, exist_ok=True)
  return logdir, os.path.join(control, 'train.pid'), os.path.join(control, 'pauses.log')


def _running_pid(pid_path):
  """The run's process id if it is alive, else None."""
  try:
    with open(pid_path) as f:
      pid = int(f.read().strip())
    os.kill(pid, 0)
    return pid
  except (OSError, ValueError):
    return None


def _is_paused(pid):
  try:
    with open(f'/proc/{pid}/stat') as f:
      return f.read().rsplit(')', 1)[1].split()[0] == 'T'
  except OSError:
    return False


def start(args):
  logdir, pid_path, _ = _paths(args, create=True)
  if _running_pid(pid_path):
    print(f'the run in {logdir} is already running (pid {_running_pid(pid_path)}).', file=sys.stderr)
    return 2
  log_path = os.path.join(os.path.dirname(pid_path), 'train.log')
  command = [
      'nice', '-n',
      str(args.nice), sys.executable,
      os.path.join(REPO_ROOT, 'run_train.py'),
      os.path.join(REPO_ROOT, CONFIG), '--train_dir', logdir
  ]
  if args.game != 'pong':
    command.append(f'--level_name=atari/{args.game}')
  if args.keep_every:
    command += ['--gin_param', f'experiment.checkpoint_keep_every_frames = {args.keep_every}']
  with open(log_path, 'a') as log:
    log.write(f'\n=== {time.strftime("%Y-%m-%d %H:%M:%S")} start: {subprocess.list2cmdline(command)}\n')
    log.flush()
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
  with open(pid_path, 'w') as f:
    f.write(str(process.pid))
  print(f'started pid {process.pid}: {subprocess.list2cmdline(command)}\nlog: {log_path}')
  return 0


def _signal_group(args, sig, label):
  logdir, pid_path, pauses_path = _paths(args)
  pid = _running_pid(pid_path)
  if pid is None:
    print(f'no running run in {logdir}.', file=sys.stderr)
    return 2
  os.killpg(os.getpgid(pid), sig)
  with open(pauses_path, 'a') as f:
    f.write(f'{label} {time.time():.3f}\n')
  print(f'{label}: process group of {pid}')
  return 0


def stop(args):
  logdir, pid_path, _ = _paths(args)
  pid = _running_pid(pid_path)
  if pid is None:
    print(f'no running run in {logdir}.', file=sys.stderr)
    return 2
  if _is_paused(pid):
    _signal_group(args, signal.SIGCONT, 'resume')
  os.kill(pid, signal.SIGINT)  # The learner writes its checkpoint, then closes its actors' processes.

  def interrupted(signum, frame):  # pylint: disable=unused-argument
    raise _Interrupted(signum)

  for signum in STOP_SIGNALS:
    signal.signal(signum, interrupted)
  try:
    for _ in range(600):
      if _running_pid(pid_path) is None:
        print(f'stopped ({logdir}); `start` resumes it.')
        return 0
      time.sleep(1.)
  except _Interrupted as e:
    name = signal.Signals(e.signum).name
    print(
        f'stop: {name} while waiting; the learner (pid {pid}) goes on writing its checkpoint and stops; '
        f'`status` says when.', file=sys.stderr, flush=True)
    return 128 + e.signum
  print(f'pid {pid} is still running after 10 minutes.', file=sys.stderr)
  return 1


# The signals that end this script's own wait (Ctrl-C; `timeout`, schedulers; a closed terminal), with 128 + the
# signal's number. The run it started is in a session of its own, so none of them reaches it.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Interrupted(Exception):

  def __init__(self, signum):
    super().__init__(signum)
    self.signum = signum


def _kept(logdir):
  """[(frames, directory)] of the run's kept checkpoints (LOGDIR/kept/<frames>/model.ckpt-<frames>), by frames."""
  return [
      (frames, os.path.dirname(prefix)) for frames, prefix in run_checkpoints.list_kept(os.path.join(logdir, 'kept'))
  ]


def _games_tested(directory):
  """The game counts of the test results in `directory` (unreadable files count as none)."""
  import json  # pylint: disable=g-import-not-at-top
  counts = set()
  for path in glob.glob(os.path.join(directory, 'test_results-*.json')):
    try:
      with open(path) as f:
        counts.add(int(json.load(f)['test_num_episodes']))
    except (OSError, ValueError, KeyError, TypeError):
      pass
  return counts


def test(args):
  logdir, _, _ = _paths(args)
  kept = _kept(logdir)
  if args.frames:
    missing = sorted(set(args.frames) - {frames for frames, _ in kept})
    if missing:
      print(
          f'no kept checkpoint at {", ".join(map(str, missing))} frames in {logdir}/kept (kept: '
          f'{", ".join(str(f) for f, _ in kept) or "none"}).', file=sys.stderr)
      return 2
    kept = [(frames, directory) for frames, directory in kept if frames in args.frames]
  elif not kept:
    print(f'no kept checkpoint in {logdir}/kept: `start` keeps one every --keep_every frames.', file=sys.stderr)
    return 2
  for frames, directory in kept:
    if args.games in _games_tested(directory):
      print(f'{frames} frames: tested already ({args.games} games).')
      continue
    command = [
        'nice', '-n',
        str(args.nice), sys.executable,
        os.path.join(REPO_ROOT, 'run_eval.py'),
        os.path.join(REPO_ROOT, CONFIG), '--train_dir', directory, '--gin_param',
        f'experiment.test_num_episodes = {args.games}'
    ]
    if args.game != 'pong':
      command.append(f'--level_name=atari/{args.game}')
    print(f'{frames} frames: {subprocess.list2cmdline(command)}', flush=True)
    started = time.monotonic()
    code = subprocess.run(command, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, check=False).returncode
    if code:
      print(f'test mode at {frames} frames failed (exit {code}).', file=sys.stderr)
      return code
    written = max(glob.glob(os.path.join(directory, f'test_results-{frames}*.json')), key=os.path.getmtime)
    for result in atari_curve.test_results([written], f'atari/{args.game}'):
      print(atari_curve.test_line(result, str(frames)) + f' ({(time.monotonic() - started) / 60:.1f} min)', flush=True)
  return 0


def status(args):
  logdir, pid_path, _ = _paths(args)
  if not os.path.exists(logdir) and not os.path.exists(os.path.dirname(pid_path)):
    print(f'{logdir}: no run there yet (`start` begins one).')
    return 0
  pid = _running_pid(pid_path)
  state = 'stopped' if pid is None else ('paused' if _is_paused(pid) else 'running')
  checkpoints = sorted(glob.glob(os.path.join(logdir, 'model.ckpt-*.index')),
                       key=lambda p: int(p.rsplit('-', 1)[1].split('.')[0]))
  latest = checkpoints[-1].rsplit('-', 1)[1].split('.')[0] if checkpoints else 'none'
  log_path = os.path.join(os.path.dirname(pid_path), 'train.log')
  returns = _logged_returns(log_path)[-args.window:]
  mean = (f'; mean return of the last {len(returns)} episodes {sum(returns) / len(returns):.2f}'
          if returns else '; no episode finished yet')
  progress = _progress_line_return(log_path)
  if progress:
    mean = f'; mean return of the last {progress[0]} episodes {progress[1]:.2f} (the last progress line)'
  print(f'{logdir}: {state}' + (f' (pid {pid})' if pid else '') + f'; latest checkpoint at {latest} frames' + mean)
  return 0


def _logged_returns(log_path):
  """The episode returns the run printed to its log ('... Episode return: R' lines), oldest first."""
  returns = []
  if os.path.exists(log_path):
    with open(log_path, errors='replace') as f:
      for line in f:
        if 'Episode return:' in line:
          try:
            returns.append(float(line.rsplit(':', 1)[1]))
          except ValueError:
            pass
  return returns


def _progress_line_return(log_path):
  """(episodes, mean return) of the log's last progress line with '; return (last N) LEVEL MEAN', or None when
  there is none after the last episode line (those are printed with --verbosity=1 only, or by older versions)."""
  found = None
  if os.path.exists(log_path):
    with open(log_path, errors='replace') as f:
      for line in f:
        match = re.search(r'; return \(last (\d+)\) \S+ (-?\d+\.\d+)', line)
        if match:
          found = int(match.group(1)), float(match.group(2))
        elif 'Episode return:' in line:
          found = None
  return found


def _whole_number(text):
  if not text.isdigit():
    raise argparse.ArgumentTypeError(f'expected a whole number >= 0, got {text!r}')
  return int(text)


def _positive_int(text):
  if not text.isdigit() or int(text) < 1:
    raise argparse.ArgumentTypeError(f'expected a whole number >= 1, got {text!r}')
  return int(text)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('command', choices=['start', 'pause', 'resume', 'stop', 'status', 'test', 'curve'])
  parser.add_argument('--game', default='pong', help='ale-py ROM id: pong, breakout, ...')
  parser.add_argument('--logdir', default=None, help='run directory (default runs/impala_atari_GAME)')
  parser.add_argument('--nice', type=int, default=10, help='start, test: niceness of the run')
  parser.add_argument(
      '--keep_every', type=_whole_number, default=KEEP_EVERY,
      help='start: keep the first checkpoint at or past each multiple of this many frames in '
      'LOGDIR/kept/ (0: none)')
  parser.add_argument('--games', type=_positive_int, default=200, help='test: whole games per checkpoint')
  parser.add_argument('--frames', type=_whole_number, nargs='+', default=[],
                      help='test: only the kept checkpoints at these frames (default: every kept one)')
  parser.add_argument('--paper', type=float, default=None,
                      help="curve: a published test-mode score to draw as a line (Breakout's shallow expert: 640.43)")
  parser.add_argument('--target', type=float, default=None,
                      help='curve: the windowed mean to reach (default: 18 for Pong, none for other games)')
  parser.add_argument('--window', type=int, default=100, help='curve and status: episodes in the moving mean')
  parser.add_argument('--every', type=_positive_int, default=1,
                      help='curve: one CSV row per N episodes (and the last); the PNG and the means use them all')
  parser.add_argument(
      '--output', default=None, help='curve: file name in docs/results/, without .csv / .png (default '
      'impala_atari_GAME_curve; with --from_csv: the CSV\'s name)')
  parser.add_argument('--from_csv', default=None, metavar='CSV',
                      help='curve: draw the PNG again from a CSV that `curve` wrote (no run directory needed)')
  parser.add_argument('--test_results', nargs='+', default=[], metavar='JSON',
                      help='curve --from_csv: test_results-<frames>.json files of the run, drawn beside it')
  args = parser.parse_args(argv)
  if args.command == 'pause':
    return _signal_group(args, signal.SIGSTOP, 'pause')
  if args.command == 'resume':
    return _signal_group(args, signal.SIGCONT, 'resume')
  if args.command == 'curve':
    if args.from_csv:
      return atari_curve.redraw(args)
    logdir, _, pauses_path = _paths(args)
    return atari_curve.curve(args, logdir, pauses_path)
  return {'start': start, 'stop': stop, 'status': status, 'test': test}[args.command](args)


if __name__ == '__main__':
  console.protect_streams()  # a closed terminal (SIGHUP) must not fail the last lines
  sys.exit(main())
