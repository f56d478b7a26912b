"""The reproduction kit's library (`reproduction/`): the Table 1 protocol of the task configs, the aggregation of
seeds' evaluations, and where a seed's training stands (progress file, checkpoints).

The evaluation files are hand-made (the rows `uvf.eval` writes into results.json); every expected statistic below
was worked out by hand from them.
"""

import csv
import json
import os
import subprocess
import sys

import gin
import numpy as np
from PIL import Image
import pytest

import figures.curves
import launcher
from reproduction import export
from reproduction import heldout
from reproduction import outputs
from reproduction import progress
from reproduction import protocol
from reproduction import report
from reproduction import results
from reproduction import statistics
from reproduction import summary

BUDGET = 150_000


def row(step, mode, success, distance, episodes=50):
  return {
      'step': step,
      'mode': mode,
      'goal': [0, 16],
      'num_episodes': episodes,
      'episode_steps': 500,
      'success_rate': success,
      'mean_final_distance': distance,
      'checkpoint': f'policy/model.ckpt-{step}'
  }


# eval3 success / final distance per seed and step; eval1 is 1 - eval3 with distance 1.
SEEDS = {
    0: {
        50_000: (0.0, 16.0),
        100_000: (0.4, 9.0),
        150_000: (0.9, 3.0),
        200_000: (1.0, 1.0)
    },
    1: {
        50_000: (0.1, 15.0),
        100_000: (0.7, 5.0),
        150_000: (0.5, 7.0)
    },
    2: {
        50_000: (0.0, 14.0),
        100_000: (0.0, 13.0)
    },
}


def write_seed(directory, points, duplicate=False):
  rows = []
  for step, (success, distance) in points.items():
    rows.append(row(step, 'eval1', 1.0 - success, 1.0))
    rows.append(row(step, 'eval3', success, distance))
  if duplicate:  # a re-evaluation of step 50,000 appended later: the last row of a step counts
    rows.append(row(50_000, 'eval3', 0.3, 12.0))
  os.makedirs(directory, exist_ok=True)
  with open(os.path.join(directory, 'results.json'), 'w') as f:
    json.dump(rows, f)


@pytest.fixture
def seed_rows(tmp_path):
  out = {}
  for seed, points in SEEDS.items():
    write_seed(str(tmp_path / f'seed_{seed}' / 'eval'), points)
    out[seed] = results.load_results(str(tmp_path / f'seed_{seed}' / 'eval'))
  return out


PROTOCOL = protocol.Protocol(task='AntMaze', modes=('eval1', 'eval3'), goals={
    'eval1': [16., 0.],
    'eval3': [0., 16.]
}, primary_mode='eval3', max_steps_per_episode=500, eval_episodes=50, paper=protocol.PAPER_TABLE1['AntMaze'])


def test_mean_and_standard_error_hand_worked():
  # [0.9, 0.7, 0.0]: mean 0.53333; deviations 0.36667, 0.16667, -0.53333; squares sum 0.44667; / (n - 1) = 0.22333;
  # s = 0.47258; s.e. = s / sqrt(3) = 0.27285.
  mean, se, n = statistics.mean_standard_error([0.9, 0.7, 0.0])
  assert n == 3
  assert mean == pytest.approx(0.533333, abs=1e-6)
  assert se == pytest.approx(0.272845, abs=1e-6)
  assert statistics.mean_standard_error([0.4]) == (0.4, None, 1)
  assert statistics.mean_standard_error([]) == (None, None, 0)


def test_best_within_budget_hand_worked(seed_rows):
  curves = {seed: results.seed_curves(rows, ['eval3'])['eval3'] for seed, rows in seed_rows.items()}
  best = results.best_within(curves[0], BUDGET)
  assert (best.step, best.success, best.distance) == (150_000, 0.9, 3.0)  # 200,000 is past the budget
  assert results.best_within(curves[0], 10_000_000).step == 200_000
  assert results.best_within(curves[2], BUDGET).step == 50_000  # equal bests: the earliest
  assert results.best_within(curves[0], 10_000) is None
  table = results.table1(curves, BUDGET)
  # Bests within 150k: 0.9 (seed 0, at 150k), 0.7 (seed 1, at 100k), 0.0 (seed 2, at 50k).
  assert table['per_seed'][0] == {'success': 0.9, 'step': 150_000, 'last_step': 200_000}
  assert table['per_seed'][1] == {'success': 0.7, 'step': 100_000, 'last_step': 150_000}
  assert table['per_seed'][2] == {'success': 0.0, 'step': 50_000, 'last_step': 100_000}
  assert table['seeds'] == 3 and table['complete'] == 2  # seed 2 has not reached 150k yet
  assert table['success_mean'] == pytest.approx(0.533333, abs=1e-6)
  assert table['success_se'] == pytest.approx(0.272845, abs=1e-6)


