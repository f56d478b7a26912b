"""The rllab ant as HIRO used it (original: efficient-hrl environments/ant.py, a gym mujoco-py environment).

Model: `assets/ant.xml` (0.02 s RK4 timestep, 8 hinge motors, ctrl range +-30, gear 1). One environment step is
`FRAME_SKIP = 5` physics steps, i.e. 0.1 s. The robot observation is qpos[:15] (torso x, y, z, orientation quaternion
w, x, y, z, 8 joint angles in radians) followed by qvel[:14] (torso linear and angular velocity, 8 joint velocities):
29 values, x and y first.
"""

import math

import numpy as np

from uvf.environments import mujoco_env


class AntEnv(mujoco_env.MujocoEnv):
  """The ant robot in a (maze) world: 8-d torque action in [-30, 30], 29-d robot observation."""
  FILE = 'ant.xml'
  ORI_IND = 3
  FRAME_SKIP = 5
  N_OBS_QPOS = 15
  N_OBS_QVEL = 14

  def __init__(self, xml_string, rng):
    super().__init__(xml_string, rng)
    self._torso_id = self.body_id('torso')

  def step(self, action):
    """Applies the torques `action` (float [8]; MuJoCo clamps them to +-30) for 5 physics steps (0.1 s).

    Returns:
      float, the ant's own reward: forward x velocity (length units / s) - 0.5 * sum(action**2) + 1. HIRO ignores it
      (its rewards are distances computed in the training loop); it is kept as the original returned it.
    """
    torso = self.xpos[self._torso_id]
    x_before = torso[0]
    self.do_simulation(action, self.frame_skip)
    forward_reward = (torso[0] - x_before) / self.dt
    ctrl_cost = 0.5 * float(np.dot(action, action))
    return forward_reward - ctrl_cost + 1.0

  def get_ori(self):
    """Heading: the angle of the torso's x axis projected on the x-y plane, radians in (-pi, pi]."""
    w, x, y, z = self.qpos[self.ORI_IND:self.ORI_IND + 4]
    # The x axis rotated by q (q v q*), projected on x-y; exact for a quaternion of any norm, like the original's
    # product with the conjugate.
    return math.atan2(2.0 * (x * y + w * z), w * w + x * x - y * y - z * z)
