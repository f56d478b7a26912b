"""The kinematic point robot of HIRO's PointMaze (original: efficient-hrl environments/point.py).

Model: `assets/point.xml`, rebuilt after rllab's point.xml (the original never shipped it). qpos = (x, y, heading
in radians). Each environment step turns the heading by action[1] radians, then moves 0.2 * action[0] length units
along the new heading (position clipped to +-100), writes that pose and runs one physics step (FRAME_SKIP = 1,
0.02 s); the motors are never driven. The robot observation is qpos[:3] and qvel[:3]: 6 values, x and y first.
"""

import math

import mujoco

from uvf.environments import mujoco_env


class PointEnv(mujoco_env.MujocoEnv):
  """The point robot: 2-d action (distance in [-1, 1], turn in [-0.25, 0.25] radians), 6-d robot observation."""
  FILE = 'point.xml'
  ORI_IND = 2
  FRAME_SKIP = 1
  N_OBS_QPOS = 3
  N_OBS_QVEL = 3

  def step(self, action):
    """Turns by action[1] (radians), moves by 0.2 * action[0] (length units), then one physics step.

    The action is not clipped to its bounds (as the original). Unlike the original, the caller's array is not
    modified (the original scaled action[0] by 0.2 in place).

    Returns:
      0.0, the point's reward (HIRO ignores it).
    """
    # Python floats: scalar maths on NumPy scalars would cost more than the physics step of this small model.
    distance, turn = 0.2 * float(action[0]), float(action[1])
    qpos = self.qpos
    x, y, heading = qpos[:3].tolist()
    heading += turn
    qpos[0] = min(max(x + math.cos(heading) * distance, -100.0), 100.0)
    qpos[1] = min(max(y + math.sin(heading) * distance, -100.0), 100.0)
    qpos[2] = heading
    # As the original's set_state: recompute kinematics for the written pose, then step the physics.
    mujoco.mj_forward(self.model, self.data)
    mujoco.mj_step(self.model, self.data, nstep=self.frame_skip)
    return 0.0

  def get_ori(self):
    """Heading, radians (qpos[2], not wrapped)."""
    return float(self.qpos[self.ORI_IND])
