"""How well can a policy do on BabyAI GoTo levels without reading the instruction? Scripted reference policies.

For BabyAI-GoToLocal-v0 and BabyAI-GoToRedBallGrey-v0 (minigrid 3.2.0; single 8x8 room, max_steps = 64, reward
1 - 0.9 * step_count / max_steps on success, else 0), this measures the success rate (success = episode return > 0),
the mean episode return and the mean episode length of three scripted policies acting through the real environment
(`gymnasium.make(level)`, `env.reset(seed=i)` for i = 0..N-1, `env.step(action)`):

  random  uniform random actions over the 7 actions (its own generator, seeded with the episode's seed).
  blind   an instruction-blind oracle: it sees the full grid (`env.unwrapped.grid`, `agent_pos`, `agent_dir`) but not
          the mission. It visits the room's objects (keys, balls, boxes) one after another, each time by a shortest
          path to face the nearest object not yet checked, until the episode ends. GoTo levels succeed as soon as the
          agent faces a matching object after any action (minigrid's GoToInstr checks the cell in front of the
          agent), so every object the agent has faced without the episode ending is known not to match, and so is
          every other object of the same type and colour (the instruction names a type and a colour): those are
          skipped. This is roughly the best a policy that ignores the instruction can do; it is not a proven bound
          (the greedy nearest-first order is not an optimal tour).
  oracle  knows the mission: the target objects are those matching the instruction's description
          (`env.unwrapped.instrs.desc.obj_poss`); it goes by a shortest path to face the nearest one. This is the
          optimal-policy reference (the shortest path is optimal, so its return is the best achievable).

Shortest paths are breadth-first searches over agent states (x, y, direction) with the actions left (0), right (1)
and forward (2); only empty cells are walkable (objects, walls and doors are obstacles); a goal state faces the object.
An agent that starts already facing an object checks it with a blocked `forward` (it stays put and still faces it).

Usage (prints a markdown table; each policy runs `--episodes` episodes per level):

  python scripts/babyai_blind_ceiling.py [--episodes 1000] [--levels BabyAI-GoToLocal-v0 BabyAI-GoToRedBallGrey-v0]
"""

import argparse
import collections
import contextlib
import io
import math
import time

import gymnasium
import minigrid  # noqa: F401  (registers the BabyAI levels)
from minigrid.core.constants import DIR_TO_VEC
import numpy as np

LEVELS = ('BabyAI-GoToLocal-v0', 'BabyAI-GoToRedBallGrey-v0')
POLICIES = ('random', 'blind', 'oracle')
LEFT, RIGHT, FORWARD = 0, 1, 2
NUM_ACTIONS = 7
OBJECT_TYPES = ('key', 'ball', 'box')


def front(x, y, d):
  """The cell in front of an agent at (x, y) facing direction d."""
  dx, dy = DIR_TO_VEC[d]
  return x + int(dx), y + int(dy)


def walkable(grid, x, y):
  """Whether the agent can step onto cell (x, y): an empty (or overlappable) cell inside the grid."""
  if not (0 <= x < grid.width and 0 <= y < grid.height):
    return False
  cell = grid.get(x, y)
  return cell is None or cell.can_overlap()


def first_action_to_face(grid, start, targets):
  """(first action, path length) of a shortest path from state start = (x, y, d) to a state facing a cell in
  targets (a set of (x, y)); (None, 0) when start already faces one, None when no target can be faced."""
  if front(*start) in targets:
    return None, 0
  first = {start: None}
  queue = collections.deque([(start, 0)])
  while queue:
    (x, y, d), length = queue.popleft()
    for action in (LEFT, RIGHT, FORWARD):
      if action == LEFT:
        nxt = (x, y, (d - 1) % 4)
      elif action == RIGHT:
        nxt = (x, y, (d + 1) % 4)
      else:
        fx, fy = front(x, y, d)
        if not walkable(grid, fx, fy):
          continue
        nxt = (fx, fy, d)
      if nxt in first:
        continue
      first[nxt] = action if first[(x, y, d)] is None else first[(x, y, d)]
      if front(*nxt) in targets:
        return first[nxt], length + 1
      queue.append((nxt, length + 1))
  return None


def room_objects(grid):
  """{(x, y): (type, color)} of the grid's keys, balls and boxes."""
  objects = {}
  for x in range(grid.width):
    for y in range(grid.height):
      cell = grid.get(x, y)
      if cell is not None and cell.type in OBJECT_TYPES:
        objects[(x, y)] = (cell.type, cell.color)
  return objects


class RandomPolicy:
  """Uniform random actions over the 7 actions."""

  def __init__(self, seed):
    self.rng = np.random.default_rng(seed)

  def act(self, env):
    del env
    return int(self.rng.integers(NUM_ACTIONS))


