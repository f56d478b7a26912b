"""The maze environments (uvf/environments) against the original's geometry, worked out by hand.

References: tensorflow/models research/efficient-hrl environments/maze_env.py and maze_env_utils.py (layouts, cell
centres (j*s - torso_x, i*s - torso_y), wall / platform / block sizes, observation layout). Expected coordinates
below are written out from those, not read back from the code under test.
"""

import math

import gin
import mujoco
import numpy as np
import pytest

from uvf.environments import ant_maze_env
from uvf.environments import create_maze_env as cme

# Layouts of efficient-hrl environments/maze_env_utils.py `construct_maze` (1 wall, 0 free, 'r' robot, -1 chasm, 'M'
# movable block).
MAZE = ['11111', '1r001', '11101', '10001', '11111']
POINT_S, ANT_S = 4, 8


def make(name, **kwargs):
  env = cme.create_maze_env(name, **kwargs)
  env.seed(0)
  env.reset()
  return env


def zero_action(env):
  return np.zeros(env.action_spec().shape, np.float32)


def random_actions(env, n, seed):
  spec = env.action_spec()
  return np.random.default_rng(seed).uniform(spec.minimum, spec.maximum, (n,) + spec.shape).astype(np.float32)


def geom(env, name):
  return env.wrapped_env.model.geom(name)


# -- Observations -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize('name, dim', [('AntMaze', 30), ('AntPush', 30), ('AntFall', 30), ('AntBlock', 33),
                                       ('AntBlockMaze', 33), ('PointMaze', 7), ('EgoAntMaze', 30 + 24)])
def test_observation_size_and_specs(name, dim):
  env = make(name)
  spec = env.observation_spec()
  assert spec.shape == (dim,) and spec.dtype == np.float32
  # Unbounded, as gym's Box(-inf, inf) of the original; tf-agents stores infinite bounds as the float32 extremes.
  assert np.all(spec.minimum == np.finfo(np.float32).min) and np.all(spec.maximum == np.finfo(np.float32).max)
  action_spec = env.action_spec()
  assert action_spec.dtype == np.float32
  if name.startswith('Point'):
    np.testing.assert_array_equal(action_spec.minimum, [-1, -0.25])
    np.testing.assert_array_equal(action_spec.maximum, [1, 0.25])
  else:
    assert action_spec.shape == (8,)
    np.testing.assert_array_equal(action_spec.minimum, -30)
    np.testing.assert_array_equal(action_spec.maximum, 30)
  first = env.reset()
  assert first.is_first() and first.observation.shape == (dim,) and first.observation.dtype == np.float32
  assert first.observation[-1] == 0.0
  for t, action in enumerate(random_actions(env, 30, seed=1), start=1):
    step = env.step(action)
    assert step.step_type == 1 and step.discount == 1.0  # MID: no time limit, never terminal.
    assert step.reward.dtype == np.float32 and step.observation.dtype == np.float32
    assert np.all(np.isfinite(step.observation))
    assert step.observation[-1] == np.float32(t * 0.001)


def test_ant_observation_layout():
  env = make('AntMaze')
  for action in random_actions(env, 5, seed=2):
    obs = env.step(action).observation
  data = env.wrapped_env.data
  np.testing.assert_array_equal(obs[:15], data.qpos[:15].astype(np.float32))  # x, y, z, quaternion, 8 joints
  np.testing.assert_array_equal(obs[15:29], data.qvel[:14].astype(np.float32))  # 6 torso, 8 joint velocities
  assert obs[29] == np.float32(0.005)


