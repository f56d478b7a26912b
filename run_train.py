r"""Train HIRO (uvf) or IMPALA (scalable_agent); the gin configuration decides which.

Usage:
  python run_train.py CONFIG.gin [CONFIG.gin ...] [--gin_param 'NAME.PARAM = VALUE' ...] [--train_dir DIR]

Examples:
  python run_train.py configs/ant_maze.gin
  python run_train.py configs/ant_maze.gin --gin_param 'train_uvf.batch_size = 64' --train_dir runs/maze_b64
  python run_train.py configs/impala_dmlab.gin --num_actors=8 --batch_size=8

The original command lines keep working:
  HIRO:   python run_train.py --train_dir=DIR --config_file=configs/base_uvf.gin \
            --config_file=configs/train_uvf.gin --config_file=context/configs/hiro_orig.gin \
            --config_file=context/configs/ant_maze.gin [--params='BINDING' ...]
  IMPALA: python run_train.py --level_name=dmlab30 --num_actors=150 --batch_size=32 ... (experiment.py's flags)

The run directory (default runs/<config name>) records its configuration in run.json; rerunning the same
configuration resumes it, and a directory holding another run is refused.
"""

from absl import flags

import launcher

launcher.prepare_process()  # before TensorFlow loads
launcher.define_flags()
flags.adopt_module_key_flags(launcher)

if __name__ == '__main__':
  launcher.run('train')
