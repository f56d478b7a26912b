"""IMPALA's settings: the original flags as one frozen dataclass, their checks, the levels they select, and the
factories of what they configure (environment constructor, agent, learner).

`experiment.experiment` (the gin configurable; the flags of deepmind/scalable_agent experiment.py L48-90) turns its
arguments into `Settings`;
single-machine training, test mode and the multi-machine jobs (`distributed`) all take a `Settings`.
"""

import contextlib
import dataclasses
from typing import Any, Dict, List, Tuple

import numpy as np

from scalable_agent import dmlab30
from scalable_agent import environments
from scalable_agent import learner as learner_lib
from scalable_agent import networks
from scalable_agent import numpy_agent
from scalable_agent import original_flags

CHECKPOINT_INTERVAL_S = 600  # The original's save_checkpoint_secs.
# How single-machine training's actors compute their policy step (`experiment.actor_inference`): 'batched' (the
# original: one TensorFlow call for all actors' pending steps, `dynamic_batching`) or 'numpy' (each actor in NumPy,
# `numpy_agent`; the shallow feed-forward agent only).
ACTOR_INFERENCE = ('batched', 'numpy')
_FLAG_DEFAULTS = original_flags.DEFAULTS


@dataclasses.dataclass(frozen=True)
class Settings:
  """The original flags (see `experiment.experiment`), minus logdir and mode; their defaults are
  `original_flags.DEFAULTS`."""
  test_num_episodes: int = _FLAG_DEFAULTS['test_num_episodes']
  task: int = _FLAG_DEFAULTS['task']
  job_name: str = _FLAG_DEFAULTS['job_name']
  total_environment_frames: int = _FLAG_DEFAULTS['total_environment_frames']
  num_actors: int = _FLAG_DEFAULTS['num_actors']
  batch_size: int = _FLAG_DEFAULTS['batch_size']
  unroll_length: int = _FLAG_DEFAULTS['unroll_length']
  num_action_repeats: int = _FLAG_DEFAULTS['num_action_repeats']
  seed: int = _FLAG_DEFAULTS['seed']
  entropy_cost: float = _FLAG_DEFAULTS['entropy_cost']
  baseline_cost: float = _FLAG_DEFAULTS['baseline_cost']
  discounting: float = _FLAG_DEFAULTS['discounting']
  reward_clipping: str = _FLAG_DEFAULTS['reward_clipping']
  dataset_path: str = _FLAG_DEFAULTS['dataset_path']
  level_name: str = _FLAG_DEFAULTS['level_name']
  width: int = _FLAG_DEFAULTS['width']
  height: int = _FLAG_DEFAULTS['height']
  learning_rate: float = _FLAG_DEFAULTS['learning_rate']
  decay: float = _FLAG_DEFAULTS['decay']
  momentum: float = _FLAG_DEFAULTS['momentum']
  epsilon: float = _FLAG_DEFAULTS['epsilon']
  # Multi-machine training (not flags of the original): scalable_agent/distributed.py.
  learner_address: str = _FLAG_DEFAULTS['learner_address']
  reverb_port: int = _FLAG_DEFAULTS['reverb_port']
  actors_per_process: int = _FLAG_DEFAULTS['actors_per_process']
  connect_timeout_s: float = 60.
  reconnect_timeout_s: float = 600.
  distribution_strategy: str = 'default'
  checkpoint_interval_s: float = float(CHECKPOINT_INTERVAL_S)
  actor_inference: str = 'batched'
  checkpoint_keep_every_frames: int = 0


# ---------------------------------------------------------------------------------------------------------------------
# Levels.


def training_levels(level_name: str) -> List[str]:
  """The training levels: the keys of `dmlab30.LEVEL_MAPPING` for 'dmlab30'; the names of a comma-separated list
  ('gymnasium/BabyAI-GoToLocal-v0,gymnasium/BabyAI-PickupLoc-v0', spaces around the commas ignored); else
  [level_name]."""
  if level_name == 'dmlab30':
    return list(dmlab30.LEVEL_MAPPING.keys())
  return [name.strip() for name in level_name.split(',')] if ',' in level_name else [level_name]


def test_levels(level_name: str) -> List[str]:
  """The test levels: the values of `dmlab30.LEVEL_MAPPING` for 'dmlab30', else the training levels."""
  return list(dmlab30.LEVEL_MAPPING.values()) if level_name == 'dmlab30' else training_levels(level_name)


def actor_levels(level_name: str, num_actors: int) -> List[str]:
  """Level of each actor, round-robin over `training_levels` (actor i: levels[i % len(levels)]), as the original."""
  levels = training_levels(level_name)
  return [levels[i % len(levels)] for i in range(num_actors)]


# ---------------------------------------------------------------------------------------------------------------------
# Checks and factories.


def environment_constructor(settings: Settings, level_name: str, seed: int = 1,
                            is_test: bool = False) -> environments.EnvironmentConstructor:
  """`environments.environment_constructor` of a level under the settings' frame size, action repeats and dataset
  path: its environment class and arguments, `num_actions` and `frame_shape` (height, width, channels)."""
  return environments.environment_constructor(level_name, seed, is_test=is_test, width=settings.width,
                                              height=settings.height, dataset_path=settings.dataset_path,
                                              num_action_repeats=settings.num_action_repeats)


