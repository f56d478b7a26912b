"""HIRO evaluation videos: the episodes an evaluation recorded (`uvf.rollout.ParallelEnvironments.record`), drawn
from the maze camera with the task target and the current sub-goal, written as MP4 (ffmpeg) or GIF (Pillow).

`evaluate` (uvf/eval.py) checks `video_settings` and the OpenGL back end before any episode runs (`check_settings`,
`check_rendering`), then writes `<eval_dir>/videos/<mode>_hrl_step_<N>.mp4` per mode and checkpoint
(`write_mode_video`).
"""

import os
import shutil
import subprocess
import time

from absl import logging
import numpy as np

from uvf.environments import rendering

VIDEO_DIR = 'videos'
# video_settings keys and defaults: frame size in pixels, frames per second of the file (an environment step is
# 0.1 s of simulated time for the ant, so 30 fps plays 3x faster than real time), and one frame every n steps.
VIDEO_DEFAULTS = {'width': 480, 'height': 360, 'fps': 30, 'every_n_steps': 1}
_MARKER_TARGET_RGBA = (0.9, 0.1, 0.1, 0.8)
_MARKER_SUBGOAL_RGBA = (0.1, 0.3, 0.9, 0.6)


def _frame_text(image, text):
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from PIL import ImageDraw  # pylint: disable=g-import-not-at-top
  picture = Image.fromarray(image)
  draw = ImageDraw.Draw(picture)
  draw.rectangle([0, 0, picture.width, 14], fill=(0, 0, 0))
  draw.text((4, 2), text, fill=(255, 255, 255))
  return np.asarray(picture)


def render_frames(env, recorded_qpos, recorded_subgoals, episode, targets, distances, mode, step, width, height,
                  every_n_steps=1, subgoals=True):
  """The frames of one recorded episode, uint8 [F, height, width, 3].

  The physics states are replayed into a separate `MjData` of `env`'s model and drawn from the maze camera, with
  the task target (red sphere) and the current sub-goal s_t[:2] + g_t[:2] (blue, `subgoals`) added to the scene and a
  caption (mode, checkpoint step, episode step, distance to the target).
  """
  import mujoco  # pylint: disable=g-import-not-at-top
  model = env.wrapped_env.model
  data = mujoco.MjData(model)
  model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
  model.vis.global_.offheight = max(model.vis.global_.offheight, height)
  renderer = rendering.renderer(model, height, width)
  try:
    # Shadows and reflections make OSMesa (CPU) rendering ~10x slower.
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
    camera = env.maze_camera() if hasattr(env, 'maze_camera') else -1
    target = np.asarray(targets[episode], np.float64)
    target_pos = np.array([target[0], target[1], target[2] if target.shape[0] > 2 else 0.5])
    size = 0.05 * getattr(env, 'MAZE_SIZE_SCALING', 8)
    frames = []
    for t in range(0, len(recorded_qpos), every_n_steps):
      data.qpos[:] = recorded_qpos[t][episode]
      mujoco.mj_forward(model, data)
      renderer.update_scene(data, camera=camera)
      markers = [(target_pos, 2 * size, _MARKER_TARGET_RGBA)]
      if subgoals and recorded_subgoals[t] is not None:
        markers.append((np.array([*recorded_subgoals[t][episode], 0.5]), size, _MARKER_SUBGOAL_RGBA))
      scene = renderer.scene
      for pos, radius, rgba in markers:
        if scene.ngeom < scene.maxgeom:
          mujoco.mjv_initGeom(scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE, np.array([radius, 0., 0.]), pos,
                              np.eye(3).ravel(), np.asarray(rgba, np.float32))
          scene.ngeom += 1
      distance = f'  distance {distances[t - 1]:.2f}' if t > 0 else ''
      frames.append(_frame_text(renderer.render(), f'{mode}  checkpoint {step}  t = {t}{distance}'))
    return np.stack(frames)
  finally:
    renderer.close()


