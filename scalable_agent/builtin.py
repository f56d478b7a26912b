"""Built-in backend of the IMPALA environments: tiny grid tasks drawn in NumPy, "go to the <colour>" (level names
`builtin/<task>`, `BUILTIN_TASKS`; docs/impala/environments.md gives each task's random and optimal returns)."""

import collections
from typing import Any, List, Tuple

import numpy as np

from scalable_agent import environment_specs

LEVEL_PREFIX = 'builtin/'

# Object colours of the built-in tasks (name -> RGB), in the order of their index; the agent is white.
BUILTIN_COLORS = collections.OrderedDict([('red', (255, 0, 0)), ('green', (0, 255, 0)), ('blue', (0, 0, 255)),
                                          ('yellow', (255, 255, 0))])
BUILTIN_AGENT_COLOR = (255, 255, 255)
# Grid moves of the built-in tasks' actions: (row, column) deltas for up, down, left, right.
BUILTIN_MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))
BUILTIN_ACTION_NAMES = ('up', 'down', 'left', 'right')

BuiltinTask = collections.namedtuple('BuiltinTask', ['grid_size', 'num_objects', 'max_moves'])
# name -> task; docs/impala/environments.md gives each task's random, instruction-blind and optimal returns.
BUILTIN_TASKS = collections.OrderedDict([
    # Reactive: one object; the instruction names its colour but carries no choice. Learnt in minutes on a CPU.
    ('find_object', BuiltinTask(grid_size=5, num_objects=1, max_moves=8)),
    # The instruction matters: two objects, reward +1 for the named one and -1 for the other. Much slower to learn.
    ('go_to_color', BuiltinTask(grid_size=3, num_objects=2, max_moves=10)),
])


def check_task(task):
  if task not in BUILTIN_TASKS:
    raise ValueError(f'unknown built-in level {LEVEL_PREFIX + task!r}. Built-in levels: '
                     f'{", ".join(LEVEL_PREFIX + name for name in BUILTIN_TASKS)}.')