def test_mean_curve_across_seeds_hand_worked(seed_rows):
  curves = {seed: results.seed_curves(rows, ['eval3'])['eval3'] for seed, rows in seed_rows.items()}
  curve = {r['step']: r for r in results.across_seeds(curves)}
  assert sorted(curve) == [50_000, 100_000, 150_000, 200_000]
  # 100k: successes 0.4, 0.7, 0.0 -> mean 0.36667, s = 0.35119, s.e. 0.20276; distances 9, 5, 13 -> 9, s.e. 2.3094.
  assert curve[100_000]['seeds'] == 3
  assert curve[100_000]['success_mean'] == pytest.approx(0.366667, abs=1e-6)
  assert curve[100_000]['success_se'] == pytest.approx(0.202759, abs=1e-6)
  assert curve[100_000]['distance_mean'] == pytest.approx(9.0)
  assert curve[100_000]['distance_se'] == pytest.approx(2.309401, abs=1e-6)
  # 150k: seeds 0 and 1 only: 0.9, 0.5 -> 0.7, s.e. 0.2; 200k: seed 0 alone.
  assert curve[150_000]['seeds'] == 2
  assert curve[150_000]['success_mean'] == pytest.approx(0.7)
  assert curve[150_000]['success_se'] == pytest.approx(0.2)
  assert (curve[200_000]['seeds'], curve[200_000]['success_mean'], curve[200_000]['success_se']) == (1, 1.0, None)
  within = results.across_seeds(curves, BUDGET)
  assert [r['step'] for r in within] == [50_000, 100_000, 150_000]
  # Figure 4 view: the peak of the mean curve within the budget is 0.7 at 150k.
  assert results.figure4(within) == {
      'peak_success_mean': pytest.approx(0.7),
      'peak_step': 150_000,
      'last_step': 150_000,
      'last_success_mean': pytest.approx(0.7)
  }


def test_a_step_evaluated_twice_keeps_its_last_row(tmp_path):
  write_seed(str(tmp_path), SEEDS[0], duplicate=True)
  curves = results.seed_curves(results.load_results(str(tmp_path)))
  assert [p.step for p in curves['eval3']] == [50_000, 100_000, 150_000, 200_000]
  assert curves['eval3'][0] == results.Point(50_000, 0.3, 12.0, 50)
  assert results.evaluated_steps(results.load_results(str(tmp_path)), ['eval1', 'eval3']) == set(SEEDS[0])
  assert results.load_results(str(tmp_path / 'none')) == []