def write_video(frames, path, fps):
  """Writes uint8 [F, H, W, 3] frames to `path` + '.mp4' (ffmpeg on PATH) or else `path` + '.gif' (Pillow, with a
  warning saying how to get MP4). Returns the file written."""
  frames = np.asarray(frames, np.uint8)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  ffmpeg = shutil.which('ffmpeg')
  problem = 'ffmpeg is not on PATH'
  if ffmpeg:
    target = path + '.mp4'
    _, height, width, _ = frames.shape
    tmp = path + '.partial.mp4'  # renamed when complete
    for codec in ('libx264', 'mpeg4'):
      command = [
          ffmpeg, '-y', '-loglevel', 'error', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', f'{width}x{height}', '-r',
          str(fps), '-i', '-', '-an', '-c:v', codec, '-pix_fmt', 'yuv420p', '-f', 'mp4', tmp
      ]
      result = subprocess.run(command, input=frames.tobytes(), capture_output=True, check=False)
      if result.returncode == 0:
        os.replace(tmp, target)
        return target
      if os.path.exists(tmp):
        os.remove(tmp)
      problem = f'ffmpeg failed ({codec}): {result.stderr.decode(errors="replace").strip()[-300:]}'
  from PIL import Image  # pylint: disable=g-import-not-at-top
  logging.warning('Writing the evaluation video as a GIF (%s). For MP4 install ffmpeg, e.g. apt-get install ffmpeg.',
                  problem)
  target = path + '.gif'
  images = [Image.fromarray(frame) for frame in frames]
  tmp = path + '.partial.gif'
  images[0].save(tmp, format='GIF', save_all=True, append_images=images[1:], duration=max(1000 // fps, 20), loop=0)
  os.replace(tmp, target)
  return target


def check_settings(video_settings):
  """`video_settings` (None or a dict) completed with `VIDEO_DEFAULTS`, sizes made even (H.264 with yuv420p needs
  them).

  Raises:
    ValueError: an unknown key, or a value that is not a positive int (the message names it).
  """
  settings = dict(VIDEO_DEFAULTS)
  unknown = sorted(set(video_settings or {}) - set(VIDEO_DEFAULTS))
  if unknown:
    raise ValueError(f'evaluate.video_settings: unknown keys {unknown}; valid: {sorted(VIDEO_DEFAULTS)}.')
  settings.update(video_settings or {})
  for key, value in settings.items():
    if not isinstance(value, (int, np.integer)) or value < 1:
      raise ValueError(f'evaluate.video_settings[{key!r}] must be a positive int, got {value!r}.')
  settings['width'] -= settings['width'] % 2
  settings['height'] -= settings['height'] % 2
  return settings


def check_rendering(videos_optional):
  """Picks the OpenGL back end of the videos before any episode runs; returns whether videos are made.

  Raises:
    rendering.RenderingUnavailableError: no back end renders here and not `videos_optional` (the message says what
      to install, or how to evaluate without videos).
  """
  try:
    name = rendering.backend()
  except rendering.RenderingUnavailableError as e:
    if videos_optional:
      logging.warning('Evaluating without videos (evaluate.videos_optional = True): %s', e)
      return False
    raise rendering.RenderingUnavailableError(
        f'{e}\nTo evaluate without videos instead: --gin_param "evaluate.videos_optional = True" (videos when '
        'rendering works, none otherwise) or "evaluate.generate_videos = False".', e.attempts) from None
  logging.info('Evaluation videos: MuJoCo renders through MUJOCO_GL=%s.', name)
  return True


def write_mode_video(environments, num_episodes, targets, distances, mode, step, settings, eval_dir, subgoals=True):
  """Writes the first `num_episodes` recorded episodes of one mode, one after the other, to
  `<eval_dir>/videos/<mode>_hrl_step_<step>` (.mp4 or .gif); returns the file written.

  Args:
    environments: the `ParallelEnvironments` that recorded the episodes (`record(num_episodes)` before the rollout).
    num_episodes: k, the episodes drawn.
    targets: float [N, M], each episode's task target.
    distances: float [N, T], the distance to the target after each step (-meta reward).
    mode, step: the eval mode and the checkpoint's global step (file name and caption).
    settings: `check_settings`' dict (frame size, fps, every_n_steps).
    eval_dir: the evaluation directory.
    subgoals: draw the sub-goal (False with a learned representation: the goal is not a position).
  """
  start = time.time()
  frames = np.concatenate([
      render_frames(environments.envs[i], environments.recorded_qpos, environments.recorded_subgoals, i, targets,
                    distances[i], mode, step, settings['width'], settings['height'], settings['every_n_steps'],
                    subgoals=subgoals) for i in range(num_episodes)
  ])
  file = write_video(frames, os.path.join(eval_dir, VIDEO_DIR, f'{mode}_hrl_step_{step}'), settings['fps'])
  logging.info('Wrote %s (%d episodes, %d frames, %.1f s).', file, num_episodes, len(frames), time.time() - start)
  return file
