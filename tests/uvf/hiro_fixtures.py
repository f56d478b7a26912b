"""Shared setup of the HIRO training tests: gin bindings for small, fast runs of the real AntMaze configuration."""

from pathlib import Path

import launcher
from uvf import run_loop
from uvf import train
import uvf.configurables  # noqa: F401  pylint: disable=unused-import

CONFIG = Path(__file__).resolve().parents[2] / 'configs' / 'ant_maze.gin'
EPISODE = 50  # short episodes: every_n_steps.n, every_n_episodes.steps_per_episode, max_steps_per_episode


def small_bindings(episodes=2, episode=EPISODE, extra=()):
  """Bindings for a short run: 50-step episodes, batch 16, small buffers, seeded, summaries after every call."""
  return [
      f'every_n_steps.n = {episode}', f'every_n_episodes.steps_per_episode = {episode}',
      f'train_uvf.max_steps_per_episode = {episode}', 'train_uvf.initial_episodes = 1',
      f'train_uvf.num_episodes_train = {episodes}', 'train_uvf.batch_size = 16',
      'agent/CircularBuffer.buffer_size = 1000', 'meta/CircularBuffer.buffer_size = 200', 'train_uvf.seed = 0',
      'train_uvf.save_summaries_secs = 0', 'train_uvf.log_every_n_steps = 100',
      'train_uvf.save_policy_every_n_steps = 100', 'train_uvf.steps_per_call = 50'
  ] + list(extra)


def run_training(train_dir, bindings):
  """Parses the AntMaze configuration with `bindings`, runs train_uvf and returns its `TrainingLoop`."""
  launcher.parse_gin([CONFIG], bindings)
  loops = []
  original = run_loop.TrainingLoop.run

  def run(self):
    loops.append(self)
    return original(self)

  run_loop.TrainingLoop.run = run
  try:
    train.train_uvf(str(train_dir))
  finally:
    run_loop.TrainingLoop.run = original
  return loops[0]


def build_trainer(train_dir, bindings):
  """Parses the AntMaze configuration with `bindings` and returns train_uvf's `HiroTrainer`, built but not run
  (nothing collected, targets not copied)."""
  original = run_loop.TrainingLoop.run
  run_loop.TrainingLoop.run = lambda self: None
  try:
    return run_training(train_dir, bindings).trainer
  finally:
    run_loop.TrainingLoop.run = original


def adam_beta_powers(optimizer):
  """(beta1_power, beta2_power) of a TF1 `AdamOptimizer`: its two non-slot variables, found by name in its public
  `variables()` (beta^t after t Adam steps)."""
  by_name = {variable.name.split('/')[-1].split(':')[0]: variable for variable in optimizer.variables()}
  return by_name['beta1_power'], by_name['beta2_power']