@pytest.mark.parametrize('name', ['AntBlock', 'AntBlockMaze'])
def test_block_position_at_obs_3_to_6(name):
  env = make(name)
  obs = env.current_time_step().observation
  # The spinning block sits in the robot's cell, +s/4 = 2 in x, on the floor: centre z = 0.5 * 8 / 2 * 0.1 = 0.2.
  np.testing.assert_allclose(obs[3:6], [2.0, 0.0, 0.2], atol=1e-6)
  # The rest of the ant's qpos follows the block.
  np.testing.assert_array_equal(obs[6:18], env.wrapped_env.data.qpos[3:15].astype(np.float32))
  # Move the block 1.5 along y (its second joint); the observation follows.
  robot = env.wrapped_env
  qpos = robot.data.qpos.copy()
  qpos[robot.model.joint('movable_y_1_1').qposadr[0]] = 1.5
  robot.set_state(qpos, robot.data.qvel)
  obs = env.step(zero_action(env)).observation
  np.testing.assert_allclose(obs[3:5], [2.0, 1.5], atol=0.05)


def test_top_down_view_of_the_cells_around_the_robot():
  env = make('AntMaze', top_down_view=True)
  assert env.observation_spec().shape == (30 + 75,)
  env.wrapped_env.set_xy((0.0, 0.0))
  view = env.get_top_down_view()
  # Robot exactly at its cell's centre, so each wall fills one view cell: view[r, c] = wall at maze row r - 1,
  # column c - 1 (the robot's cell (1, 1) is the view's centre (2, 2)); chasm and block channels are empty.
  expected = np.zeros((5, 5))
  for i, row in enumerate(MAZE):
    for j, cell in enumerate(row):
      if cell == '1' and 0 <= i + 1 < 5 and 0 <= j + 1 < 5:
        expected[i + 1, j + 1] = 1.0
  np.testing.assert_allclose(view[:, :, 0], expected, atol=1e-12)
  assert not view[:, :, 1:].any()
  obs = env.observation()
  np.testing.assert_allclose(obs[29:104], view.ravel().astype(np.float32))


def test_ego_range_sensors():
  env = make('EgoAntMaze')
  robot = env.wrapped_env
  qpos = robot.data.qpos.copy()
  qpos[:7] = (0, 0, 0.75, 1, 0, 0, 0)  # At the origin, heading 0.
  robot.set_state(qpos, robot.data.qvel)
  readings = env.get_range_sensor_obs()
  assert readings.shape == (8, 3)
  # Ray k points at -pi + (2k + 1) pi / 8; the range is 3 cells = 24. Walls around the start cell: x <= -4 (cell
  # (1, 0)), y <= -4 (row 0), y >= 4 from x = 4 on (cell (2, 2)); nothing else is nearer.
  far = (24 - 4 / math.sin(math.pi / 8)) / 24  # rays 3 and 4 (-+pi/8) meet y = -+4 at x = 9.66
  near = (24 - 4 / math.cos(math.pi / 8)) / 24  # rays 0 and 7 (-+7pi/8) meet x = -4
  steep = (24 - 4 / math.sin(3 * math.pi / 8)) / 24  # rays 1, 2, 5, 6 (-+5pi/8, -+3pi/8) meet y = -+4
  np.testing.assert_allclose(readings[:, 0], [near, steep, steep, far, far, steep, steep, near], atol=1e-9)
  assert not readings[:, 1:].any()
  obs = env.observation()
  np.testing.assert_allclose(obs[29:53], readings.ravel().astype(np.float32))


# -- Geometry ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize('name, s', [('AntMaze', ANT_S), ('PointMaze', POINT_S)])
def test_maze_cells_map_to_wall_geoms(name, s):
  env = make(name)
  model = env.wrapped_env.model
  walls = 0
  for i, row in enumerate(MAZE):
    for j, cell in enumerate(row):
      # Robot cell (1, 1) -> origin: centre (j * s - s, i * s - s); wall height h * s = 0.5 * s, on the floor.
      if cell == '1':
        walls += 1
        g = geom(env, f'block_{i}_{j}')
        np.testing.assert_allclose(g.pos, [(j - 1) * s, (i - 1) * s, s / 4], atol=1e-6)
        np.testing.assert_allclose(g.size, [s / 2, s / 2, s / 4], atol=1e-6)
        assert g.type[0] == mujoco.mjtGeom.mjGEOM_BOX and g.contype[0] == 1 and g.conaffinity[0] == 1
      else:
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f'block_{i}_{j}') == -1
  assert walls == 25 - 7  # 7 free cells (the U of 'Maze'), the rest walls.
  assert sum(model.geom(k).name.startswith('block_') for k in range(model.ngeom)) == walls
  assert model.nq == (15 if name.startswith('Ant') else 3)  # No movable blocks, no extra joints.


