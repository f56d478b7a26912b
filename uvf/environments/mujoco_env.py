"""A thin MuJoCo robot simulation on the official `mujoco` bindings, in place of gym's mujoco-py `MujocoEnv`.

The original robots (`AntEnv`, `PointEnv`) subclassed gym's `mujoco_env.MujocoEnv`, which owned the mujoco-py
simulation. This class keeps the part of that interface the robots and the maze use (`model`, `data`, `init_qpos`,
`init_qvel`, `frame_skip`, `dt`, `set_state`, `do_simulation`, `reset`, `get_body_com`, `np_random`) and nothing else:
no gym spaces, no viewer. Mapping (mujoco-py -> mujoco): `sim.step()` -> `mujoco.mj_step`, `sim.reset()` ->
`mujoco.mj_resetData`, `sim.set_state(...)` + `sim.forward()` -> write `data.qpos` / `data.qvel` + `mujoco.mj_forward`,
`get_body_com(name)` (mujoco-py returns the body frame position `xpos`, not the centre of mass) -> `data.xpos[id]`.
"""

from typing import Optional

import mujoco


class MujocoEnv:
  """A MuJoCo model and its data, stepped `frame_skip` physics steps per environment step.

  Subclasses set `FILE` (the XML asset name), `ORI_IND` (where the heading is read in qpos), `FRAME_SKIP`,
  `N_OBS_QPOS` / `N_OBS_QVEL` (how many leading qpos / qvel entries the robot observes) and implement `step` and
  `get_ori`.
  """
  FILE: Optional[str] = None
  ORI_IND: Optional[int] = None
  FRAME_SKIP: Optional[int] = None
  N_OBS_QPOS: Optional[int] = None
  N_OBS_QVEL: Optional[int] = None

  def __init__(self, xml_string, rng):
    """Compiles the model.

    Args:
      xml_string: str, the complete MJCF model (the robot plus the maze).
      rng: np.random.Generator for the reset noise; the maze replaces it through `np_random` when seeded.
    """
    self.model = mujoco.MjModel.from_xml_string(xml_string)
    self.data = mujoco.MjData(self.model)
    self.frame_skip = self.FRAME_SKIP
    self.np_random = rng
    # The initial state is the model's reference configuration, as gym's MujocoEnv (the XML's <custom> init_qpos is
    # not read).
    self.init_qpos = self.data.qpos.copy()
    self.init_qvel = self.data.qvel.copy()
    # Views into the MjData buffers, valid as long as `data` lives; cached to keep attribute look-ups off the step.
    self.qpos = self.data.qpos
    self.qvel = self.data.qvel
    self.ctrl = self.data.ctrl
    self.xpos = self.data.xpos

  @property
  def dt(self):
    """Seconds of simulated time per environment step (timestep x frame_skip)."""
    return self.model.opt.timestep * self.frame_skip

  def body_id(self, name):
    """The id of body `name` (KeyError names the body if it does not exist)."""
    return self.model.body(name).id

  def get_body_com(self, name):
    """float64 [3], the world position (MuJoCo length units) of body `name`'s frame, as mujoco-py returned it.

    Like mujoco-py, this reads `data.xpos` as last computed: after `mj_step` that is the position kinematics computed
    during the step, not the integrated state; after `set_state` / `reset` it is exact.
    """
    return self.xpos[self.body_id(name)].copy()

  def set_state(self, qpos, qvel):
    """Writes the generalised positions and velocities and recomputes the derived quantities (`mj_forward`)."""
    self.qpos[:] = qpos
    self.qvel[:] = qvel
    mujoco.mj_forward(self.model, self.data)

  def do_simulation(self, ctrl, n_frames):
    """Sets the controls and advances the physics by `n_frames` steps of `model.opt.timestep` seconds."""
    self.ctrl[:] = ctrl
    mujoco.mj_step(self.model, self.data, nstep=n_frames)

  def reset(self):
    """Resets the simulation (`mj_resetData`), then applies the robot's initial-state noise."""
    mujoco.mj_resetData(self.model, self.data)
    self.reset_model()

  def get_xy(self):
    """float64 [2], a copy of the robot's x, y (qpos[0:2], MuJoCo length units)."""
    return self.qpos[:2].copy()

  def set_xy(self, xy):
    """Moves the robot to x, y (keeping every other coordinate and all velocities) and recomputes kinematics."""
    self.qpos[0] = xy[0]
    self.qpos[1] = xy[1]
    mujoco.mj_forward(self.model, self.data)

  def step(self, action):
    """Advances one environment step; returns the robot's own reward (float; HIRO ignores it)."""
    raise NotImplementedError

  def reset_model(self):
    """Applies the initial-state noise after `mj_resetData`, as both rllab robots do: qpos = qpos0 + U(-0.1, 0.1)
    and qvel = 0.1 * N(0, 1) on the robot's own `N_OBS_QPOS` / `N_OBS_QVEL` coordinates; other bodies (blocks) stay
    exactly at their initial state."""
    nq, nv = self.model.nq, self.model.nv
    qpos = self.init_qpos + self.np_random.uniform(low=-0.1, high=0.1, size=nq)
    qvel = self.init_qvel + self.np_random.standard_normal(nv) * 0.1
    qpos[self.N_OBS_QPOS:] = self.init_qpos[self.N_OBS_QPOS:]
    qvel[self.N_OBS_QVEL:] = 0.0
    self.set_state(qpos, qvel)

  def get_ori(self):
    """The robot's heading in the x-y plane, radians in (-pi, pi]."""
    raise NotImplementedError
