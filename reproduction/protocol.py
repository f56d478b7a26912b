"""HIRO's Table 1 protocol, the paper's results, and the protocol of a gin configuration.

The protocol (HIRO, Nachum et al., NeurIPS 2018, Table 1 and Appendices B-C; `docs/hiro/reproduction.md`): per task,
10 seeds train for 10M environment steps; a policy checkpoint every 50,000 steps is evaluated on 50 deterministic
500-step episodes at the task's target; success = the distance to the target at the last step is below 5 (3-D for
AntFall). Table 1 reports, per task, the success rate of the **best policy seen within 10M steps**, mean +- standard
error over the seeds; the paper's Figure 4 shows the mean learning curves.

Units: steps are environment steps (the global step of a policy checkpoint); success rates are fractions in [0, 1];
distances are maze units.
"""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import gin

from uvf import protocol as uvf_protocol

# The paper's protocol.
PAPER_STEPS = 10_000_000  # the Table 1 budget: best policy seen within this many environment steps
PAPER_SEEDS = 10
PAPER_EVAL_EVERY = 50_000  # environment steps between evaluated policy checkpoints
PAPER_EVAL_EPISODES = 50  # episodes per evaluation


@dataclasses.dataclass(frozen=True)
class PaperResult:
  """One task's HIRO row of Table 1: success of the best policy within `steps`, mean +- s.e. over `seeds`."""
  task: str  # create_maze_env.env_name
  target: Tuple[float, ...]  # the evaluation target (x, y) or (x, y, z), maze units
  success: float  # fraction in [0, 1]
  standard_error: float
  steps: int = PAPER_STEPS
  seeds: int = PAPER_SEEDS


PAPER_TABLE1 = {
    'AntMaze': PaperResult('AntMaze', (0.0, 16.0), 0.99, 0.01),
    'AntPush': PaperResult('AntPush', (0.0, 19.0), 0.92, 0.04),
    'AntFall': PaperResult('AntFall', (0.0, 27.0, 4.5), 0.66, 0.07),
}


@dataclasses.dataclass(frozen=True)
class Protocol:
  """What a configuration trains and evaluates, as the kit needs it.

  Attributes:
    task: `create_maze_env.env_name` (AntMaze, AntPush, ...).
    modes: `evaluate.eval_modes`, in order.
    goals: {mode: the target of its ConstantSampler} (None for a mode whose sampler is not constant).
    primary_mode: the mode of the headline numbers: the one at the paper's target, else the one chosen.
    max_steps_per_episode: T of training (`train_uvf.max_steps_per_episode`, 500), environment steps.
    eval_episodes: `evaluate.num_episodes_eval` of the configuration.
    paper: the task's `PaperResult`, or None (no Table 1 entry).
  """
  task: str
  modes: Tuple[str, ...]
  goals: Dict[str, Optional[List[float]]]
  primary_mode: str
  max_steps_per_episode: int
  eval_episodes: int
  paper: Optional[PaperResult] = None

  def to_json(self) -> Dict[str, Any]:
    out = dataclasses.asdict(self)
    out['modes'] = list(self.modes)
    return out

  @classmethod
  def from_json(cls, data: Mapping[str, Any]) -> 'Protocol':
    data = dict(data)
    paper = data.pop('paper', None)
    if paper:
      paper = PaperResult(**dict(paper, target=tuple(paper['target'])))
    return cls(paper=paper, **dict(data, modes=tuple(data['modes'])))


def _resolve(value: Any) -> Any:
  """A queried gin value with its %MACRO references (also in lists / tuples / dicts) replaced by their values."""
  if isinstance(value, gin.config.ConfigurableReference) and value.selector == 'gin.macro':
    return _resolve(gin.query_parameter('%' + '/'.join(value.scopes)))
  if isinstance(value, (list, tuple)):
    return type(value)(_resolve(v) for v in value)
  if isinstance(value, dict):
    return {k: _resolve(v) for k, v in value.items()}
  return value