def test_ant_maze_free_cells_at_documented_coordinates():
  # Free cells of the AntMaze U at (0, 0), (8, 0), (16, 0), (16, 8), (0, 16), (8, 16), (16, 16).
  env = make('AntMaze')
  model = env.wrapped_env.model
  wall_centres = {
      tuple(np.round(model.geom(k).pos[:2], 6)) for k in range(model.ngeom) if model.geom(k).name.startswith('block_')
  }
  for free in [(0, 0), (8, 0), (16, 0), (16, 8), (0, 16), (8, 16), (16, 16)]:
    assert free not in wall_centres
  for wall in [(8, 8), (0, 8), (-8, 0), (24, 0), (16, -8)]:
    assert wall in wall_centres


def test_push_block():
  env = make('AntPush')
  model = env.wrapped_env.model
  body = model.body('movable_2_2')
  # Robot cell (1, 2) -> origin, so cell (2, 2) is at (0, 8); full-size block, h * s / 2 = 2 above the floor.
  np.testing.assert_allclose(body.pos, [0, 8, 2])
  np.testing.assert_allclose(geom(env, 'block_2_2').size, [4, 4, 2])
  assert body.mass[0] == pytest.approx(0.0002)
  for axis in 'xy':
    joint = model.joint(f'movable_{axis}_2_2')
    assert joint.type[0] == mujoco.mjtJoint.mjJNT_SLIDE and not joint.limited[0]
  assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, 'movable_z_2_2') == -1
  # Any movable block switches the default solimp to (.995, .995, .01) (the walls and floor inherit it).
  np.testing.assert_allclose(geom(env, 'floor').solimp[:3], [.995, .995, .01])
  np.testing.assert_allclose(geom(env, 'torso_geom').solimp[:3], [.995, .995, .01])


def test_fall_geometry():
  env = make('AntFall')
  model = env.wrapped_env.model
  # Elevated: platforms (top at z = 4) under every non-chasm cell, walls on top of them, torso at 0.75 + 4.
  layout = ['1111', '1r01', '10M1', '1--1', '1001', '1111']
  for i, row in enumerate(layout):
    for j, cell in enumerate(row):
      x, y = (j - 1) * 8, (i - 1) * 8
      if cell == '-':
        assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f'elevated_{i}_{j}') == -1
      else:
        np.testing.assert_allclose(geom(env, f'elevated_{i}_{j}').pos, [x, y, 2])
        np.testing.assert_allclose(geom(env, f'elevated_{i}_{j}').size, [4, 4, 2])
      if cell == '1':
        np.testing.assert_allclose(geom(env, f'block_{i}_{j}').pos, [x, y, 6])
  np.testing.assert_allclose(model.body('torso').pos, [0, 0, 4.75])
  # The YZ block: shrunk x0.99, heavier, y slide limited to +-8, z slide down to -4.
  np.testing.assert_allclose(model.body('movable_2_2').pos, [8, 8, 6])
  np.testing.assert_allclose(geom(env, 'block_2_2').size, [3.96, 3.96, 2])
  assert model.body('movable_2_2').mass[0] == pytest.approx(0.001)
  np.testing.assert_allclose(model.joint('movable_y_2_2').range, [-8, 8])
  np.testing.assert_allclose(model.joint('movable_z_2_2').range, [-4, 0])
  assert model.joint('movable_y_2_2').limited[0] and model.joint('movable_z_2_2').limited[0]


def test_spinning_block_geometry():
  env = make('AntBlock')
  model = env.wrapped_env.model
  np.testing.assert_allclose(geom(env, 'block_1_1').size, [0.4, 0.4, 0.2])
  assert model.joint('spinable_1_1').type[0] == mujoco.mjtJoint.mjJNT_BALL
  assert model.nq == 15 + 2 + 4 and model.nv == 14 + 2 + 3


