"""Evaluation statistics and the results table (success as in tensorflow/models research/efficient-hrl
utils/eval_utils.py): `episode_statistics` (per-goal means over episodes), `final_distances` / `task_state_indices`
(the success measure), `Results` (an eval directory's results.json / results.csv; rows are only ever added) and
`format_table` (the table printed per checkpoint). Used by `uvf.eval`."""

import csv
import io
import json
import os
import re
from typing import Dict, Set

import gin
import numpy as np
import tensorflow as tf

from uvf import protocol
from uvf import rollout

EvalError = rollout.EvalError

# Success distance, results files and columns: `uvf/protocol.py`.

# ----------------------------------------------------------------------------------------------------------------------
# Statistics.


def episode_statistics(rewards, meta_rewards, final_distances, discounts=None, gamma=1.0,
                       success_distance=protocol.SUCCESS_DISTANCE):
  """The original's `compute_reward` / `compute_average_reward` on finished episodes.

  Args:
    rewards: float [E, T], the low-level (context) reward of each step of E episodes of T steps.
    meta_rewards: float [E, T], the task (meta) reward of each step.
    final_distances: float [E], the distance to the target at each episode's final state.
    discounts: None (all 1) or float [E, T], the environment's discounts (the maze's are 1).
    gamma: discount of the sums: step t weighs gamma^t (HIRO's eval: 1.0).
    success_distance: an episode succeeds when its final distance is below this.

  Returns:
    dict: per episode (float64 [E] lists) 'episode_rewards' (sum_t gamma^t d_t r_t), 'episode_meta_rewards',
    'episode_last_rewards', 'episode_last_meta_rewards' (r at the last step), 'episode_final_distances',
    'episode_successes' (bool); and their means 'mean_reward', 'last_reward', 'mean_meta_reward',
    'last_meta_reward', 'mean_final_distance', 'success_rate'.
  """
  rewards = np.asarray(rewards, np.float64)
  meta_rewards = np.asarray(meta_rewards, np.float64)
  final_distances = np.asarray(final_distances, np.float64).reshape(-1)
  if rewards.ndim != 2 or rewards.shape != meta_rewards.shape or rewards.shape[0] != final_distances.shape[0]:
    raise ValueError(f'episode_statistics: rewards {rewards.shape} and meta_rewards {meta_rewards.shape} must be '
                     f'[episodes, steps] and final_distances {final_distances.shape} [episodes].')
  if rewards.shape[0] == 0 or rewards.shape[1] == 0:
    raise ValueError('episode_statistics: no episodes or no steps.')
  discounts = np.ones_like(rewards) if discounts is None else np.asarray(discounts, np.float64)
  weights = discounts * gamma**np.arange(rewards.shape[1], dtype=np.float64)[None]
  episode_rewards = np.sum(rewards * weights, axis=1)
  episode_meta_rewards = np.sum(meta_rewards * weights, axis=1)
  successes = final_distances < success_distance
  return {
      'episode_rewards': episode_rewards.tolist(),
      'episode_meta_rewards': episode_meta_rewards.tolist(),
      'episode_last_rewards': rewards[:, -1].tolist(),
      'episode_last_meta_rewards': meta_rewards[:, -1].tolist(),
      'episode_final_distances': final_distances.tolist(),
      'episode_successes': successes.tolist(),
      'mean_reward': float(np.mean(episode_rewards)),
      'last_reward': float(np.mean(rewards[:, -1])),
      'mean_meta_reward': float(np.mean(episode_meta_rewards)),
      'last_meta_reward': float(np.mean(meta_rewards[:, -1])),
      'mean_final_distance': float(np.mean(final_distances)),
      'success_rate': float(np.mean(successes)),
  }


def final_distances(final_states, previous_states, targets, state_indices, relative=False):
  """The distance to the task target at the final state of each episode: float64 [E].

  Args:
    final_states: [E, O], s_T.
    previous_states: [E, O], s_{T-1} (used only with `relative`).
    targets: [E, M], the task context of the final step.
    state_indices: the M state dimensions compared with the target (AntMaze: [0, 1]).
    relative: the task context is relative to the state (the *_img configurations): the target point is
      s_{T-1}[idx] + T.
  """
  final_states = np.asarray(final_states, np.float64)
  targets = np.asarray(targets, np.float64)
  idx = list(state_indices)
  goal = targets + np.asarray(previous_states, np.float64)[:, idx] if relative else targets
  return np.sqrt(np.sum((final_states[:, idx] - goal)**2, axis=-1))