class FacingPolicy:
  """Goes by shortest paths to face the nearest cell of a candidate set (subclasses say which cells)."""

  def candidates(self, env):
    raise NotImplementedError

  def act(self, env):
    base = env.unwrapped
    start = (int(base.agent_pos[0]), int(base.agent_pos[1]), int(base.agent_dir))
    plan = first_action_to_face(base.grid, start, self.candidates(env))
    if plan is None:
      self.stuck = True
      return FORWARD
    action, _ = plan
    return FORWARD if action is None else action  # None: already facing one, a blocked forward checks it


class OraclePolicy(FacingPolicy):
  """Faces the nearest object that matches the instruction (read from the environment)."""

  def __init__(self):
    self.stuck = False

  def candidates(self, env):
    return {(int(x), int(y)) for x, y in env.unwrapped.instrs.desc.obj_poss}


class BlindPolicy(FacingPolicy):
  """Faces the nearest object whose (type, colour) it has not yet checked; never reads the instruction."""

  def __init__(self):
    self.stuck = False
    self.checked = set()  # (type, colour) descriptions already faced without the episode ending

  def observe(self, env):
    """After an action: the object in front, if any, is not the target (else the episode would have ended)."""
    base = env.unwrapped
    cell = base.grid.get(*base.front_pos)
    if cell is not None and cell.type in OBJECT_TYPES:
      self.checked.add((cell.type, cell.color))

  def candidates(self, env):
    return {pos for pos, desc in room_objects(env.unwrapped.grid).items() if desc not in self.checked}


def run_episode(env, policy_name, seed):
  """(return, length, stuck) of one episode of a policy on env reset with seed."""
  with contextlib.redirect_stdout(io.StringIO()):  # minigrid prints its rejected samples ("Sampling rejected: ...")
    env.reset(seed=seed)
  if policy_name == 'random':
    policy = RandomPolicy(seed)
  elif policy_name == 'blind':
    policy = BlindPolicy()
  else:
    policy = OraclePolicy()
  episode_return, length, done = 0.0, 0, False
  while not done:
    _, reward, terminated, truncated, _ = env.step(policy.act(env))
    episode_return += float(reward)
    length += 1
    done = terminated or truncated
    if policy_name == 'blind' and not done:
      policy.observe(env)
  return episode_return, length, getattr(policy, 'stuck', False)


def wilson_half_width(successes, n, z=1.96):
  """Half the width of the 95% Wilson score interval for a binomial proportion (as a fraction)."""
  if n == 0:
    return float('nan')
  p = successes / n
  denom = 1 + z * z / n
  return z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom


def evaluate(level, policy_name, episodes):
  """Summary dict of a policy over seeds 0..episodes-1 on a level."""
  env = gymnasium.make(level)
  returns, lengths, stuck = [], [], 0
  for seed in range(episodes):
    episode_return, length, was_stuck = run_episode(env, policy_name, seed)
    returns.append(episode_return)
    lengths.append(length)
    stuck += was_stuck
  env.close()
  successes = sum(r > 0 for r in returns)
  return {
      'level': level,
      'policy': policy_name,
      'episodes': episodes,
      'success': 100.0 * successes / episodes,
      'half_width': 100.0 * wilson_half_width(successes, episodes),
      'return': float(np.mean(returns)),
      'length': float(np.mean(lengths)),
      'max_steps': env.unwrapped.max_steps,
      'stuck': stuck,
  }


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
  parser.add_argument('--episodes', type=int, default=1000, help='episodes (seeds 0..N-1) per level and policy')
  parser.add_argument('--levels', nargs='+', default=list(LEVELS), help='BabyAI level ids')
  args = parser.parse_args()

  rows = []
  for level in args.levels:
    for policy_name in POLICIES:
      started = time.time()
      rows.append(evaluate(level, policy_name, args.episodes))
      rows[-1]['seconds'] = time.time() - started

  print('| level | policy | episodes | success rate (%) | 95% CI half-width (pp) | mean return | mean length (steps) |')
  print('|---|---|---|---|---|---|---|')
  for row in rows:
    print(f"| {row['level']} | {row['policy']} | {row['episodes']} | {row['success']:.1f} | {row['half_width']:.1f} | "
          f"{row['return']:.3f} | {row['length']:.1f} |")
  print()
  print('max_steps: ' + ', '.join(sorted({f"{row['level']} {row['max_steps']}" for row in rows})) +
        '. CI: Wilson score interval. Success = episode return > 0.')
  stuck = [row for row in rows if row['stuck']]
  for row in stuck:
    print(f"warning: {row['policy']} on {row['level']}: no object could be faced in {row['stuck']} episodes")
  print('seconds: ' + ', '.join(f"{row['level']}/{row['policy']} {row['seconds']:.1f}" for row in rows))


if __name__ == '__main__':
  main()
