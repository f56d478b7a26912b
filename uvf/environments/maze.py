"""The maze world around a robot, without TensorFlow (original: efficient-hrl environments/maze_env.py, adapted there
from rllab). `maze_env.MazeEnv` wraps it as a tf-agents `PyEnvironment` for HIRO's training and evaluation;
`gymnasium_env.HiroMazeEnv` as a Gymnasium environment.

Construction. The robot's XML (`assets/<MODEL_CLASS.FILE>`) is parsed and the maze is added to its worldbody. With
s = `maze_size_scaling` (8 for the ant, 4 for the point) and h = `maze_height` (0.5), cell (i, j) of the layout
(`maze_env_utils.construct_maze`) is centred at (j * s - torso_x, i * s - torso_y), where (torso_x, torso_y) is the
robot cell's (j * s, i * s), so the robot starts at the origin. All lengths are MuJoCo length units.
  * wall (1): box geom `block_i_j`, half-size (s/2, s/2, h*s/2), centre z = height_offset + h*s/2, grey;
  * chasm (-1): if any, the maze is elevated: height_offset = h*s, every non-chasm cell gets a platform box
    `elevated_i_j` (half-size (s/2, s/2, h*s/2), centre z = h*s/2, top at z = h*s) and the torso starts at
    z = 0.75 + h*s;
  * movable block (Move.*): body `movable_i_j` holding box geom `block_i_j` (red). Falling (z-movable) blocks are
    shrunk x0.99 in x and y and weigh 0.001; spinning blocks are shrunk x0.1 (height too), shifted by +s/4 in x and
    weigh 0.0002, as do the other blocks. Joints: slides `movable_x_i_j` / `movable_y_i_j` (range +-s, limited only
    for falling blocks), `movable_z_i_j` (range [-height_offset, 0]), ball `spinable_i_j`. With any movable block the
    default geom solimp becomes (.995, .995, .01), for better contact detection.
  * with `put_spin_near_agent`, the robot cell also holds a small spinning block (SpinXY).

Observation (float32, in this order): the robot's observation (ant: qpos[:15], qvel[:14]; point: qpos[:3], qvel[:3])
with, if `observe_blocks`, each movable block's position (x, y, z) inserted after its first 3 values; then the range
sensors (n_bins x 3: wall, chasm, block; 0 = nothing within range, 1 = touching) if n_bins > 0; then the 5 x 5 x 3
top-down view (walls, chasms, movable blocks around the robot) if `top_down_view`; last, the time t * 0.001 (t = env
steps since reset). The maze never ends an episode; HIRO's training loop cuts episodes at 500 steps.

Seeding: the reset noise comes from a `np.random.Generator`; `Maze(seed=s)` or `maze.seed(s)` (then `restart()`)
make the following trajectory a function of the actions only. `seed=None` draws fresh OS entropy, like gym's
unseeded environments.
"""

import atexit
import math
import os
from typing import Any, Dict, List, Optional, Tuple, Type
import weakref
import xml.etree.ElementTree as ET

import mujoco
import numpy as np

from uvf.environments import maze_env_utils
from uvf.environments import mujoco_env
from uvf.environments import rendering

# Directory of the robots' XML files (the original used a path relative to the working directory).
MODEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'assets')

RENDER_MODES = ('rgb_array',)

XY = Tuple[float, float]  # a point (x, y), MuJoCo length units
Segment = Tuple[XY, XY]  # a wall's or a block's side

# Environments holding a renderer. Closing them at interpreter exit, while OpenGL's Python modules still exist, avoids
# the PyOpenGL errors that `mujoco.Renderer.__del__` prints when it runs during shutdown. Call `close()` anyway.
_OPEN_RENDERERS: 'weakref.WeakSet[Maze]' = weakref.WeakSet()


@atexit.register
def _close_renderers() -> None:
  for env in list(_OPEN_RENDERERS):
    env.close()


def _fmt(*values: float) -> str:
  return ' '.join('%f' % v for v in values)