def test_ant_model():
  env = make('AntMaze')
  model = env.wrapped_env.model
  assert model.opt.timestep == 0.02 and model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
  assert env.wrapped_env.frame_skip == 5 and env.wrapped_env.dt == pytest.approx(0.1)
  assert model.nu == 8
  np.testing.assert_array_equal(model.actuator_gear[:, 0], 1.0)
  np.testing.assert_array_equal(model.actuator_ctrlrange, [[-30, 30]] * 8)
  joints = [model.joint(model.actuator_trnid[k, 0]).name for k in range(8)]
  assert joints == ['hip_4', 'ankle_4', 'hip_1', 'ankle_1', 'hip_2', 'ankle_2', 'hip_3', 'ankle_3']


@pytest.mark.parametrize('name, z', [('AntMaze', 0.75), ('AntPush', 0.75), ('AntFall', 4.75)])
def test_ant_starts_at_the_origin(name, z):
  env = make(name)
  for seed in range(3):
    env.seed(seed)
    obs = env.reset().observation
    # Reset noise: U(-0.1, 0.1) on every coordinate.
    np.testing.assert_allclose(obs[:3], [0, 0, z], atol=0.1 + 1e-6)


# -- Dynamics ---------------------------------------------------------------------------------------------------------


def test_scripted_push_moves_the_block():
  env = make('AntPush')
  robot = env.wrapped_env
  block = robot.model.body('movable_2_2').id
  # Put the ant upright just below the block (which spans y = 4..12) and send it towards +y at 4 units/s.
  qpos, qvel = robot.data.qpos.copy(), np.zeros(robot.model.nv)
  qpos[:7] = (0, 2.5, 0.75, 1, 0, 0, 0)
  qvel[1] = 4.0
  robot.set_state(qpos, qvel)
  start = robot.data.xpos[block].copy()
  for _ in range(10):
    env.step(zero_action(env))
  mujoco.mj_forward(robot.model, robot.data)
  moved = robot.data.xpos[block] - start
  assert moved[1] > 0.1, moved
  assert abs(moved[0]) < 0.05 and abs(moved[2]) < 0.05, moved


def test_fall_block_drops_into_the_chasm():
  env = make('AntFall')
  robot = env.wrapped_env
  block = robot.model.body('movable_2_2').id
  y_slide = robot.model.joint('movable_y_2_2').qposadr[0]
  for y, expected_z in [(0.0, 6.0), (8.0, 2.0)]:
    # On its platform the block stays at z = 4 + 2; pushed 8 along y it lies over the chasm (row 3) and falls the
    # platform height, 4, onto the floor.
    env.reset()
    qpos = robot.data.qpos.copy()
    qpos[y_slide] = y
    robot.set_state(qpos, robot.data.qvel)
    for _ in range(20):
      env.step(zero_action(env))
    mujoco.mj_forward(robot.model, robot.data)
    assert robot.data.xpos[block][2] == pytest.approx(expected_z, abs=0.05)


def test_point_manual_collision_keeps_the_point_out_of_walls():
  env = make('PointMaze')
  # Wall cells of the PointMaze (s = 4): boxes [x - 2, x + 2] x [y - 2, y + 2] around ((j - 1) * 4, (i - 1) * 4).
  boxes = [((j - 1) * 4 - 2, (j - 1) * 4 + 2, (i - 1) * 4 - 2, (i - 1) * 4 + 2)
           for i, row in enumerate(MAZE)
           for j, cell in enumerate(row)
           if cell == '1']

  def in_wall(x, y):
    return any(x0 <= x <= x1 and y0 <= y <= y1 for x0, x1, y0, y1 in boxes)

  robot = env.wrapped_env
  for heading in (-math.pi / 2, math.pi, math.pi / 2, math.pi / 4):  # Walls below, left, above, up-right.
    env.reset()
    qpos = robot.data.qpos.copy()
    qpos[:3] = (0, 0, heading)
    robot.set_state(qpos, np.zeros(robot.model.nv))
    for _ in range(60):  # 60 steps of 0.2 would carry the point 12 units, deep into the walls.
      obs = env.step(np.array([1.0, 0.0], np.float32)).observation
      assert not in_wall(obs[0], obs[1]), obs[:3]
    assert math.hypot(obs[0], obs[1]) > 1.0  # It did move towards the wall.


