r"""A soak of multi-machine IMPALA under scripts/launch_ray_cluster.py: one learner and N actors on this machine's
Ray, for a while, sampled every --sample_s seconds, optionally with faults.

  python benchmarks/impala_ray_soak.py --num_actors 150 --actors_per_process 15 --minutes 30 --output /tmp/soak150
  python benchmarks/impala_ray_soak.py --num_actors 150 --actors_per_process 15 --minutes 20 --faults \
      --output /tmp/soak150_faults

The level is the built-in one (`configs/impala_builtin.gin`) with the paper's batch of 32 unrolls. Each sample
(`<output>.csv`): seconds since the start, the learner's frame counter, learner steps/s and frames/s since the
previous sample, resident memory (MB) of the learner process, of the actor processes (total, largest), of their
environment processes (total), of Ray's own processes (total), the machine's available memory, the 'unrolls' and
'weights' table sizes (Reverb's server_info), and the policy lag of the learner's last progress line (mean, p50, p99
of its last 30 s). `<output>.json` summarises it, with the lag over the whole soak, and the fault events.

--faults (docs/impala/distributed.md): every minute SIGKILL to 10% of the actor processes (at least one; Ray
restarts them); at 1/3 of the soak SIGTERM to the learner process (its runner starts it again in place, the actors
reconnect); at 1/2 SIGSTOP to one actor process, SIGCONT 2 minutes later; with --disk_mb, the learner's run
directory is on a tmpfs of that size, filled at 2/3 of the soak until a checkpoint cannot be written, and emptied
90 s later. Needs root for the tmpfs.
"""

import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = os.path.join(REPO_ROOT, 'scripts', 'launch_ray_cluster.py')
CONFIG = os.path.join(REPO_ROOT, 'configs', 'impala_builtin.gin')
_PROGRESS = re.compile(r'Frames (\d+) / \d+ .*?policy lag \(updates\) mean ([\d.]+), p50 (\d+), p99 (\d+) '
                       r'\(since the start: ([\d.]+), (\d+), (\d+) over (\d+) unrolls\)')
_FRAMES = re.compile(r'Frames (\d+) / \d+')


def _number(text):
  """A CSV cell as int, float or None."""
  if text in ('', None):
    return None
  try:
    return int(text)
  except ValueError:
    return float(text)


def _processes():
  """{pid: (ppid, rss MB, cmdline)} of every process."""
  table = {}
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        cmdline = f.read().replace(b'\0', b' ').decode(errors='replace')
      ppid, rss = 0, 0.
      with open(f'/proc/{pid}/status', encoding='utf-8') as f:
        for line in f:
          if line.startswith('PPid:'):
            ppid = int(line.split()[1])
          elif line.startswith('VmRSS:'):
            rss = int(line.split()[1]) / 1024.
      table[int(pid)] = (ppid, rss, cmdline)
    except (OSError, ValueError):
      pass
  return table


def _descendants(table, root):
  children = {}
  for pid, (ppid, _, _) in table.items():
    children.setdefault(ppid, []).append(pid)
  found, stack = [], [root]
  while stack:
    for child in children.get(stack.pop(), []):
      found.append(child)
      stack.append(child)
  return found