def test_outputs(seed_rows, tmp_path):
  result = summary.aggregate(seed_rows, PROTOCOL, BUDGET)
  paths = outputs.write_outputs(result, str(tmp_path / 'aggregate'), 'ant_maze')
  with open(paths['table1.csv']) as f:
    table = {r['mode']: r for r in csv.DictReader(f)}
  assert float(table['eval3']['best_success_mean']) == pytest.approx(0.533333, abs=1e-6)
  assert float(table['eval3']['best_success_se']) == pytest.approx(0.272845, abs=1e-6)
  assert (table['eval3']['seeds'], table['eval3']['complete'], table['eval3']['primary']) == ('3', '2', '1')
  assert (float(table['eval3']['paper_success']), float(table['eval3']['paper_se'])) == (0.99, 0.01)
  # eval1 = 1 - eval3: bests within 150k are 1.0 (seed 0 at 50k), 0.9 (seed 1 at 50k), 1.0 (seed 2): mean 0.96667;
  # s = 0.057735, s.e. 0.033333.
  assert float(table['eval1']['best_success_mean']) == pytest.approx(0.966667, abs=1e-6)
  assert float(table['eval1']['best_success_se']) == pytest.approx(0.033333, abs=1e-6)
  assert table['eval1']['paper_success'] == ''
  with open(paths['curves.csv']) as f:
    curves = [r for r in csv.DictReader(f) if r['mode'] == 'eval3']
  assert [int(r['step']) for r in curves] == [50_000, 100_000, 150_000]
  assert float(curves[1]['success_mean']) == pytest.approx(0.366667, abs=1e-6)
  with open(paths['per_seed.csv']) as f:
    per_seed = list(csv.DictReader(f))
  assert len(per_seed) == 2 * (4 + 3 + 2)  # every evaluation of every seed, both modes, the 200k one included
  with open(paths['summary.json']) as f:
    written = json.load(f)
  assert written['modes']['eval3']['table1']['per_seed']['1'] == {'success': 0.7, 'step': 100_000, 'last_step': 150_000}
  assert written['paper']['success'] == 0.99 and written['primary_mode'] == 'eval3'
  # The PNG: a valid image of the chart's size, and what `figures.curves` drew in it (stored in the PNG).
  with Image.open(paths['png']) as image:
    image.load()
    assert image.format == 'PNG' and image.size[0] == 1000 and image.size[1] > 3 * 260
    size = list(image.size)
  png = figures.curves.read_png(paths['png'])
  drawn = png['description']
  assert png['size'] == drawn['size'] == size
  assert drawn['title'] == 'AntMaze (ant_maze): 3 seeds, 150k steps; paper 0.99 ± 0.01 at 10M (Table 1)'
  assert drawn['xlabel'] == 'environment steps' and drawn['xlim'] == [0, 202_000]  # seed 0 to 200k, + 1%
  assert drawn['notes'][0] == summary.summary_lines(result)[0]
  eval3, eval1, distance = drawn['panels']
  assert [eval3['title'], eval1['title'], distance['title']] == [
      'success rate, eval3 (goal [0.0, 16.0]), the headline mode', 'success rate, eval1 (goal [16.0, 0.0])',
      'mean final distance, eval3 (goal [0.0, 16.0])'
  ]
  labels = ['seed 0', 'seed 1', 'seed 2', 'mean over 3 seeds ± s.e.']
  for panel in drawn['panels']:
    assert [s['label'] for s in panel['series']] == labels
    assert [s['points'] for s in panel['series']] == [4, 3, 2, 3]  # the mean: the 3 steps within the budget
  # Hand-computed from SEEDS: eval3 success, seed 1 0.1 to 0.7; the mean 0.0333 (50k: 0, 0.1, 0) to 0.7 (150k: 0.9,
  # 0.5); eval1 = 1 - eval3: the mean 0.3 (150k) to 0.9667 (50k); distance: the mean 15 (50k) to 5 (150k).
  assert eval3['series'][1]['y'] == [0.1, 0.7]
  assert eval3['series'][3]['y'] == [pytest.approx(0.1 / 3), pytest.approx(0.7)]
  assert eval1['series'][3]['y'] == [pytest.approx(0.3), pytest.approx(2.9 / 3)]
  assert distance['series'][0]['y'] == [1.0, 16.0] and distance['series'][3]['y'] == [5.0, 15.0]
  assert eval3['hlines'] == [{'value': 0.99, 'label': 'paper: 0.99 ± 0.01 (best within 10M)'}]
  assert eval1['hlines'] == []
  assert distance['hlines'] == [{'value': 5.0, 'label': 'success: distance < 5'}]
  assert distance['ylim'] == [0.0, pytest.approx(16.8)]  # the farthest distance, 16, + 5%
  assert eval3['legend'] == labels + ['paper: 0.99 ± 0.01 (best within 10M)']


def test_steps_to_episodes():
  assert protocol.num_episodes_for_steps(3_000_000, 500) == 6000  # the AntMaze campaign's binding
  assert protocol.num_episodes_for_steps(60_000, 500) == 120
  assert protocol.num_episodes_for_steps(60_001, 500) == 121
  assert protocol.run_length(6000, 500) == 3_000_100  # train_uvf stops at num_episodes x T + 100
  with pytest.raises(ValueError):
    protocol.num_episodes_for_steps(0, 500)


