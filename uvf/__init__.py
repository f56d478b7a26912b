"""HIRO / UVF (Nachum et al. 2018, 2019) for TensorFlow 2: a faithful port of tensorflow/models research/efficient-hrl.

Importing `uvf` imports `mujoco` without an OpenGL back end (`uvf.environments.rendering`): nothing here loads an
OpenGL library until a frame is rendered.
"""

from uvf.environments import rendering as _rendering

_rendering.import_mujoco_without_opengl()
