"""Maze layouts, movable-block kinds and the ray geometry of the range sensors (original: rllab maze_env_utils.py).

A maze is a list of rows; row i = 0 is the first row of the grid. Each cell is one of:
  1        an immovable wall block,
  0        free floor,
  'r'      free floor where the robot starts,
  -1       a chasm (no floor platform; only in elevated mazes),
  Move.*   a movable block (its integer code names the axes it can slide along, or that it can spin).
The world centre of cell (i, j) is (j * s - torso_x, i * s - torso_y), with s the maze size scaling and
(torso_x, torso_y) = (j_r * s, i_r * s) for the robot's cell (i_r, j_r), so the robot starts at the origin.
"""

import math


class Move:
  """Codes of the movable blocks: the axes along which each can slide; `SpinXY` also rotates freely (ball joint)."""
  X = 11
  Y = 12
  Z = 13
  XY = 14
  XZ = 15
  YZ = 16
  XYZ = 17
  SpinXY = 18


_MOVES_X = (Move.X, Move.XY, Move.XZ, Move.XYZ, Move.SpinXY)
_MOVES_Y = (Move.Y, Move.XY, Move.YZ, Move.XYZ, Move.SpinXY)
_MOVES_Z = (Move.Z, Move.XZ, Move.YZ, Move.XYZ)


def _is_move(cell, moves):
  # Compare by type first: the robot marker 'r' must not be compared with integers by value only.
  return isinstance(cell, int) and cell in moves


def can_move_x(cell):
  """Whether a cell holds a block that slides along x."""
  return _is_move(cell, _MOVES_X)


def can_move_y(cell):
  """Whether a cell holds a block that slides along y."""
  return _is_move(cell, _MOVES_Y)


def can_move_z(cell):
  """Whether a cell holds a block that can fall (slides along z)."""
  return _is_move(cell, _MOVES_Z)


def can_spin(cell):
  """Whether a cell holds a block with a ball joint (spins freely)."""
  return _is_move(cell, (Move.SpinXY,))


def can_move(cell):
  """Whether a cell holds a movable block of any kind."""
  return can_move_x(cell) or can_move_y(cell) or can_move_z(cell)


_R = 'r'

# The layouts of the original, as data. Tuples, so that no caller can change them.
_MAZES = {
    # U-shaped corridor: from the start, right two cells, down two rows, back left.
    'Maze': (
        (1, 1, 1, 1, 1),
        (1, _R, 0, 0, 1),
        (1, 1, 1, 0, 1),
        (1, 0, 0, 0, 1),
        (1, 1, 1, 1, 1),
    ),
    # An XY block below the start blocks the way to the target at (0, 19); push it aside.
    'Push': (
        (1, 1, 1, 1, 1),
        (1, 0, _R, 1, 1),
        (1, 0, Move.XY, 0, 1),
        (1, 1, 0, 1, 1),
        (1, 1, 1, 1, 1),
    ),
    # Elevated: push the YZ block into the chasm row (-1) to cross it to the target at (0, 27, 4.5).
    'Fall': (
        (1, 1, 1, 1),
        (1, _R, 0, 1),
        (1, 0, Move.YZ, 1),
        (1, -1, -1, 1),
        (1, 0, 0, 1),
        (1, 1, 1, 1),
    ),
    # Open 3 x 3 room (a small spinning block is placed next to the robot by `put_spin_near_agent`).
    'Block': (
        (1, 1, 1, 1, 1),
        (1, _R, 0, 0, 1),
        (1, 0, 0, 0, 1),
        (1, 0, 0, 0, 1),
        (1, 1, 1, 1, 1),
    ),
    # Small U-maze (spinning block next to the robot, as for 'Block').
    'BlockMaze': (
        (1, 1, 1, 1),
        (1, _R, 0, 1),
        (1, 1, 0, 1),
        (1, 0, 0, 1),
        (1, 1, 1, 1),
    ),
}

MAZE_IDS = tuple(_MAZES)


def construct_maze(maze_id='Maze'):
  """The layout `maze_id` as a list of row lists (a fresh copy). Raises ValueError for an unknown id."""
  if maze_id not in _MAZES:
    raise ValueError(f'Unknown maze id {maze_id!r}; valid maze ids: {", ".join(MAZE_IDS)}.')
  return [list(row) for row in _MAZES[maze_id]]


def line_intersect(pt1, pt2, pt_a, pt_b):
  """Intersection of the line through pt1, pt2 with the line through pt_a, pt_b.

  Returns (x, y, valid, r, s): the point, 1 if the lines are not parallel (else all zeros), and the parameters
  along each line (pt1 + r * (pt2 - pt1) = pt_a + s * (pt_b - pt_a)).
  """
  x1, y1 = pt1
  dx1, dy1 = pt2[0] - x1, pt2[1] - y1
  xa, ya = pt_a
  dxa, dya = pt_b[0] - xa, pt_b[1] - ya
  det = dy1 * dxa - dx1 * dya
  if math.fabs(det) < 1e-8:
    return (0, 0, 0, 0, 0)
  r = (dxa * (ya - y1) - dya * (xa - x1)) / det
  s = (dx1 * (ya - y1) - dy1 * (xa - x1)) / det
  # The mean of the two (equal up to rounding) parametrisations, as the original.
  x = (x1 + r * dx1 + xa + s * dxa) / 2.0
  y = (y1 + r * dy1 + ya + s * dya) / 2.0
  return (x, y, 1, r, s)


def ray_segment_intersect(ray, segment):
  """Where the ray ((x, y), theta) meets the segment ((x1, y1), (x2, y2)), or None. theta in radians."""
  (x, y), theta = ray
  xo, yo, valid, r, s = line_intersect((x, y), (x + math.cos(theta), y + math.sin(theta)), *segment)
  if valid and r >= 0 and 0 <= s <= 1:
    return (xo, yo)
  return None


def point_distance(p1, p2):
  """Euclidean distance between two 2-d points."""
  return math.hypot(p1[0] - p2[0], p1[1] - p2[1])