@pytest.mark.parametrize('config, task, primary, goal, modes, paper', [
    ('ant_maze.gin', 'AntMaze', 'eval3', [0., 16.], ('eval1', 'eval2', 'eval3'), 0.99),
    ('ant_push.gin', 'AntPush', 'eval2', [0., 19.], ('eval2',), 0.92),
    ('ant_fall.gin', 'AntFall', 'eval1', [0., 27., 4.5], ('eval1',), 0.66),
    ('ant_push_multi.gin', 'AntPush', 'eval2', [0., 19.], ('eval2',), 0.92),
    ('ant_fall_multi.gin', 'AntFall', 'eval1', [0., 27., 4.5], ('eval1',), 0.66),
    ('point_maze.gin', 'PointMaze', 'eval3', [0., 8.], ('eval1', 'eval2', 'eval3'), None),
])
def test_protocol_of_the_task_configs(config, task, primary, goal, modes, paper):
  launcher.register_configurables()
  launcher.parse_gin([launcher.resolve_config_path(f'configs/{config}')], [])
  found = protocol.protocol_from_gin()
  assert (found.task, found.primary_mode, found.modes) == (task, primary, modes)
  assert found.goals[primary] == goal
  assert (found.max_steps_per_episode, found.eval_episodes) == (500, 50)
  assert (found.paper.success if found.paper else None) == paper
  assert protocol.Protocol.from_json(json.loads(json.dumps(found.to_json()))) == found


def test_protocol_errors():
  launcher.register_configurables()
  launcher.parse_gin([launcher.resolve_config_path('configs/ant_maze.gin')], [])
  assert protocol.protocol_from_gin('eval1').primary_mode == 'eval1'
  with pytest.raises(ValueError, match=r"--mode eval9: the configuration evaluates the modes \['eval1', 'eval2'"):
    protocol.protocol_from_gin('eval9')
  launcher.parse_gin([launcher.resolve_config_path('configs/ant_maze.gin')], ['EVAL_MODES = ["eval1"]'])
  with pytest.raises(ValueError, match=r"none of the eval modes \['eval1'\].*paper's target \[0.0, 16.0\]"):
    protocol.protocol_from_gin()
  gin.clear_config()


def write_checkpoints(train_dir, now):
  """Policy checkpoints 50k (at now - 500 s), 100k (now - 100 s) and a half-written 150k; the full checkpoint 120k
  (now - 20 s), named by the `checkpoint` index file."""
  (train_dir / 'policy').mkdir(parents=True)
  for directory, step, mtime in ((train_dir / 'policy', 50_000, now - 500), (train_dir / 'policy', 100_000, now - 100),
                                 (train_dir, 120_000, now - 20)):
    for suffix in ('.index', '.data-00000-of-00001'):
      path = directory / f'model.ckpt-{step}{suffix}'
      path.write_bytes(b'')
      os.utime(path, (mtime, mtime))
  (train_dir / 'policy' / 'model.ckpt-150000.index').write_bytes(b'')  # being written: no data shard yet
  (train_dir / 'checkpoint').write_text('model_checkpoint_path: "model.ckpt-120000"\n'
                                        'all_model_checkpoint_paths: "model.ckpt-120000"\n')


def test_progress_of_a_run_without_a_progress_file_from_its_checkpoints(tmp_path):
  """A run of older code writes no progress.json: its step is its newest checkpoint's, its speed that of its last
  two checkpoints while they are recent."""
  train_dir = tmp_path / 'seed_0'
  now = 1_000_000.0
  write_checkpoints(train_dir, now)
  (train_dir / 'train.log').write_text('global step 122000 / 3000100: loss = 1.0 (200 steps/sec)\n')  # not read
  record = progress.read_progress(str(train_dir), now)
  assert record['steps'] == 120_000 and record['full_checkpoint'] == 120_000
  assert record['policy_steps'] == [50_000, 100_000] and record['state'] is None
  # The last two checkpoints: 100k at now - 100, 120k at now - 20: 20,000 steps in 80 s.
  assert record['rate'] == pytest.approx(250.0)
  assert record['updated'] == now - 20
  assert progress.read_progress(str(train_dir), now + 3600)['rate'] is None  # nothing recent
  assert progress.full_checkpoint_step(str(tmp_path / 'none')) is None
  assert progress.read_progress(str(tmp_path / 'none'), now)['steps'] == 0


