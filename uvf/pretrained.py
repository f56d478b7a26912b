"""Trained HIRO policies as a small API: load a published policy bundle, then act one observation at a time.

    import gymnasium
    from uvf import pretrained                         # `import uvf` registers hiro/AntPush-v0 with Gymnasium
    policy = pretrained.load_policy('AntPush')         # replaces this process's gin configuration
    env = gymnasium.make('hiro/AntPush-v0')            # the same simulation; its goal is the paper's, (0, 19)
    observation, _ = env.reset(seed=0)                 # float32 [30]
    policy.reset()                                     # the bundle's target, (0, 19)
    for _ in range(500):
      observation, reward, terminated, truncated, info = env.step(policy.act(observation))
    # info['success'] at the end: info['distance'] (from observation[:2] to (0, 19)) < 5, uvf.protocol.SUCCESS_DISTANCE

A bundle is a directory (`bundle_dir`; the committed ones are docs/reproduction/<task>/best_policy/) holding

  * a policy checkpoint `model.ckpt-<step>` (its `.index` and data shards, and a `checkpoint` state file),
  * `best_policy.json`: the task, the config files, the eval mode and its target ('goal'), the recorded evaluation,
  * `config.gin`: the complete gin configuration of the policy, flattened (scripts/export_policy_config.py writes
    it; the reproduction kit's --export_best too), so that loading needs no configs/ tree.

`load_policy` builds the agents as the evaluation does (uvf/eval.py: the bindings of `evaluate`, `uvf.build`) and
restores the checkpoint strictly by name (`uvf.checkpoints.restore_policy`). `HiroPolicy.act` then follows the
deterministic evaluation rollout of uvf/rollout.py (`Evaluator`) for one environment, with the same functions:

  a_t = clip(mu_low(s_t (+) g_t)) to the action bounds, g_0 = 0;
  g_{t+1} = mu_meta(s_{t+1} (+) T)  if t mod c == 0  else  g_t + s_repr_t[:k] - s_repr_{t+1}[:k]
            (`Context.next_goal`; c = 10, T the target, s_repr the state preprocess: hiro_orig s[:15]),

where g_{t+1} is computed by the call of `act` that receives s_{t+1}. Each `act` is one `tf.function` call.

Floating point: run_eval.py evaluates its N episodes as one batch (uvf/eval.py `evaluate`: `rollout.Evaluator` on
N environments), and `act` computes one row, a batch of 1, as the original efficient-hrl eval.py did (it ran its
episodes one at a time). A batch of N rounds the networks' matrix products differently in the last bits than a batch
of 1, and the ant's contacts amplify that: within a few hundred steps the trajectories
part, so a single episode can end differently (another final distance, at times another success) while the success
rates agree statistically. `act` matches run_eval bit for bit when run_eval evaluates one episode per call
(`evaluate.num_episodes_eval = 1`; `evaluate.seed = i` starts it from the reset seeded by
`uvf.rollout.episode_seed(i, 0)`), which tests/uvf/test_pretrained.py checks on AntPush.
"""

import json
import os
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple, Union

from uvf import quiet_imports

quiet_imports.load()  # Before TensorFlow and tf-agents load: their start-up lines off (uvf/quiet_imports.py).

# pylint: disable=g-import-not-at-top,wrong-import-position,g-bad-import-order
import gin  # noqa: E402
import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import tensorflow as tf  # noqa: E402

from rundir import checkpoints as run_checkpoints  # noqa: E402
from uvf import build  # noqa: E402
from uvf import checkpoints  # noqa: E402
from uvf import eval as eval_lib  # noqa: E402  pylint: disable=redefined-builtin
from uvf import eval_results  # noqa: E402
from uvf import representation  # noqa: E402
from uvf import rollout  # noqa: E402
import uvf.configurables  # noqa: F401,E402  pylint: disable=unused-import  (every gin name of config.gin)

# pylint: enable=g-import-not-at-top,wrong-import-position,g-bad-import-order

TASKS = ('AntMaze', 'AntPush', 'AntFall')
_SNAKE = {'AntMaze': 'ant_maze', 'AntPush': 'ant_push', 'AntFall': 'ant_fall'}
PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG = 'config.gin'
INFO = 'best_policy.json'