class BuiltinEnvironment:
  """A tiny grid task drawn in NumPy with an instruction "go to the <colour>" (`BUILTIN_TASKS`).

  An episode: a grid of grid_size x grid_size cells holds the agent (white) and `num_objects` objects of distinct
  colours (from `BUILTIN_COLORS`), all in distinct random cells; the instruction names the colour of one of them,
  e.g. 'go to the red'. Moves (actions up, down, left, right) that would leave the grid leave the agent where it is.
  Entering the named object's cell gives reward +1, another object's cell -1; either ends the episode, and so does
  the `max_moves`-th move without reaching an object (reward 0). Episode returns are in {-1, 0, +1}; an optimal
  policy always gets +1. With two objects (`go_to_color`) a policy that ignores the instruction gets 0 on average;
  with one (`find_object`) the task is reactive. Random and optimal returns: docs/impala/environments.md.

  One `step` is `num_action_repeats` moves with the same action (stopping when the episode ends), so with
  num_action_repeats = 1 one agent step is one move and the frame counters count moves. The frame is the grid scaled
  to [height, width] (nearest cell), black background. Deterministic given `seed`; test mode (`is_test`) draws the
  episodes from another stream of the same distribution (the seed is mixed with DMLab's test `mixerSeed`).
  """

  def __init__(self, task, width=environment_specs.DEFAULT_WIDTH, height=environment_specs.DEFAULT_HEIGHT,
               num_action_repeats=1, seed=1, is_test=False):
    """Builds the task.

    Args:
      task: a key of `BUILTIN_TASKS`.
      width, height: frame size in pixels, at least the grid size.
      num_action_repeats: moves per agent step (>= 1).
      seed: seed of the episodes (layouts and instructions).
      is_test: draw the episodes from the test stream.

    Raises:
      ValueError: an unknown task or a bad setting.
    """
    check_task(task)
    self._task = BUILTIN_TASKS[task]
    size = self._task.grid_size
    if width < size or height < size or num_action_repeats < 1:
      raise ValueError(f'built-in level {task!r} needs width and height >= {size} and num_action_repeats >= 1; got '
                       f'{width}x{height}, num_action_repeats={num_action_repeats}.')
    self._num_action_repeats = num_action_repeats
    self._random_state = np.random.RandomState(seed=(seed ^ environment_specs.TEST_MIXER_SEED) if is_test else seed)
    self._rows = (np.arange(height) * size) // height  # Grid row of each pixel row.
    self._columns = (np.arange(width) * size) // width
    self._palette = np.array([(0, 0, 0), BUILTIN_AGENT_COLOR] + list(BUILTIN_COLORS.values()), dtype=np.uint8)
    self._colour_names = list(BUILTIN_COLORS)
    self._grid = np.zeros((size, size), np.int64)  # Palette index per cell: 0 empty, 1 agent, 2 + c colour c.
    self._agent: Any = None
    self._target = None
    self._moves = 0
    self._instruction = ''

  def _reset(self):
    size, num_objects = self._task.grid_size, self._task.num_objects
    cells = self._random_state.choice(size * size, num_objects + 1, replace=False)
    colours = self._random_state.choice(len(self._colour_names), num_objects, replace=False)
    target = self._random_state.randint(num_objects)
    self._grid[:] = 0
    self._agent = divmod(int(cells[0]), size)
    self._grid[self._agent] = 1
    for cell, colour in zip(cells[1:], colours):
      self._grid[divmod(int(cell), size)] = 2 + colour
    self._target = 2 + colours[target]
    self._instruction = f'go to the {self._colour_names[colours[target]]}'
    self._moves = 0

  def _observation(self):
    return self._palette[self._grid[self._rows[:, None], self._columns[None, :]]], self._instruction

  def _move(self, action):
    """One move. Returns (reward, done)."""
    size = self._task.grid_size
    row = min(max(self._agent[0] + BUILTIN_MOVES[action][0], 0), size - 1)
    column = min(max(self._agent[1] + BUILTIN_MOVES[action][1], 0), size - 1)
    self._moves += 1
    cell = self._grid[row, column]
    if cell >= 2:
      return (1. if cell == self._target else -1.), True
    self._grid[self._agent] = 0
    self._agent = (row, column)
    self._grid[self._agent] = 1
    return 0., self._moves >= self._task.max_moves

  def initial(self):
    """Starts an episode. Returns (frame uint8 [height, width, 3], instruction str)."""
    self._reset()
    return self._observation()

  def step(self, action):
    """One agent step: `num_action_repeats` moves in the direction `action` (0 up, 1 down, 2 left, 3 right).

    Returns:
      (reward float32 [], done bool [], observation); when done, the observation is the next episode's first.
    """
    action = environment_specs.check_action(action, len(BUILTIN_MOVES))
    reward, done = 0., False
    for _ in range(self._num_action_repeats):
      move_reward, done = self._move(action)
      reward += move_reward
      if done:
        self._reset()
        break
    return np.array(reward, dtype=np.float32), np.array(done), self._observation()

  def optimal_action(self, colour=None):
    """An action of an optimal policy towards the object of `colour` (default: the named one), around the others;
    for tests and baselines."""
    size = self._task.grid_size
    target = self._target if colour is None else 2 + self._colour_names.index(colour)
    goal = tuple(int(i) for i in np.argwhere(self._grid == target)[0])
    # Breadth-first search from the goal over cells that hold no other object.
    distance = np.full((size, size), np.inf)
    distance[goal] = 0
    frontier = [goal]
    while frontier:
      next_frontier: List[Tuple[int, ...]] = []
      for r, c in frontier:
        for dr, dc in BUILTIN_MOVES:
          cell = (r + dr, c + dc)
          if (0 <= cell[0] < size and 0 <= cell[1] < size and distance[cell] == np.inf and (self._grid[cell] <= 1)):
            distance[cell] = distance[r, c] + 1
            next_frontier.append(cell)
      frontier = next_frontier
    best, best_distance = 0, np.inf
    for action, (dr, dc) in enumerate(BUILTIN_MOVES):
      cell = (min(max(self._agent[0] + dr, 0), size - 1), min(max(self._agent[1] + dc, 0), size - 1))
      if distance[cell] < best_distance:
        best, best_distance = action, distance[cell]
    return best

  @property
  def num_actions(self):
    return len(BUILTIN_MOVES)

  @property
  def agent_cell(self):
    """(row, column) of the agent in the grid."""
    return self._agent

  @property
  def object_cells(self):
    """{colour name: (row, column)} of the objects in the grid."""
    return {
        self._colour_names[index - 2]: (int(row), int(column))
        for (row, column), index in np.ndenumerate(self._grid)
        if index >= 2
    }

  @property
  def moves(self):
    """Moves made in the current episode (num_action_repeats per agent step, fewer if it ended)."""
    return self._moves

  def close(self):
    pass

  @staticmethod
  def _num_actions(unused_constructor_kwargs):
    return len(BUILTIN_MOVES)

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step')."""
    return environment_specs.method_specs(method_name, constructor_kwargs.get('height',
                                                                              environment_specs.DEFAULT_HEIGHT),
                                          constructor_kwargs.get('width', environment_specs.DEFAULT_WIDTH))