def test_progress_from_a_hand_written_progress_file(tmp_path):
  """The progress file (rundir.progress, written by the training loop) gives the step and speed; the checkpoints
  still give the resume point and the policies."""
  train_dir = tmp_path / 'seed_0'
  now = 1_000_000.0
  write_checkpoints(train_dir, now)
  record = {
      'step': 122_000,
      'total_steps': 3_000_100,
      'rate': 200.0,
      'eta_s': 14_390.5,
      'time': now - 5,
      'pid': 4321,
      'state': 'running'
  }
  (train_dir / 'progress.json').write_text(json.dumps(record) + '\n')
  found = progress.read_progress(str(train_dir), now)
  assert (found['steps'], found['rate'], found['updated'], found['state']) == (122_000, 200.0, now - 5, 'running')
  assert (found['full_checkpoint'], found['policy_steps']) == (120_000, [50_000, 100_000])
  # An old record says nothing of the speed (the checkpoints are old too); the record of a stopped run gives none
  # either, the checkpoints' speed stands in while they are recent.
  assert progress.read_progress(str(train_dir), now + 3600)['rate'] is None
  (train_dir / 'progress.json').write_text(json.dumps(dict(record, state='stopped')) + '\n')
  assert progress.read_progress(str(train_dir), now)['rate'] == pytest.approx(250.0)
  assert progress.read_progress(str(train_dir), now + 3600)['rate'] is None
  # An unreadable file counts as none.
  (train_dir / 'progress.json').write_text('{"step": ')
  assert progress.read_progress(str(train_dir), now)['steps'] == 120_000


def test_the_kit_starts_without_tensorflow():
  """The kit takes HIRO's constants from `uvf.protocol` (TensorFlow-free): its start-up, `--help` and Ray workers
  load no TensorFlow."""
  code = ('import sys; import reproduction.cli; '
          'print(sorted(m for m in sys.modules if m.startswith("tensorflow")))')
  out = subprocess.run([sys.executable, '-c', code], cwd=launcher.REPO_ROOT, capture_output=True, text=True, check=True)
  assert out.stdout.strip() == '[]', out.stdout


def test_best_policy_over_seeds_hand_worked(seed_rows):
  # eval3 within 150k: seed 0 has 0.9 at 150k; seed 1's best is 0.7. Unlimited: seed 0's 1.0 at 200k.
  seed, best = results.best_policy(seed_rows, 'eval3', BUDGET)
  assert (seed, best['step'], best['success_rate']) == (0, 150_000, 0.9)
  seed, best = results.best_policy(seed_rows, 'eval3', 10_000_000)
  assert (seed, best['step']) == (0, 200_000)
  # eval1 (1 - eval3, distance 1 everywhere): 1.0 at 50k on seeds 0 and 2; 100k of seed 2 too: the earliest step,
  # then the lowest seed.
  seed, best = results.best_policy(seed_rows, 'eval1', BUDGET)
  assert (seed, best['step'], best['success_rate']) == (0, 50_000, 1.0)
  # Equal success: the lower final distance wins over the earlier step.
  rows = {0: [row(50_000, 'eval3', 0.5, 6.0), row(100_000, 'eval3', 0.5, 4.0)], 1: [row(50_000, 'eval3', 0.5, 4.5)]}
  seed, best = results.best_policy(rows, 'eval3', BUDGET)
  assert (seed, best['step']) == (0, 100_000)
  # A step evaluated twice: its last row counts (0.3 replaces 0.8 at 50k).
  rows = {0: [row(50_000, 'eval3', 0.8, 2.0), row(100_000, 'eval3', 0.5, 4.0), row(50_000, 'eval3', 0.3, 9.0)]}
  assert results.best_policy(rows, 'eval3', BUDGET)[1]['step'] == 100_000
  assert results.best_policy(seed_rows, 'eval3', 10_000) is None
  assert results.best_policy(seed_rows, 'eval2', BUDGET) is None


def write_checkpoint(directory, step, content):
  os.makedirs(directory, exist_ok=True)
  prefix = os.path.join(directory, f'model.ckpt-{step}')
  for suffix, data in (('.index', b'index ' + content), ('.data-00000-of-00001', b'data ' + content)):
    with open(prefix + suffix, 'wb') as f:
      f.write(data)
  return prefix