def bundle_dir(task: str) -> Path:
  """The directory of the trained policy of `task` (one of `TASKS`) -> pathlib.Path.

  The installed copy `<uvf package>/trained/<snake_task>/best_policy` if it exists (a wheel places the bundles
  there), else the checkout's `<repository>/docs/reproduction/<snake_task>/best_policy`.

  Raises:
    ValueError: `task` is not one of `TASKS`.
    FileNotFoundError: neither directory exists.
  """
  if task not in _SNAKE:
    raise ValueError(f'unknown task {task!r}: the trained policies are {", ".join(TASKS)}.')
  snake = _SNAKE[task]
  candidates = [
      PACKAGE_DIR / 'trained' / snake / 'best_policy',
      PACKAGE_DIR.parent / 'docs' / 'reproduction' / snake / 'best_policy'
  ]
  for candidate in candidates:
    if candidate.is_dir():
      return candidate
  raise FileNotFoundError(f'no trained {task} policy: neither {candidates[0]} (installed package) nor '
                          f'{candidates[1]} (repository checkout) exists.')


def _bundle(task_or_dir: Union[str, os.PathLike[str]]) -> Tuple[Path, Dict[str, Any], str]:
  """(directory, best_policy.json dict, checkpoint prefix) of a task name or bundle directory."""
  if isinstance(task_or_dir, str) and task_or_dir in _SNAKE:
    directory = bundle_dir(task_or_dir)
  else:
    directory = Path(task_or_dir)
    if not directory.is_dir():
      if isinstance(task_or_dir, str) and os.sep not in task_or_dir and '/' not in task_or_dir:
        raise ValueError(f'unknown task {task_or_dir!r}: give one of {", ".join(TASKS)} or a policy bundle '
                         'directory.')
      raise FileNotFoundError(f'{directory} is not a directory: give one of {", ".join(TASKS)} or a policy bundle '
                              'directory (a policy checkpoint with config.gin and best_policy.json).')
  for name in (INFO, CONFIG):
    if not (directory / name).is_file():
      fix = (f' Write it with  python scripts/export_policy_config.py {directory}  (from a repository checkout).'
             if name == CONFIG else '')
      raise FileNotFoundError(f'{directory} is not a complete policy bundle: it has no {name} (a bundle holds the '
                              f'policy checkpoint, {CONFIG} and {INFO}).{fix}')
  with open(directory / INFO, encoding='utf-8') as f:
    info = json.load(f)
  prefix: Union[Path, str, None] = directory / f'model.ckpt-{info["step"]}' if 'step' in info else None
  if prefix is None or not Path(f'{prefix}.index').is_file():
    found = run_checkpoints.list_checkpoints(str(directory))
    if not found:
      raise FileNotFoundError(f'{directory} holds no policy checkpoint (model.ckpt-<step>.index).')
    prefix = found[-1][1]
  return directory, info, str(prefix)


def load_policy(task_or_dir: Union[str, os.PathLike[str]]) -> 'HiroPolicy':
  """Loads a trained HIRO policy -> `HiroPolicy`.

  Parses the bundle's config.gin (replacing this process's gin configuration, as run_eval.py does: the config is
  cleared with `gin.clear_config()` first, and stays parsed afterwards), builds the environment, the agents and the
  state preprocess from the bindings of `evaluate`, exactly as the evaluation does, and restores the policy
  checkpoint strictly by name (`uvf.checkpoints.restore_policy`: every variable there, nothing else). Policies
  loaded earlier keep working: each traces its `act` while its own configuration is parsed.

  Args:
    task_or_dir: one of `TASKS` (`bundle_dir(task)`), or a bundle directory (str or path).

  Raises:
    ValueError: an unknown task name; `uvf.checkpoints.CheckpointMismatchError` (a ValueError): a checkpoint of
      another configuration.
    FileNotFoundError: no such bundle, or it lacks config.gin, best_policy.json or the checkpoint.
  """
  directory, info, prefix = _bundle(task_or_dir)
  with gin.unlock_config():
    gin.clear_config()
    gin.parse_config_file(str(directory / CONFIG))
  settings = gin.get_bindings('evaluate')  # resolves the references: builds @create_maze_env() as evaluate gets it
  missing = [
      name for name in ('environment', 'agent_class', 'meta_agent_class', 'state_preprocess_class')
      if settings.get(name) is None
  ]
  if missing:
    raise ValueError(f'{directory / CONFIG} binds no evaluate.{", evaluate.".join(missing)}: it is not the config '
                     'of a HIRO policy (regenerate it with scripts/export_policy_config.py).')
  environment = settings['environment']
  meta_agent, uvf_agent, state_preprocess, _ = build.build_agents(environment, settings['agent_class'],
                                                                  settings['meta_agent_class'],
                                                                  settings['state_preprocess_class'],
                                                                  representation.InverseDynamics)
  counters = [
      tf.Variable(0, dtype=tf.int64, trainable=False, name=name)
      for name in ('global_step', 'num_episodes', 'num_resets')
  ]
  variables = build.policy_variables_by_tf1_name(uvf_agent, meta_agent, state_preprocess, *counters)
  restored = checkpoints.restore_policy(prefix, variables, known_configs=eval_lib.CONFIGS_BY_SHAPES)
  state_indices, relative = eval_results.task_state_indices(meta_agent.tf_context.context_specs[0].shape[0])
  mode = info.get('mode') or (settings.get('eval_modes') or ['eval'])[0]
  target = info.get('goal')
  if target is None:
    target = meta_agent.tf_context.sample_contexts(mode, 1)[0][0][0].numpy()
  details = {
      'task': info.get('task'),
      'bundle': str(directory),
      'checkpoint': restored,
      'step': int(counters[0].numpy()),
      'mode': mode,
      'target': [float(x) for x in target],
      'state_indices': state_indices,
      'relative_target': relative,
      'success_rate': info.get('success_rate'),
      'mean_final_distance': info.get('mean_final_distance'),
      'num_episodes': info.get('num_episodes'),
      'seed': info.get('seed'),
      'heldout': info.get('heldout'),
      'config_files': list(info.get('config_files') or []),
      'bindings': list(info.get('bindings') or [])
  }
  observation_dim = int(environment.observation_spec().shape[0])
  return HiroPolicy(meta_agent, uvf_agent, state_preprocess, observation_dim, target, details)