def test_point_moves_kinematically():
  env = make('PointMaze')
  robot = env.wrapped_env
  qpos = robot.data.qpos.copy()
  qpos[:3] = (0, 0, 0)
  robot.set_state(qpos, np.zeros(robot.model.nv))
  obs = env.step(np.array([1.0, 0.1], np.float32)).observation
  # Turn by 0.1 rad, then move 0.2 along the new heading.
  np.testing.assert_allclose(obs[:3], [0.2 * math.cos(0.1), 0.2 * math.sin(0.1), 0.1], atol=1e-5)


# -- Construction, seeding, TF wrapper, rendering ---------------------------------------------------------------------


@pytest.mark.parametrize('bad', ['AntMazes', 'antmaze', 'HalfCheetahMaze', None])
def test_unknown_env_name_lists_the_valid_ones(bad):
  with pytest.raises(ValueError) as error:
    cme.create_maze_env(bad)
  message = str(error.value)
  assert repr(bad) in message
  for valid in ('AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze', 'EgoAntMaze'):
    assert valid in message


def test_gin_binding():
  with gin.unlock_config():
    gin.parse_config('create_maze_env.env_name = "AntFall"')
  try:
    env = cme.create_maze_env()
    assert env.current_time_step().observation[2] > 4.5  # Elevated start.
  finally:
    gin.clear_config()


def _trajectory(env, seed, actions):
  env.seed(seed)
  observations = [env.reset().observation]
  observations += [env.step(a).observation for a in actions]
  return np.stack(observations)


@pytest.mark.parametrize('name', ['AntPush', 'PointMaze'])
def test_identical_seeds_give_identical_trajectories(name):
  env_a, env_b = make(name), make(name)
  actions = random_actions(env_a, 40, seed=7)
  first = _trajectory(env_a, 123, actions)
  np.testing.assert_array_equal(first, _trajectory(env_b, 123, actions))
  np.testing.assert_array_equal(first, _trajectory(env_a, 123, actions))  # Re-seeding the same env repeats it.
  assert not np.array_equal(first[0], _trajectory(env_a, 124, actions)[0])
  if name == 'AntPush':  # A constructor seed is the same as seed() before the first reset.
    seeded = ant_maze_env.AntMazeEnv(maze_id='Push', seed=123)
    np.testing.assert_array_equal(seeded.reset().observation, first[0])


def test_tf_py_environment():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  env = cme.TFPyEnvironment(make('AntMaze'))
  env.reset()
  obs = env.current_obs()
  assert obs.shape == (30,) and obs.dtype == tf.float32
  is_last, reward, discount = env.step(tf.zeros([8]))
  assert not bool(is_last) and reward.dtype == tf.float32 and float(discount) == 1.0
  assert float(env.current_obs()[-1]) == pytest.approx(0.001)
  env.start_collect()
  env.close()


def test_render_frame():
  env = make('AntPush')
  try:
    frame = env.render()
    assert frame.shape == (480, 640, 3) and frame.dtype == np.uint8
    small = env.render(height=120, width=160)
    assert small.shape == (120, 160, 3)
  finally:
    env.close()
  # Not blank: many distinct colours, including the red movable block.
  assert len(np.unique(frame.reshape(-1, 3), axis=0)) > 50
  red = (frame[:, :, 0] > 150) & (frame[:, :, 1] < 80) & (frame[:, :, 2] < 80)
  assert red.sum() > 100
  with pytest.raises(ValueError, match='rgb_array'):
    env.render(mode='human')