def test_export_checkpoint_copies_replaces_and_refuses(tmp_path):
  first = write_checkpoint(str(tmp_path / 'policy'), 150_000, b'first')
  out = str(tmp_path / 'docs' / 'best')
  exported = export.export_checkpoint(first, out, {'step': 150_000})
  assert exported == os.path.join(out, 'model.ckpt-150000')
  assert sorted(os.listdir(out)) == [
      'best_policy.json', 'checkpoint', 'model.ckpt-150000.data-00000-of-00001', 'model.ckpt-150000.index'
  ]
  with open(exported + '.data-00000-of-00001', 'rb') as f:
    assert f.read() == b'data first'
  with open(os.path.join(out, 'checkpoint')) as f:
    assert f.read().splitlines()[0] == 'model_checkpoint_path: "model.ckpt-150000"'
  # A better policy later replaces the earlier export entirely.
  second = write_checkpoint(str(tmp_path / 'policy'), 900_000, b'second')
  export.export_checkpoint(second, out, {'step': 900_000})
  assert sorted(os.listdir(out)) == [
      'best_policy.json', 'checkpoint', 'model.ckpt-900000.data-00000-of-00001', 'model.ckpt-900000.index'
  ]
  with open(os.path.join(out, 'best_policy.json')) as f:
    assert json.load(f) == {'step': 900_000}
  assert sorted(os.listdir(tmp_path / 'docs')) == ['best']  # no temporary directory left
  # A directory holding something else is never overwritten; an incomplete checkpoint is refused.
  other = tmp_path / 'other'
  other.mkdir()
  (other / 'notes.md').write_text('mine')
  with pytest.raises(ValueError, match='is not an earlier export'):
    export.export_checkpoint(second, str(other), {})
  assert os.listdir(other) == ['notes.md']
  os.remove(second + '.data-00000-of-00001')
  with pytest.raises(ValueError, match='is not a complete checkpoint'):
    export.export_checkpoint(second, str(tmp_path / 'new'), {})
  assert not os.path.exists(tmp_path / 'new')


# Held-out evaluations of the headline mode (eval3), by seed: {step: success}. Seed 1's 50k row is a policy that is
# neither its best nor its final one (an earlier best): it must not count.
HELDOUT = {0: {150_000: 0.8}, 1: {50_000: 0.99, 100_000: 0.55, 150_000: 0.45}, 2: {50_000: 0.0}}


def heldout_rows():
  return {
      seed: [row(step, 'eval3', success, 4.0, episodes=heldout.HELDOUT_EPISODES) for step, success in points.items()]
      for seed, points in HELDOUT.items()
  }


def test_heldout_policies_are_the_selected_best_and_the_final_one(seed_rows):
  """Within 150k: seed 0's best is 0.9 at 150k, its final policy the 150k one (it was evaluated up to 200k); seed
  1's best is 0.7 at 100k, its final 150k; seed 2's best is 0.0 at 50k (the earliest of equal ones) and it has no
  final policy yet (evaluated to 100k only)."""
  curves = {seed: results.seed_curves(rows, ['eval3'])['eval3'] for seed, rows in seed_rows.items()}
  assert [heldout.heldout_steps(curves[seed], BUDGET) for seed in (0, 1, 2)] == [(150_000, 150_000), (100_000, 150_000),
                                                                                 (50_000, None)]
  assert heldout.heldout_steps([], BUDGET) == (None, None)


def test_heldout_view_hand_worked(seed_rows):
  result = summary.aggregate(seed_rows, PROTOCOL, BUDGET, heldout_rows())
  view = result['heldout']
  assert view['per_seed'] == {
      0: {
          'best_step': 150_000,
          'best_selection': 0.9,
          'best_heldout': 0.8,
          'final_step': 150_000,
          'final_heldout': 0.8
      },
      1: {
          'best_step': 100_000,
          'best_selection': 0.7,
          'best_heldout': 0.55,
          'final_step': 150_000,
          'final_heldout': 0.45
      },
      2: {
          'best_step': 50_000,
          'best_selection': 0.0,
          'best_heldout': 0.0,
          'final_step': None,
          'final_heldout': None
      }
  }
  # best held out: 0.8, 0.55, 0.0: mean 0.45; deviations 0.35, 0.1, -0.45: s^2 = 0.335 / 2, s.e. = s / sqrt(3).
  assert view['best']['seeds'] == 3
  assert view['best']['mean'] == pytest.approx(0.45, abs=1e-12)
  assert view['best']['se'] == pytest.approx(np.sqrt(0.335 / 2) / np.sqrt(3), abs=1e-12)
  # final held out: 0.8 and 0.45 (seed 2 has no final policy): mean 0.625, s.e. 0.35 / sqrt(2) / sqrt(2) = 0.175.
  assert (view['final']['seeds'], view['final']['mean']) == (2, pytest.approx(0.625, abs=1e-12))
  assert view['final']['se'] == pytest.approx(0.175, abs=1e-12)
  # The Table 1 values: 0.9, 0.7, 0.0 (as table1's mean 0.5333).
  assert view['selection']['mean'] == pytest.approx(result['modes']['eval3']['table1']['success_mean'], abs=1e-12)
  # Seeds whose held-out best reaches 0.5: seeds 0 and 1, of 3.
  assert view['reaching'] == {'threshold': 0.5, 'count': 2, 'seeds': 3, 'fraction': pytest.approx(2 / 3)}
  # With 3 seeds the 25% trimmed mean trims nothing: the IQM is the mean.
  assert view['best']['iqm'] == pytest.approx(0.45, abs=1e-12)
  assert view['best']['iqm_low'] <= 0.45 <= view['best']['iqm_high']