class HiroPolicy(tf.Module):
  """A restored HIRO policy (both levels) acting on one environment, one observation at a time.

  Build it with `load_policy`. Call `reset` at the start of each episode, then `act` with each observation the
  environment returns (the reset's first, then each step's).

  Args:
    meta_agent, uvf_agent, state_preprocess: as built by `uvf.build.build_agents`, the policy restored.
    observation_dim: D, the observation size (30 for AntMaze / AntPush / AntFall).
    target: float [M], the default task target (environment units; AntMaze (0, 16)).
    info: the `info` dict.
  """

  def __init__(self, meta_agent: Any, uvf_agent: Any, state_preprocess: Any, observation_dim: int,
               target: npt.ArrayLike, info: Mapping[str, Any]) -> None:
    super().__init__(name='hiro_policy')
    self._meta_agent, self._uvf_agent, self._state_preprocess = meta_agent, uvf_agent, state_preprocess
    self._low_context, self._meta_context = uvf_agent.tf_context, meta_agent.tf_context
    if len(self._low_context.vars) != 1 or len(self._meta_context.vars) != 1:
      raise ValueError('HiroPolicy needs one low-level context (the goal) and one meta context (the target).')
    if not self._low_context.meta_action_every_n or not self._low_context.has_transition:
      raise ValueError('HiroPolicy needs the low Context\'s meta_action_every_n and context_transition_fn.')
    spec = uvf_agent.action_spec
    self.action_low = np.asarray(spec.minimum, np.float32) * np.ones(spec.shape, np.float32)
    self.action_high = np.asarray(spec.maximum, np.float32) * np.ones(spec.shape, np.float32)
    self.observation_dim = int(observation_dim)
    self.goal_dim = int(self._low_context.context_specs[0].shape[0])
    self.target_dim = int(self._meta_context.context_specs[0].shape[0])
    self._default_target = self._check_target(target)
    self._info = json.dumps(dict(info))  # a string: tf.Module would wrap a dict's lists
    self._goal = tf.Variable(tf.zeros([self.goal_dim]), trainable=False, name='goal')
    self._target = tf.Variable(self._default_target, trainable=False, name='target')
    self._previous = tf.Variable(tf.zeros([self.observation_dim]), trainable=False, name='previous_observation')
    self._t = tf.Variable(0, dtype=tf.int32, trainable=False, name='step_count')
    self._act = tf.function(self._act_fn, input_signature=[tf.TensorSpec([self.observation_dim], tf.float32)])
    # Traced now, while this policy's gin configuration is the parsed one: gin-bound functions that the step calls
    # (the goal transition's k) read their bindings when traced, and a later load_policy replaces them.
    self._act.get_concrete_function()

  def _check_target(self, target: npt.ArrayLike) -> np.ndarray:
    value = np.asarray(target, np.float32)
    if value.shape != (self.target_dim,):
      raise ValueError(f'target must have shape [{self.target_dim}] (environment units), got {value.shape}.')
    return value

  def reset(self, target: Optional[npt.ArrayLike] = None) -> None:
    """Starts an episode: goal 0, step count 0, and the task target `target` (float [M], environment units, e.g.
    the (x, y) point to reach; None: the bundle's, `info['target']`: AntMaze (0, 16), AntPush (0, 19), AntFall
    (0, 27, 4.5)). The next `act` takes the episode's first observation s_0."""
    self._target.assign(self._default_target if target is None else self._check_target(target))
    self._goal.assign(tf.zeros([self.goal_dim]))
    self._previous.assign(tf.zeros([self.observation_dim]))
    self._t.assign(0)

  def act(self, observation: npt.ArrayLike) -> np.ndarray:
    """The deterministic action for `observation` -> np.ndarray float32 [A] (A = 8 for the ant, within its action
    bounds, [-30, 30] for the ant).

    Args:
      observation: float32 [D], the environment's observation: after `reset`, the reset's s_0, then the
        observation of each step, s_t. Except on the first call of an episode, the sub-goal first advances from
        s_{t-1} to s_t (the meta policy on (s_t, target) every c-th step, else the goal transition), then the
        low-level policy acts on (s_t, goal).
    """
    return self._act(np.asarray(observation, np.float32)).numpy()

  def _act_fn(self, observation: tf.Tensor) -> tf.Tensor:
    """One step in the graph: observation float32 [D] -> action float32 [A]; updates goal, target, step count. The
    networks compute a batch of one row (see the module docstring)."""
    obs = observation[None]
    t = self._t.read_value()

    def advance() -> Tuple[tf.Tensor, tf.Tensor]:
      previous = self._previous.read_value()[None]
      goals, targets = rollout.next_goals(self._low_context, self._meta_context, self._meta_agent,
                                          self._goal.read_value()[None],
                                          self._target.read_value()[None], t - 1, previous, obs,
                                          self._state_preprocess(previous), self._state_preprocess(obs))
      return goals, tf.cast(targets, tf.float32)

    goals, targets = tf.cond(t > 0, advance, lambda: (self._goal.read_value()[None], self._target.read_value()[None]))
    actions = tf.clip_by_value(self._uvf_agent.actions(obs, [goals]), self.action_low, self.action_high)
    self._goal.assign(goals[0])
    self._target.assign(targets[0])
    self._previous.assign(observation)
    self._t.assign_add(1)
    return actions[0]

  @property
  def act_function(self) -> Any:
    """The `tf.function` each `act` calls once (its `experimental_get_tracing_count()` stays 1)."""
    return self._act

  @property
  def agents(self) -> Tuple[Any, Any, Any]:
    """(meta_agent, uvf_agent, state_preprocess), as `uvf.build.build_agents` returns them."""
    return self._meta_agent, self._uvf_agent, self._state_preprocess

  @property
  def goal(self) -> np.ndarray:
    """np.ndarray float32 [G]: the current sub-goal g, relative to the state (G = 15 for hiro_orig: a desired change
    of s[:15], the first two entries in environment distance units (x, y)); 0 before the first goal of an episode.
    The point it aims at is observation[:2] + goal[:2]."""
    return self._goal.numpy()

  @property
  def target(self) -> np.ndarray:
    """np.ndarray float32 [M]: the task target T (environment units)."""
    return self._target.numpy()

  @property
  def step_count(self) -> int:
    """int: the `act` calls since the last `reset`."""
    return int(self._t.numpy())

  @property
  def info(self) -> Dict[str, Any]:
    """dict: 'task', 'bundle', 'checkpoint', 'step' (the checkpoint's global step), 'mode', 'target' (the default
    one), 'state_indices' (the observation entries the target is compared with: the success is
    ||observation[state_indices] - target|| < `uvf.protocol.SUCCESS_DISTANCE` at the episode's end),
    'relative_target' (False but for the *_img configurations), the recorded evaluation ('success_rate',
    'mean_final_distance', 'num_episodes': the selection's), 'seed' (the training seed), 'heldout' (its evaluation on
    held-out start states: 'success_rate', 'mean_final_distance', 'num_episodes', 'eval_seed'; None where the bundle
    has none), 'config_files' and 'bindings' (those config.gin was flattened from)."""
    return json.loads(self._info)