def _query(name: str, default: Any = None) -> Any:
  try:
    return _resolve(gin.query_parameter(name))
  except ValueError:
    return default


def same_point(a: Optional[Sequence[float]], b: Sequence[float], tolerance: float = 1e-6) -> bool:
  """Whether the points (sequences of numbers) `a` and `b` agree to `tolerance` in every coordinate; False if `a`
  is None or their lengths differ."""
  return a is not None and len(a) == len(b) and all(abs(float(x) - float(y)) < tolerance for x, y in zip(a, b))


def protocol_from_gin(primary_mode: Optional[str] = None) -> Protocol:
  """The `Protocol` of the parsed (not necessarily finalised) gin configuration.

  Args:
    primary_mode: None (the mode at the paper's target; for a task without one, the last eval mode, as AntMaze's
      paper goal (0, 16) is its last) or an eval mode.

  Raises:
    ValueError: not a HIRO configuration, an unknown `primary_mode`, or a Table 1 task whose eval modes miss the
      paper's target; the message names the fix.
  """
  task = _query('create_maze_env.env_name')
  modes = _query('evaluate.eval_modes')
  steps = _query('train_uvf.max_steps_per_episode')
  if not task or not modes or not steps:
    raise ValueError('not a HIRO task configuration: it binds no create_maze_env.env_name, evaluate.eval_modes or '
                     'train_uvf.max_steps_per_episode (use a top-level HIRO config such as configs/ant_maze.gin).')
  modes = tuple(modes)
  samplers = _query('meta/Context.samplers', {}) or {}
  goals: Dict[str, Optional[List[float]]] = {}
  for mode in modes:
    refs = samplers.get(mode) or [None]
    ref = refs[0]
    goal = None
    if isinstance(ref, gin.config.ConfigurableReference) and ref.selector == 'ConstantSampler':
      goal = _query(f'{ref.scoped_selector}.value')
    goals[mode] = [float(v) for v in goal] if goal is not None else None
  paper = PAPER_TABLE1.get(task)
  if primary_mode is not None:
    if primary_mode not in modes:
      raise ValueError(f'--mode {primary_mode}: the configuration evaluates the modes {list(modes)} '
                       '(evaluate.eval_modes); choose one of them.')
  elif paper is not None:
    matching = [m for m in modes if same_point(goals[m], paper.target)]
    if not matching:
      raise ValueError(f'{task}: none of the eval modes {list(modes)} (goals {goals}) is the paper\'s target '
                       f'{list(paper.target)}; add the mode to EVAL_MODES or choose one with --mode.')
    primary_mode = matching[0]
  else:
    primary_mode = modes[-1]
  episodes = int(_query('evaluate.num_episodes_eval', PAPER_EVAL_EPISODES))
  return Protocol(task=task, modes=modes, goals=goals, primary_mode=primary_mode, max_steps_per_episode=int(steps),
                  eval_episodes=episodes, paper=paper)


# ----------------------------------------------------------------------------------------------------------------------
# Budgets: --steps N <-> train_uvf.num_episodes_train.


def num_episodes_for_steps(steps: int, max_steps_per_episode: int) -> int:
  """`train_uvf.num_episodes_train` for a run of at least `steps` environment steps: ceil(steps / T).

  The run then stops at `run_length(...)` = num_episodes x T + 100 steps (3,000,000 steps, T = 500: 6000 episodes,
  3,000,100 steps).
  """
  if steps < 1 or max_steps_per_episode < 1:
    raise ValueError(f'steps ({steps}) and max_steps_per_episode ({max_steps_per_episode}) must be positive.')
  return -(-int(steps) // int(max_steps_per_episode))


def run_length(num_episodes: int, max_steps_per_episode: int) -> int:
  """The global step at which train_uvf stops: num_episodes x T + 100 (environment steps)."""
  return int(num_episodes) * int(max_steps_per_episode) + uvf_protocol.EXTRA_STEPS