def test_heldout_outputs_and_summary(seed_rows, tmp_path):
  result = summary.aggregate(seed_rows, PROTOCOL, BUDGET, heldout_rows())
  paths = outputs.write_outputs(result, str(tmp_path / 'aggregate'), 'ant_maze')
  with open(paths['table1.csv']) as f:
    table = {r['mode']: r for r in csv.DictReader(f)}
  primary = table['eval3']
  assert float(primary['best_success_mean']) == pytest.approx(0.533333, abs=1e-6)  # the Table 1 view, unchanged
  assert (float(primary['heldout_best_mean']), float(primary['heldout_final_mean'])) == (pytest.approx(0.45),
                                                                                         pytest.approx(0.625))
  assert (primary['heldout_best_seeds'], primary['heldout_final_seeds'],
          primary['seeds_reaching_threshold']) == ('3', '2', '2')
  assert (primary['heldout_eval_seed'], primary['heldout_episodes']) == (str(heldout.HELDOUT_SEED),
                                                                         str(heldout.HELDOUT_EPISODES))
  assert table['eval1']['heldout_best_mean'] == ''
  with open(paths['heldout.csv']) as f:
    rows = [(int(r['seed']), int(r['step']), r['role'], float(r['success_rate'])) for r in csv.DictReader(f)]
  assert rows == [(0, 150_000, 'best+final', 0.8), (1, 50_000, '', 0.99), (1, 100_000, 'best', 0.55),
                  (1, 150_000, 'final', 0.45), (2, 50_000, 'best', 0.0)]
  lines = summary.summary_lines(result)
  assert lines[-2].startswith(f'  held-out ({heldout.HELDOUT_EPISODES} episodes, evaluation seed '
                              f'{heldout.HELDOUT_SEED}): best policy 0.45 +- 0.24 (IQM 0.45, 95% CI ')
  assert lines[-1] == '  seeds whose best policy reaches 0.5 held-out: 2 of 3 seeds'
  with open(paths['summary.json']) as f:
    assert json.load(f)['heldout']['reaching']['count'] == 2
  # The held-out policies in the PNG's headline panel: the best ones at (150k, 0.8), (100k, 0.55), (50k, 0.0); the
  # final ones at (150k, 0.8), (150k, 0.45); seed 1's earlier best (50k, 0.99) is not drawn.
  best, final = figures.curves.read_png(paths['png'])['description']['panels'][0]['series'][4:]
  assert (best['label'], best['points'], best['x'],
          best['y']) == (f'a seed\'s best policy, held out ({heldout.HELDOUT_EPISODES} episodes)', 3, [50_000, 150_000],
                         [0.0, 0.8])
  assert (final['label'], final['points'], final['x'],
          final['y']) == (f'a seed\'s final policy, held out ({heldout.HELDOUT_EPISODES} episodes)', 2,
                          [150_000, 150_000], [0.45, 0.8])


