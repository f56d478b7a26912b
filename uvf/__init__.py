"""HIRO / UVF (Nachum et al. 2018, 2019) for TensorFlow 2: a faithful port of tensorflow/models research/efficient-hrl.

Importing `uvf` imports `mujoco` without an OpenGL back end (`uvf.environments.rendering`): nothing here loads an
OpenGL library until a frame is rendered. It also registers HIRO's mazes with Gymnasium (`hiro/AntMaze-v0`, ...;
`uvf.environments.gymnasium_env`), which builds nothing until `gymnasium.make`.
"""

from uvf.environments import rendering as _rendering

_rendering.import_mujoco_without_opengl()

from uvf.environments import gymnasium_env as _gymnasium_env  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

_gymnasium_env.register_envs()