class Maze:
  """A robot (`MODEL_CLASS`, or the `robot_class` argument) in a maze.

  `restart()` and `advance(action)` are the environment's reset and step; the wrappers add their interfaces.

  Action: float32 [A], the robot's (ant: 8 torques in [-30, 30]; point: distance in [-1, 1] and turn in
  [-0.25, 0.25] radians). Observation: float32 [D], see the module docstring. Reward: float, the robot's own reward
  (ant: forward velocity - control cost + 1; point: 0), which HIRO ignores.

  Attributes:
    wrapped_env: the robot simulation (`ant.AntEnv` / `point.PointEnv`), with `model` and `data`.
    MAZE_STRUCTURE: the layout (list of rows), MAZE_SIZE_SCALING: s, MAZE_HEIGHT: h.
    movable_blocks: list of (body name, Move code), in layout order.
    elevated: whether the maze has chasms (and platforms); blocks: whether it has movable blocks.
    t: env steps since the last reset.
  """
  MODEL_CLASS: Any = None  # the robot class, a Type[mujoco_env.MujocoEnv] (None: `robot_class` names it)

  def __init__(self, maze_id: Optional[str] = None, maze_height: float = 0.5, maze_size_scaling: float = 8,
               n_bins: int = 0, sensor_range: float = 3., sensor_span: float = 2 * math.pi,
               observe_blocks: bool = False, put_spin_near_agent: bool = False, top_down_view: bool = False,
               manual_collision: bool = False, seed: Optional[int] = None,
               robot_class: Optional[Type[mujoco_env.MujocoEnv]] = None) -> None:
    """Builds the maze model.

    Args:
      maze_id: one of `maze_env_utils.MAZE_IDS` ('Maze', 'Push', 'Fall', 'Block', 'BlockMaze').
      maze_height: h, wall height as a fraction of the cell size.
      maze_size_scaling: s, cell size in MuJoCo length units.
      n_bins: number of range-sensor rays (0: no sensors).
      sensor_range: sensor range in cells (the rays reach sensor_range * s length units).
      sensor_span: angle covered by the rays, radians, centred on the robot's heading.
      observe_blocks: insert the movable blocks' positions into the observation (after index 3).
      put_spin_near_agent: add a small spinning block next to the robot's start.
      top_down_view: append the 5 x 5 x 3 top-down view to the observation.
      manual_collision: after each step, put the robot back where it was if its x, y lies in a wall cell (point).
      seed: int or None, seed of the reset noise (see `seed`).
      robot_class: the robot simulation class (`ant.AntEnv`, `point.PointEnv`); default `MODEL_CLASS`.
    """
    model_cls: Any = robot_class or self.MODEL_CLASS  # (its FILE, N_OBS_QPOS, ...: set by every robot class)
    if model_cls is None:
      raise TypeError(f'{type(self).__name__} has no robot: pass robot_class (ant.AntEnv or point.PointEnv).')
    self.MODEL_CLASS = model_cls
    self._maze_id = maze_id
    self.MAZE_HEIGHT = maze_height
    self.MAZE_SIZE_SCALING = size_scaling = maze_size_scaling
    self._n_bins = n_bins
    self._sensor_range = sensor_range * size_scaling
    self._sensor_span = sensor_span
    self._observe_blocks = observe_blocks
    self._put_spin_near_agent = put_spin_near_agent
    self._top_down_view = top_down_view
    self._manual_collision = manual_collision

    self.MAZE_STRUCTURE = structure = maze_env_utils.construct_maze(maze_id=maze_id)
    self.elevated = any(cell == -1 for row in structure for cell in row)
    self.blocks = any(maze_env_utils.can_move(cell) for row in structure for cell in row)

    robots = self._find_all_robots()
    if not robots:
      raise ValueError(f'Maze {maze_id!r} has no robot cell (\'r\').')
    torso_x, torso_y = robots[0]
    self._init_torso_x = torso_x
    self._init_torso_y = torso_y
    self._init_positions = [(x - torso_x, y - torso_y) for x, y in robots]

    tree = ET.parse(os.path.join(MODEL_DIR, model_cls.FILE))
    self.movable_blocks = self._add_maze(tree)
    xml_string = ET.tostring(tree.getroot(), encoding='unicode')

    self._rng = np.random.default_rng(seed)
    self.wrapped_env = model_cls(xml_string, self._rng)
    robot = self.wrapped_env
    self._torso_id = robot.body_id('torso')
    self._block_ids = [robot.body_id(name) for name, _ in self.movable_blocks]

    self._wall_centres = self._cell_centres(1)
    self._chasm_centres = self._cell_centres(-1)
    # Wall cells as boxes (x_min, x_max, y_min, y_max) by grid index, for the manual collision check.
    self._wall_boxes: Dict[Tuple[int, int], Tuple[float, float, float, float]] = {}
    for i, row in enumerate(structure):
      for j, cell in enumerate(row):
        if cell == 1:
          x, y = j * size_scaling - torso_x, i * size_scaling - torso_y
          self._wall_boxes[i,
                           j] = (x - size_scaling / 2, x + size_scaling / 2, y - size_scaling / 2, y + size_scaling / 2)
    # Static segments (walls and chasm edges) of the range sensors: (((x1, y1), (x2, y2)), cell type).
    self._static_segments: List[Tuple[Segment, int]] = []
    for kind, centres in ((1, self._wall_centres), (-1, self._chasm_centres)):
      for x, y in centres:
        self._static_segments += [(seg, kind) for seg in self._square_segments(x, y)]
    self._view = np.zeros([5, 5, 3])  # Top-down view channels: walls, chasms, movable blocks.

    # Observation layout: [robot qpos[:3] | blocks xyz | robot qpos[3:nq] | robot qvel[:nv] | sensors | view | t].
    nq, nv = model_cls.N_OBS_QPOS, model_cls.N_OBS_QVEL
    n_block_obs = 3 * len(self._block_ids) if observe_blocks else 0
    self._blocks_start = 3
    self._qpos_rest = slice(3 + n_block_obs, nq + n_block_obs)
    self._qvel_slice = slice(nq + n_block_obs, nq + n_block_obs + nv)
    start = nq + n_block_obs + nv
    self._sensor_slice = slice(start, start + 3 * n_bins)
    start += 3 * n_bins
    self._view_slice = slice(start, start + (self._view.size if top_down_view else 0))
    self._obs_dim = self._view_slice.stop + 1
    self._n_obs_qpos = nq
    self._n_obs_qvel = nv
    self._qpos = robot.qpos
    self._qvel = robot.qvel
    self._xpos = robot.xpos

    # The actuators' bounds, float32 [A] each (the action space).
    self.action_low, self.action_high = robot.model.actuator_ctrlrange.T.astype(np.float32)
    self._renderer: Any = None  # mujoco.Renderer
    self._camera: Any = None  # mujoco.MjvCamera
    self.t = 0

  # -- Construction -------------------------------------------------------------------------------------------------

  def _cell_centres(self, kind: int) -> List[XY]:
    """World (x, y) centres of the cells equal to `kind`, in layout order."""
    s = self.MAZE_SIZE_SCALING
    return [(j * s - self._init_torso_x, i * s - self._init_torso_y)
            for i, row in enumerate(self.MAZE_STRUCTURE)
            for j, cell in enumerate(row)
            if cell == kind]

  def _square_segments(self, cx: float, cy: float) -> List[Segment]:
    half = 0.5 * self.MAZE_SIZE_SCALING
    x1, x2, y1, y2 = cx - half, cx + half, cy - half, cy + half
    return [((x1, y1), (x2, y1)), ((x2, y1), (x2, y2)), ((x2, y2), (x1, y2)), ((x1, y2), (x1, y1))]

  def _add_maze(self, tree: Any) -> List[Tuple[str, Any]]:
    """Adds walls, platforms and movable blocks to the parsed robot XML; returns the movable blocks."""
    worldbody = tree.find('.//worldbody')
    torso = tree.find(".//body[@name='torso']")
    s, h = self.MAZE_SIZE_SCALING, self.MAZE_HEIGHT
    height_offset = h * s if self.elevated else 0.0
    if self.elevated:
      torso.set('pos', '0 0 %.2f' % (0.75 + height_offset))
    if self.blocks:
      tree.find('.//default').find('.//geom').set('solimp', '.995 .995 .01')

    movable_blocks = []
    for i, row in enumerate(self.MAZE_STRUCTURE):
      for j, cell in enumerate(row):
        if cell == 'r' and self._put_spin_near_agent:
          cell = maze_env_utils.Move.SpinXY
        x, y = j * s - self._init_torso_x, i * s - self._init_torso_y
        if self.elevated and cell != -1:
          ET.SubElement(worldbody, 'geom', name='elevated_%d_%d' % (i, j), pos=_fmt(x, y, h / 2 * s),
                        size=_fmt(0.5 * s, 0.5 * s,
                                  h / 2 * s), type='box', contype='1', conaffinity='1', rgba='0.9 0.9 0.9 1')
        if cell == 1:
          ET.SubElement(worldbody, 'geom', name='block_%d_%d' % (i, j), pos=_fmt(x, y, height_offset + h / 2 * s),
                        size=_fmt(0.5 * s, 0.5 * s,
                                  h / 2 * s), type='box', contype='1', conaffinity='1', rgba='0.4 0.4 0.4 1')
        elif maze_env_utils.can_move(cell):
          name = 'movable_%d_%d' % (i, j)
          movable_blocks.append((name, cell))
          self._add_movable_block(worldbody, name, i, j, x, y, cell, height_offset)

    for geom in torso.iter('geom'):
      if 'name' not in geom.attrib:
        raise ValueError(f'Every geom of the torso in {self.MODEL_CLASS.FILE} must have a name.')
    return movable_blocks

  def _add_movable_block(self, worldbody: ET.Element, name: str, i: int, j: int, x: float, y: float, kind: Any,
                         height_offset: float) -> None:
    s, h = self.MAZE_SIZE_SCALING, self.MAZE_HEIGHT
    falling = maze_env_utils.can_move_z(kind)
    spinning = maze_env_utils.can_spin(kind)
    # Falling blocks are slightly smaller so that they drop through a one-cell gap in the platforms.
    shrink = 0.1 if spinning else 0.99 if falling else 1.0
    height_shrink = 0.1 if spinning else 1.0
    x_offset = 0.25 * s if spinning else 0.0
    body = ET.SubElement(worldbody, 'body', name=name, pos=_fmt(x + x_offset, y,
                                                                height_offset + h / 2 * s * height_shrink))
    ET.SubElement(body, 'geom', name='block_%d_%d' % (i, j), pos='0 0 0', size=_fmt(0.5 * s * shrink, 0.5 * s * shrink,
                                                                                    h / 2 * s * height_shrink),
                  type='box', mass='0.001' if falling else '0.0002', contype='1', conaffinity='1', rgba='0.9 0.1 0.1 1')
    for axis, vector, movable in (('x', '1 0 0', maze_env_utils.can_move_x(kind)), ('y', '0 1 0',
                                                                                    maze_env_utils.can_move_y(kind))):
      if movable:
        ET.SubElement(body, 'joint', armature='0', axis=vector, damping='0.0', limited='true' if falling else 'false',
                      range=_fmt(-s,
                                 s), margin='0.01', name='movable_%s_%d_%d' % (axis, i, j), pos='0 0 0', type='slide')
    if falling:
      ET.SubElement(body, 'joint', armature='0', axis='0 0 1', damping='0.0', limited='true',
                    range='%f 0' % -height_offset, margin='0.01', name='movable_z_%d_%d' % (i, j), pos='0 0 0',
                    type='slide')
    if spinning:
      ET.SubElement(body, 'joint', armature='0', axis='0 0 1', damping='0.0', limited='false',
                    name='spinable_%d_%d' % (i, j), pos='0 0 0', type='ball')

  def _find_all_robots(self) -> List[XY]:
    """(j * s, i * s) of every robot cell ('r'), in layout order."""
    s = self.MAZE_SIZE_SCALING
    return [(j * s, i * s) for i, row in enumerate(self.MAZE_STRUCTURE) for j, cell in enumerate(row) if cell == 'r']

  # -- Stepping -----------------------------------------------------------------------------------------------------

  @property
  def observation_size(self) -> int:
    """D, the length of the observation."""
    return self._obs_dim

  @property
  def rng(self) -> np.random.Generator:
    """The reset noise's `np.random.Generator` (its `bit_generator.state` is part of a run's saved state)."""
    return self._rng

  def seed(self, seed: Optional[int]) -> None:
    """Re-seeds the reset noise (int or None); the next reset (`restart()`) starts the seeded sequence."""
    self._rng = np.random.default_rng(seed)
    self.wrapped_env.np_random = self._rng

  def get_state(self) -> Tuple[np.ndarray, np.ndarray, int]:
    """(qpos, qvel, t): copies of the simulation state and the step counter."""
    return self._qpos.copy(), self._qvel.copy(), self.t

  def set_state(self, state: Tuple[np.ndarray, np.ndarray, int]) -> None:
    """Restores a state from `get_state` (the physics' warm-start and time are not part of it)."""
    qpos, qvel, self.t = state
    self.wrapped_env.set_state(qpos, qvel)

  def restart(self) -> np.ndarray:
    """Resets the robot with its initial-state noise and t to 0; returns the first observation, float32 [D]."""
    self.t = 0
    self.wrapped_env.reset()
    if len(self._init_positions) > 1:
      xy = self._init_positions[self._rng.integers(len(self._init_positions))]
      self.wrapped_env.set_xy(xy)
    return self._get_obs()

  def advance(self, action: np.ndarray) -> Tuple[float, np.ndarray]:
    """One environment step with `action` (float [A]).

    Returns:
      (reward, observation): the robot's own reward (float; HIRO ignores it) and the new observation, float32 [D].
    """
    self.t += 1
    robot = self.wrapped_env
    if self._manual_collision:
      old_xy = robot.get_xy()
      reward = robot.step(action)
      x, y = self._qpos[:2].tolist()
      if self._is_in_collision(x, y):
        robot.set_xy(old_xy)
    else:
      reward = robot.step(action)
    return reward, self._get_obs()

  def observation(self) -> np.ndarray:
    """The observation of the current physics state: float32 [D], a new array (as `step` and `reset` return it)."""
    return self._get_obs()

  def _get_obs(self) -> np.ndarray:
    """float32 [D], a new array (see the module docstring for the layout)."""
    obs = np.empty(self._obs_dim, dtype=np.float32)
    qpos = self._qpos
    obs[:3] = qpos[:3]
    if self._observe_blocks:
      k = self._blocks_start
      for body_id in self._block_ids:
        obs[k:k + 3] = self._xpos[body_id]
        k += 3
    obs[self._qpos_rest] = qpos[3:self._n_obs_qpos]
    obs[self._qvel_slice] = self._qvel[:self._n_obs_qvel]
    if self._n_bins:
      obs[self._sensor_slice] = self.get_range_sensor_obs().ravel()
    if self._top_down_view:
      obs[self._view_slice] = self.get_top_down_view().ravel()
    obs[-1] = self.t * 0.001
    return obs

  # -- Maze queries -------------------------------------------------------------------------------------------------

  def get_ori(self) -> float:
    """The robot's heading, radians."""
    return self.wrapped_env.get_ori()

  def _is_in_collision(self, x: float, y: float) -> bool:
    """Whether the point (x, y) (MuJoCo length units) lies in a wall cell, boundaries included."""
    s = self.MAZE_SIZE_SCALING
    # The cell whose box contains (x, y) in its interior, and the neighbours that share a boundary point with it;
    # each candidate is checked with the exact inequalities.
    j = math.floor((x + self._init_torso_x) / s + 0.5)
    i = math.floor((y + self._init_torso_y) / s + 0.5)
    for key in ((i, j), (i - 1, j), (i, j - 1), (i - 1, j - 1), (i + 1, j), (i, j + 1), (i + 1, j + 1), (i - 1, j + 1),
                (i + 1, j - 1)):
      box = self._wall_boxes.get(key)
      if box is not None and box[0] <= x <= box[1] and box[2] <= y <= box[3]:
        return True
    return False

  def _xy_to_rowcol(self, x: float, y: float) -> Tuple[float, float]:
    """Fractional (row, col) of the 5 x 5 view for a position relative to the robot (robot at cell centre 2, 2)."""
    s = self.MAZE_SIZE_SCALING
    return 2 + (y + s / 2) / s, 2 + (x + s / 2) / s

  def _update_view(self, x: float, y: float, channel: int, robot_x: float, robot_y: float) -> None:
    """Adds one cell-sized square centred at world (x, y) to `channel`, spread over the view cells it overlaps."""
    row, col = self._xy_to_rowcol(x - robot_x, y - robot_y)
    # As the original: integer part by truncation toward zero, fraction by floor modulo.
    row, row_frac, col, col_frac = int(row), row % 1, int(col), col % 1
    row_weights = (max(0., 0.5 - row_frac), min(1., row_frac + 0.5) - max(0., row_frac - 0.5), max(0., row_frac - 0.5))
    col_weights = (max(0., 0.5 - col_frac), min(1., col_frac + 0.5) - max(0., col_frac - 0.5), max(0., col_frac - 0.5))
    rows, cols = self._view.shape[:2]
    for dr in (-1, 0, 1):
      for dc in (-1, 0, 1):
        r, c = row + dr, col + dc
        if 0 <= r < rows and 0 <= c < cols:
          self._view[r, c, channel] += row_weights[dr + 1] * col_weights[dc + 1]

  def get_top_down_view(self) -> np.ndarray:
    """float64 [5, 5, 3]: coverage of the 5 x 5 cells around the robot by walls, chasms and movable blocks.

    The grid is aligned with the world axes (not rotated with the robot); rows follow y, columns follow x.
    """
    self._view[:] = 0.
    robot_x, robot_y = self._xpos[self._torso_id][:2]
    for channel, centres in ((0, self._wall_centres), (1, self._chasm_centres)):
      for x, y in centres:
        self._update_view(x, y, channel, robot_x, robot_y)
    for body_id in self._block_ids:
      block_x, block_y = self._xpos[body_id][:2]
      self._update_view(block_x, block_y, 2, robot_x, robot_y)
    return self._view

  def get_range_sensor_obs(self) -> np.ndarray:
    """float64 [n_bins, 3]: per ray, (range - distance) / range to the first wall / chasm edge / block it meets.

    Ray k points at heading - span/2 + (2k + 1) / (2 n_bins) * span (radians). Only the channel of the first object
    hit is set, and only if it lies within range. Blocks count if the robot's height is within the block's extent.
    """
    robot_x, robot_y, robot_z = self._xpos[self._torso_id]
    ori = self.get_ori()
    s, h = self.MAZE_SIZE_SCALING, self.MAZE_HEIGHT
    segments = list(self._static_segments)
    for (_, kind), body_id in zip(self.movable_blocks, self._block_ids):
      block_x, block_y, block_z = self._xpos[body_id]
      if block_z + h * s / 2 >= robot_z >= block_z - h * s / 2:
        segments += [(seg, kind) for seg in self._square_segments(block_x, block_y)]

    readings = np.zeros((self._n_bins, 3))
    for ray in range(self._n_bins):
      ray_ori = ori - self._sensor_span * 0.5 + (2 * ray + 1.0) / (2 * self._n_bins) * self._sensor_span
      first_distance, first_kind = None, None
      for segment, kind in segments:
        p = maze_env_utils.ray_segment_intersect(((robot_x, robot_y), ray_ori), segment)
        if p is not None:
          distance = maze_env_utils.point_distance(p, (robot_x, robot_y))
          if first_distance is None or distance < first_distance:
            first_distance, first_kind = distance, kind
      if first_distance is not None and first_distance <= self._sensor_range:
        channel = 0 if first_kind == 1 else 1 if first_kind == -1 else 2
        readings[ray, channel] = (self._sensor_range - first_distance) / self._sensor_range
    return readings

  # -- Rendering ----------------------------------------------------------------------------------------------------

  def render(self, mode: str = 'rgb_array', height: int = 480, width: int = 640) -> np.ndarray:
    """uint8 [height, width, 3], an RGB frame of the whole maze seen from above at an angle.

    Uses `mujoco.Renderer` on the OpenGL back end that `rendering.backend()` picks at the first frame of the process
    (EGL, else OSMesa, else GLFW with a display; an explicit MUJOCO_GL first). The renderer is created on the first
    call and kept; `close()` frees it (renderers still open at interpreter exit are closed by an exit hook).

    Raises:
      rendering.RenderingUnavailableError: no OpenGL back end works here (the message says what to install).
    """
    if mode not in RENDER_MODES:
      raise ValueError(f'Unknown render mode {mode!r}; valid modes: {", ".join(RENDER_MODES)}.')
    model, data = self.wrapped_env.model, self.wrapped_env.data
    if self._renderer is None or (self._renderer.height, self._renderer.width) != (height, width):
      self.close()
      model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
      model.vis.global_.offheight = max(model.vis.global_.offheight, height)
      self._renderer = rendering.renderer(model, height=height, width=width)
      self._camera = self.maze_camera()
      _OPEN_RENDERERS.add(self)
    self._renderer.update_scene(data, camera=self._camera)
    return self._renderer.render()

  def maze_camera(self) -> Any:
    """A free camera looking at the maze's centre from above, far enough to show all of it."""
    s = self.MAZE_SIZE_SCALING
    rows, cols = len(self.MAZE_STRUCTURE), len(self.MAZE_STRUCTURE[0])
    camera = mujoco.MjvCamera()
    camera.type = mujoco.mjtCamera.mjCAMERA_FREE
    camera.lookat[:] = ((cols - 1) / 2 * s - self._init_torso_x, (rows - 1) / 2 * s - self._init_torso_y,
                        self.MAZE_HEIGHT * s * (2 if self.elevated else 1) / 2)
    camera.distance = 1.2 * max(rows, cols) * s
    camera.azimuth = 90.
    camera.elevation = -70.
    return camera

  def close(self) -> None:
    """Frees the renderer (its OpenGL context), if any. The environment can still step and render afterwards."""
    if self._renderer is not None:
      self._renderer.close()
      self._renderer = None
    _OPEN_RENDERERS.discard(self)