def test_rliable_iqm_and_interval_against_numpy():
  """rliable's IQM is the 25% trimmed mean: of 7 values, 1 cut at each end (int(7 / 4)), the mean of the middle 5:
  (0.12 + 0.34 + 0.46 + 0.58 + 0.71) / 5 = 0.442. Its interval: the 2.5 and 97.5 percentiles of the IQMs of
  `reps` resamples of the seeds with replacement, drawn from NumPy's global generator seeded with `seed`."""
  values = [0.93, 0.46, 0.12, 0.0, 0.71, 0.34, 0.58]
  iqm, low, high = statistics.iqm_interval(values, reps=1000, seed=3)
  assert iqm == pytest.approx(0.442, abs=1e-12)
  np.random.seed(3)
  x = np.asarray(values)
  resampled = [np.sort(x[np.random.choice(7, (7, 1), replace=True)[:, 0]])[1:-1].mean() for _ in range(1000)]
  assert (low, high) == (pytest.approx(np.percentile(resampled, 2.5),
                                       abs=1e-12), pytest.approx(np.percentile(resampled, 97.5), abs=1e-12))
  state = np.random.get_state()
  statistics.iqm_interval([0.1, 0.2], reps=50, seed=1)
  assert np.array_equal(np.random.get_state()[1], state[1])  # the global generator is left as it was
  assert statistics.iqm_interval([]) is None


def test_markdown_tables_hand_worked(seed_rows, tmp_path):
  """Within 150k, eval3: as selected 0.9, 0.7, 0.0 (mean 0.5333; s.e. sqrt(0.44667 / 2) / sqrt(3) = 0.2728); held
  out, the best policies 0.8, 0.55, 0.0 (0.45 ± 0.2363; 2 of 3 reach 0.5, as selected too) and the final ones 0.8,
  0.45 (seed 2 has none: 0.625 ± 0.175); the mean curve 0.033, 0.367, 0.7 (seeds 0 and 1 at 150k): its peak 0.70 at
  150k. Seeds 0 and 1 are evaluated up to 150k, seed 2 only to 100k. With 3 seeds the IQM is the mean."""
  result = summary.aggregate(seed_rows, PROTOCOL, BUDGET, heldout_rows())

  def interval(values):
    _, low, high = statistics.iqm_interval(values)
    return f'[{low:.2f}, {high:.2f}]'

  views = report.views_table(result)
  assert views[2:] == [
      f'| ours | best policy within 150k, as selected (50 episodes; Table 1 view) | 3, 2 complete | '
      f'0.53 ± 0.27 (IQM 0.53 {interval([0.9, 0.7, 0.0])}) |',
      f'| ours | best policy, held out (100 episodes, evaluation seed 1000) | 3 | '
      f'0.45 ± 0.24 (IQM 0.45 {interval([0.8, 0.55, 0.0])}) |',
      # 0.625 is exact and prints as 0.62 (ties to even); the s.e. in floats is 0.17500000000000002: 0.18.
      f'| ours | final policy (150k), held out | 2 of 3 | 0.62 ± 0.18 (IQM 0.62 {interval([0.8, 0.45])}) |',
      '| ours | seeds whose best as selected reaches 0.5 | 3 | 2 of 3 |',
      '| ours | seeds whose held-out best reaches 0.5 | 3 | 2 of 3 |',
      '| ours | peak of the mean curve (Figure 4 view) | 3 | 0.70 at 150k |'
  ]
  assert report.seeds_table(result)[2:] == [
      '| 0 | 0.90 (150k) | 0.80 | 0.80 |', '| 1 | 0.70 (100k) | 0.55 | 0.45 |',
      '| 2 | 0.00 (50k; evaluated to 100k so far) | 0.00 | - |'
  ]
  # The same tables from summary.json (seed keys are strings there), and in the kit's table.md.
  paths = outputs.write_outputs(result, str(tmp_path / 'aggregate'), 'ant_maze')
  with open(paths['summary.json']) as f:
    again = json.load(f)
  assert (report.views_table(again), report.seeds_table(again)) == (views, report.seeds_table(result))
  with open(paths['table.md']) as f:
    assert f.read() == '\n'.join(views + [''] + report.seeds_table(result)) + '\n'
  # A seed with no evaluation yet, and no held-out evaluations at all.
  rows = {**seed_rows, 3: []}
  bare = summary.aggregate(rows, PROTOCOL, BUDGET)
  assert report.views_table(bare)[3:7] == [
      '| ours | best policy, held out (100 episodes, evaluation seed 1000) | 0 of 4 | n/a |',
      '| ours | final policy (150k), held out | 0 of 4 | n/a |',
      '| ours | seeds whose best as selected reaches 0.5 | 3 of 4 | 2 of 3 |',
      '| ours | seeds whose held-out best reaches 0.5 | 0 of 4 | n/a |'
  ]
  assert report.seeds_table(bare)[-1] == '| 3 | not evaluated yet | - | - |'