class Soak:

  def __init__(self, args):
    self.args = args
    self.logdir = os.path.join(args.logdir_root, 'run')
    self.log_path = args.output + '.log'
    self.events = []
    self.start = None

  def launch(self):
    command = [
        sys.executable, LAUNCHER, '--config', CONFIG, '--num_actors',
        str(self.args.num_actors), '--actors_per_process',
        str(self.args.actors_per_process), '--logdir', self.logdir, '--port',
        str(self.args.port), '--actor_process_resources', '{"CPU": 0}', '--learner_resources', '{"CPU": 0}', '--',
        '--batch_size=32', '--total_environment_frames=10000000000',
        f'--gin_param=experiment.checkpoint_interval_s = {self.args.checkpoint_interval_s}'
    ]
    self._log = open(self.log_path, 'w', encoding='utf-8')  # pylint: disable=consider-using-with
    self.launcher = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES=''))
    self.start = time.monotonic()

  def output(self):
    with open(self.log_path, encoding='utf-8', errors='replace') as f:
      return re.sub(r'\x1b\[[0-9;]*m', '', f.read())

  def event(self, what):
    self.events.append({'s': round(time.monotonic() - self.start, 1), 'event': what})
    print(f'[{self.events[-1]["s"]:7.1f} s] {what}', flush=True)

  def jobs(self, table):
    """(learner pid or None, [actor process pids]) of this soak."""
    learner, actors = None, []
    for pid, (_, _, cmdline) in table.items():
      if 'run_train.py' not in cmdline or 'multiprocessing' in cmdline:
        continue
      if '--job_name=learner' in cmdline and self.logdir in cmdline:
        if learner is None or pid < learner:  # (the job, not its console relay: that is its child)
          learner = pid
      elif '--job_name=actor' in cmdline and f':{self.args.port}' in cmdline:
        actors.append(pid)
    parents = {table[pid][0] for pid in actors}
    return learner, [pid for pid in actors if pid not in parents]  # jobs, not their console relays

  def sample(self, previous):
    table = _processes()
    learner, actors = self.jobs(table)
    environments = [child for pid in actors for child in _descendants(table, pid) if 'spawn_main' in table[child][2]]
    ray_processes = [
        pid for pid, (_, _, cmdline) in table.items()
        if cmdline.startswith('ray::') or '/ray/core/src/ray/' in cmdline or 'raylet' in cmdline
    ]
    actor_rss = [
        table[pid][1] +
        sum(table[c][1] for c in _descendants(table, pid) if 'spawn_main' not in table[c][2]) for pid in actors
    ]
    with open('/proc/meminfo', encoding='utf-8') as f:
      available = next(int(line.split()[1]) / 1024. for line in f if line.startswith('MemAvailable'))
    text = self.output()
    progress = list(_PROGRESS.finditer(text))
    frames_found = list(_FRAMES.finditer(text))
    frames = int(frames_found[-1].group(1)) if frames_found else 0
    now = time.monotonic() - self.start
    row = {
        's': round(now, 1),
        'frames': frames,
        'frames_per_s': None,
        'steps_per_s': None,
        'learner_mb': round(table[learner][1], 1) if learner in table else None,
        'actor_processes': len(actors),
        'actor_mb_total': round(sum(actor_rss), 1),
        'actor_mb_max': round(max(actor_rss), 1) if actor_rss else None,
        'environment_processes': len(environments),
        'environment_mb_total': round(sum(table[p][1] for p in environments), 1),
        'ray_mb_total': round(sum(table[p][1] for p in ray_processes), 1),
        'available_mb': round(available),
        'unrolls_table': None,
        'weights_table': None,
        'lag_mean': float(progress[-1].group(2)) if progress else None,
        'lag_p50': int(progress[-1].group(3)) if progress else None,
        'lag_p99': int(progress[-1].group(4)) if progress else None,
    }
    if previous is not None and now > previous['s']:
      rate = (frames - previous['frames']) / (now - previous['s'])
      row['frames_per_s'] = round(rate, 1)
      row['steps_per_s'] = round(rate / (32 * 20), 3)  # batch 32 x unroll 20 x 1 action repeat
    try:
      infos = self.client.server_info(timeout=5)
      row['unrolls_table'] = infos['unrolls'].current_size
      row['weights_table'] = infos['weights'].current_size
    except Exception:  # pylint: disable=broad-except  (a restarting learner)
      pass
    return row, learner, actors

  def faults(self, now, learner, actors, state):
    minutes = self.args.minutes * 60.
    if now >= state['next_kill'] and actors:
      count = max(1, round(.1 * len(actors)))
      for pid in actors[state['kills'] % len(actors):][:count]:
        os.kill(pid, signal.SIGKILL)
        self.event(f'SIGKILL actor process {pid}')
      state['kills'] += count
      state['next_kill'] += 60.
    if not state['learner_stopped'] and now >= minutes / 3 and learner:
      os.kill(learner, signal.SIGTERM)
      self.event(f'SIGTERM learner process {learner}')
      state['learner_stopped'] = True
    if state['stopped'] is None and now >= minutes / 2 and actors:
      state['stopped'] = actors[-1]
      os.kill(actors[-1], signal.SIGSTOP)
      self.event(f'SIGSTOP actor process {actors[-1]}')
      state['cont_at'] = now + 120.
    if state['stopped'] and state.get('cont_at') and now >= state['cont_at']:
      os.kill(state['stopped'], signal.SIGCONT)
      self.event(f'SIGCONT actor process {state["stopped"]}')
      state['cont_at'] = None
    if self.args.disk_mb and not state['filled'] and now >= 2 * minutes / 3:
      stats = os.statvfs(self.args.logdir_root)
      free = stats.f_bavail * stats.f_frsize
      with open(os.path.join(self.args.logdir_root, 'filler'), 'wb') as f:
        f.write(b'\0' * max(free - (1 << 20), 0))
      self.event(f'filled the learner\'s disk ({free / 2**20:.0f} MB; 1 MB left)')
      state['filled'], state['empty_at'] = True, now + 90.
    if state.get('empty_at') and now >= state['empty_at']:
      os.remove(os.path.join(self.args.logdir_root, 'filler'))
      self.event('emptied the learner\'s disk')
      state['empty_at'] = None

  def run(self):
    import reverb  # pylint: disable=g-import-not-at-top
    self.client = reverb.Client(f'localhost:{self.args.port}')
    self.launch()
    rows, previous = [], None
    state = {'next_kill': 120., 'kills': 0, 'learner_stopped': False, 'stopped': None, 'filled': False}
    next_sample = 0.
    while time.monotonic() - self.start < self.args.minutes * 60.:
      now = time.monotonic() - self.start
      if self.launcher.poll() is not None:
        self.event(f'the launcher exited ({self.launcher.returncode})')
        break
      if now >= next_sample:
        row, learner, actors = self.sample(previous)
        rows.append(row)
        previous = row
        print(json.dumps(row), flush=True)
        next_sample += self.args.sample_s
        if self.args.faults and _FRAMES.search(self.output()):
          self.faults(now, learner, actors, state)
      time.sleep(1.)
    self.event('SIGTERM to the launcher')
    self.launcher.send_signal(signal.SIGTERM)
    try:
      self.launcher.wait(120)
    except subprocess.TimeoutExpired:
      os.killpg(self.launcher.pid, signal.SIGKILL)
    return rows

  def summary(self, rows):
    text = self.output()
    progress = list(_PROGRESS.finditer(text))
    half = [r for r in rows if r['s'] >= rows[-1]['s'] / 2]

    def slope(key):  # MB per minute over the second half (least squares)
      points = [(r['s'] / 60., r[key]) for r in half if r[key] is not None]
      if len(points) < 3:
        return None
      n = len(points)
      mx, my = sum(p[0] for p in points) / n, sum(p[1] for p in points) / n
      den = sum((p[0] - mx)**2 for p in points)
      return round(sum((p[0] - mx) * (p[1] - my) for p in points) / den, 2) if den else None

    first = next((r for r in rows if r['frames']), rows[0])  # the first sample after the first update
    # The rate over the soak after the first update (the progress lines come every 30 s, as the samples: a rate
    # between two samples is noisy).
    elapsed = rows[-1]['s'] - first['s']
    return {
        'num_actors': self.args.num_actors,
        'actors_per_process': self.args.actors_per_process,
        'minutes': round(rows[-1]['s'] / 60., 1),
        'frames': rows[-1]['frames'],
        'frames_per_s_mean': round((rows[-1]['frames'] - first['frames']) / elapsed, 1) if elapsed > 0 else None,
        'lag_since_start': ({
            'mean': float(progress[-1].group(5)),
            'p50': int(progress[-1].group(6)),
            'p99': int(progress[-1].group(7)),
            'unrolls': int(progress[-1].group(8))
        } if progress else None),
        'memory_slope_mb_per_min_second_half': {
            k: slope(k) for k in ('learner_mb', 'actor_mb_total', 'environment_mb_total', 'ray_mb_total')
        },
        'first': first,
        'last': rows[-1],
        'events': self.events,
        'restarts_by_ray': len(re.findall(r'exited \(killed by SIGKILL\); Ray restarts it', text)),
        'learner_restarts': len(re.findall(r'learner exited \(.*?\); starting it again in', text)),
        'reconnections': len(re.findall(r'reconnected to the learner', text)),
        'resumed_at': re.findall(r'resuming at (\d+) environment frames', text),
        'interrupted_at': re.findall(r'Interrupted at (\d+) environment frames', text),
        'disk_full_errors': len(re.findall(r'[Dd]isk (?:is )?full|No space left', text)),
    }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
  parser.add_argument('--num_actors', type=int, required=True)
  parser.add_argument('--actors_per_process', type=int, default=1)
  parser.add_argument('--minutes', type=float, default=30.)
  parser.add_argument('--sample_s', type=float, default=30.)
  parser.add_argument('--port', type=int, default=18321)
  parser.add_argument('--checkpoint_interval_s', type=float, default=600.)
  parser.add_argument('--faults', action='store_true')
  parser.add_argument('--disk_mb', type=int, default=0, help='with --faults: a tmpfs of this size for the run')
  parser.add_argument('--logdir_root', default='/tmp/impala_soak')
  parser.add_argument('--output', required=True, help='path prefix of the .csv, .json and .log written')
  parser.add_argument('--resummarize', action='store_true', help='only write <output>.json again from the .csv and '
                      '.log a soak wrote (its events kept)')
  args = parser.parse_args()
  if args.resummarize:
    soak = Soak(args)
    with open(args.output + '.csv', encoding='utf-8') as f:
      rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    with open(args.output + '.json', encoding='utf-8') as f:
      soak.events = json.load(f)['events']
    with open(args.output + '.json', 'w', encoding='utf-8') as f:
      json.dump(soak.summary(rows), f, indent=1)
    return
  os.makedirs(args.logdir_root, exist_ok=True)
  if args.disk_mb:
    subprocess.run(['mount', '-t', 'tmpfs', '-o', f'size={args.disk_mb}m', 'tmpfs', args.logdir_root], check=True)
  soak = Soak(args)
  try:
    rows = soak.run()
  finally:
    if args.disk_mb:
      subprocess.run(['umount', '-l', args.logdir_root], check=False)
  with open(args.output + '.csv', 'w', newline='', encoding='utf-8') as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  summary = soak.summary(rows)
  with open(args.output + '.json', 'w', encoding='utf-8') as f:
    json.dump(summary, f, indent=1)
  print(json.dumps({k: v for k, v in summary.items() if k not in ('first', 'last')}, indent=1))


if __name__ == '__main__':
  main()