def check_levels(settings: Settings) -> None:
  """Checks that every training level can run here (`environments.check_level_available`) and, for a list of
  levels, that they share one agent: the same number of actions and frame shape.

  Raises:
    environment_specs.MissingDependencyError, ValueError: as `check_level_available`; an empty or repeated name in a
      list; levels that differ in actions or frame shape (the message gives each level's).
  """
  levels = training_levels(settings.level_name)
  if settings.level_name == 'dmlab30':
    environments.check_level_available(settings.level_name)
    return
  if len(levels) > 1 and (not all(levels) or len(set(levels)) < len(levels)):
    raise ValueError(f'level_name {settings.level_name!r}: a list of levels needs distinct non-empty names separated '
                     'by commas.')
  for level in levels:
    environments.check_level_available(level)
  if len(levels) > 1:
    shapes = {}
    for level in levels:
      constructor = environment_constructor(settings, level)
      shapes[level] = (constructor.num_actions, constructor.frame_shape)
    if len(set(shapes.values())) > 1:
      raise ValueError('the levels of one run share one agent, so they need the same number of actions and frame '
                       'shape; got ' + '; '.join(f'{level}: {n} actions, frames {"x".join(map(str, shape))}'
                                                 for level, (n, shape) in shapes.items()) + '.')


def make_agent(settings: Settings, level_name: str) -> Any:
  """The agent (`networks.make_agent`: gin `agent_network.network`) for a level's action set and frame shape."""
  constructor = environment_constructor(settings, level_name)
  return networks.make_agent(constructor.num_actions, constructor.frame_shape)


def make_agent_and_learner(settings: Settings, level_name: str) -> Tuple[Any, learner_lib.Learner]:
  """The agent and its `Learner` under the `distribution_strategy` (built in its scope unless 'default').

  Returns:
    (agent, learner).
  """
  if settings.distribution_strategy == 'default':
    scope = contextlib.nullcontext()  # The single-device learner, as before strategies existed.
  else:
    scope = learner_lib.make_strategy(settings.distribution_strategy).scope()
  with scope:
    agent = make_agent(settings, level_name)
    learner = learner_lib.Learner(agent, entropy_cost=settings.entropy_cost, baseline_cost=settings.baseline_cost,
                                  discounting=settings.discounting, reward_clipping=settings.reward_clipping,
                                  learning_rate=settings.learning_rate, decay=settings.decay,
                                  momentum=settings.momentum, epsilon=settings.epsilon,
                                  total_environment_frames=settings.total_environment_frames,
                                  num_action_repeats=settings.num_action_repeats)
  return agent, learner


def check_settings(settings: Settings) -> None:
  """Checks the settings every mode and job shares: each has its field's type (an int where the original flag is
  an integer, a number where it is a float, a string), counts are >= 1, intervals >= 0.

  Raises:
    ValueError: naming the setting (experiment.<name>, flag --<name>) and what it must be.
  """
  kinds: Dict[Any, Tuple[Tuple[type, ...], str]] = {
      int: ((int, np.integer), 'an int'),
      float: ((int, float, np.integer, np.floating), 'a number'),
      str: ((str,), 'a string')
  }
  for field in dataclasses.fields(Settings):
    value = getattr(settings, field.name)
    types, what = kinds[field.type]
    if not isinstance(value, types) or isinstance(value, (bool, np.bool_)):
      raise ValueError(f'experiment.{field.name} (--{field.name}) must be {what}, got {value!r}.')
  for name in ('num_actors', 'batch_size', 'unroll_length', 'num_action_repeats', 'total_environment_frames',
               'test_num_episodes', 'actors_per_process'):
    if getattr(settings, name) < 1:
      raise ValueError(f'{name} must be >= 1, got {getattr(settings, name)} (experiment.{name}, --{name}).')
  for name in ('width', 'height'):
    if getattr(settings, name) < 1:
      raise ValueError(f'{name} must be >= 1 pixel, got {getattr(settings, name)} (--{name}).')
  if not settings.checkpoint_interval_s >= 0:
    raise ValueError(f'experiment.checkpoint_interval_s must be >= 0 seconds, got {settings.checkpoint_interval_s}.')
  if settings.checkpoint_keep_every_frames < 0:
    raise ValueError(f'experiment.checkpoint_keep_every_frames must be >= 0 frames (0: keep none), got '
                     f'{settings.checkpoint_keep_every_frames}.')
  if settings.reward_clipping not in learner_lib.REWARD_CLIPPING_MODES:
    raise ValueError(f'reward_clipping must be one of {", ".join(learner_lib.REWARD_CLIPPING_MODES)}; got '
                     f'{settings.reward_clipping!r}.')
  if settings.distribution_strategy not in learner_lib.STRATEGIES:
    raise ValueError(f'distribution_strategy must be one of {", ".join(learner_lib.STRATEGIES)}; got '
                     f'{settings.distribution_strategy!r}.')
  if settings.actor_inference not in ACTOR_INFERENCE:
    raise ValueError(f'experiment.actor_inference must be one of {", ".join(ACTOR_INFERENCE)}; got '
                     f'{settings.actor_inference!r}.')
  if settings.actor_inference == 'numpy' and networks.configured_network() not in numpy_agent.NETWORKS:
    raise ValueError(f"experiment.actor_inference = 'numpy' runs the shallow feed-forward agent only; "
                     f'agent_network.network is {networks.configured_network()!r}. Set agent_network.network = '
                     "'shallow', or experiment.actor_inference = 'batched'.")
