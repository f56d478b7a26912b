"""`benchmarks/hiro_train_speed.py --seeds K`: K seeds as K pinned processes, timed together."""

from pathlib import Path
import re
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = [
    'train_uvf.initial_episodes = 1', 'train_uvf.batch_size = 16', 'agent/CircularBuffer.buffer_size = 1000',
    'meta/CircularBuffer.buffer_size = 200'
]


@pytest.mark.slow
def test_seeds_mode_prints_each_seed_and_the_total():
  command = [sys.executable, str(ROOT / 'benchmarks' / 'hiro_train_speed.py'), '--seeds', '2', '--steps', '100']
  for binding in SMALL:
    command += ['--gin_param', binding]
  result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  assert '2 seeds as processes with 1 thread(s) each' in out, out
  per_seed = re.search(r'per seed env steps/s: ([\d, ]+); per CPU-second of each process: ([\d, ]+)\n', out)
  assert per_seed, out
  rates = [float(x) for x in per_seed.group(1).split(',')]
  cpu_rates = [float(x) for x in per_seed.group(2).split(',')]
  assert len(rates) == len(cpu_rates) == 2 and min(rates + cpu_rates) > 0, out
  total = float(re.search(r'total env steps/s: (\d+)', out).group(1))
  assert abs(total - sum(rates)) <= 1.0, out


@pytest.mark.slow
def test_default_mode_times_every_phase():
  """The phase table (physics, collection, low / meta updates, full loop): each phase through the trainer's public
  update methods (this mode once called a renamed private method and failed, and so did the GPU check built on it)."""
  command = [sys.executable, str(ROOT / 'benchmarks' / 'hiro_train_speed.py'), '--steps', '100']
  for binding in SMALL:
    command += ['--gin_param', binding]
  result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  out = result.stdout
  for phase in ('physics (env.step)', 'collection step (incl. physics)', 'low-level update',
                'meta update (with correction)', 'full training loop'):
    row = re.search(re.escape(phase) + r'\s+([\d.]+)\s', out)
    assert row and float(row.group(1)) > 0, (phase, out)