def task_state_indices(target_dim):
  """(state indices, relative) of the task reward (gin `task/negative_distance`): the state dimensions the target is
  compared with (default: the first `target_dim`) and whether the target is relative to the state."""

  def query(name, default):
    try:
      value = gin.query_parameter(f'task/negative_distance.{name}')
    except ValueError:
      return default
    return default if value is None else value

  indices = [int(i) for i in query('state_indices', list(range(target_dim)))]
  if len(indices) != target_dim:
    raise EvalError(f'task/negative_distance.state_indices = {indices} has {len(indices)} entries for a task '
                    f'target of dimension {target_dim} (meta/Context.context_shapes).')
  return indices, bool(query('relative_context', False))


# ----------------------------------------------------------------------------------------------------------------------
# Results.


class Results(object):
  """The results table of an eval directory: `results.json` (a list of rows, with the per-episode values) and
  `results.csv` (the `protocol.CSV_FIELDS` columns). Rows are only ever added."""

  def __init__(self, eval_dir):
    self.json_path = os.path.join(eval_dir, protocol.RESULTS_JSON)
    self.csv_path = os.path.join(eval_dir, protocol.RESULTS_CSV)
    self.rows = []
    if tf.io.gfile.exists(self.json_path):
      try:
        with tf.io.gfile.GFile(self.json_path) as f:
          self.rows = json.load(f)
        if not isinstance(self.rows, list):
          raise ValueError('not a list of rows')
      except ValueError as e:
        raise EvalError(f'{self.json_path} cannot be read ({e}); move it away to start a new results table.') from None

  def evaluated_steps(self, modes):
    """The steps that have a row for every mode of `modes`: the global steps and the <step> of the rows'
    `model.ckpt-<step>` checkpoint names (the same for this port's checkpoints)."""
    by_step: Dict[int, Set[str]] = {}
    for row in self.rows:
      steps = {int(row['step'])}
      match = re.search(r'-(\d+)$', str(row.get('checkpoint', '')))
      if match:
        steps.add(int(match.group(1)))
      for step in steps:
        by_step.setdefault(step, set()).add(row['mode'])
    return {step for step, found in by_step.items() if set(modes) <= found}

  def append(self, rows):
    self.rows.extend(rows)
    directory = os.path.dirname(self.json_path)
    tf.io.gfile.makedirs(directory)
    tmp = self.json_path + '.tmp'
    with tf.io.gfile.GFile(tmp, 'w') as f:
      json.dump(self.rows, f, indent=1)
    tf.io.gfile.rename(tmp, self.json_path, overwrite=True)
    new_file = not tf.io.gfile.exists(self.csv_path)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=protocol.CSV_FIELDS, extrasaction='ignore', lineterminator='\n')
    if new_file:
      writer.writeheader()
    for row in rows:
      writer.writerow(dict(row, goal=json.dumps(row['goal'])))
    with open(self.csv_path, 'a', encoding='utf-8') as f:
      f.write(text.getvalue())


def format_table(rows):
  """The per-goal table printed after each checkpoint."""
  lines = [
      f'{"mode":<8} {"goal":<16} {"success":>8} {"reward":>11} {"meta_reward":>12} {"final_dist":>11} '
      f'{"time_s":>7}'
  ]
  for row in rows:
    goal = json.dumps(row['goal']) if not isinstance(row['goal'], str) else row['goal']
    lines.append(f'{row["mode"]:<8} {goal:<16} {row["success_rate"]:>8.2f} {row["mean_reward"]:>11.2f} '
                 f'{row["mean_meta_reward"]:>12.2f} {row["mean_final_distance"]:>11.2f} {row["wall_time_s"]:>7.1f}')
  return '\n'.join(lines)
