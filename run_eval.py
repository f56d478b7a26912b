r"""Evaluate HIRO (uvf) checkpoints, or run IMPALA (scalable_agent) in test mode; the gin configuration decides.

Usage:
  python run_eval.py CONFIG.gin [--train_dir DIR] [--eval_dir DIR] [--gin_param 'NAME.PARAM = VALUE' ...]

Examples:
  python run_eval.py configs/ant_maze.gin                      # evaluates runs/ant_maze, writes runs/ant_maze/eval
  python run_eval.py configs/impala_dmlab30.gin --test_num_episodes=10

The original command lines keep working:
  HIRO:   python run_eval.py --checkpoint_dir=TRAIN_DIR --eval_dir=EVAL_DIR --config_file=configs/base_uvf.gin \
            --config_file=configs/eval_uvf.gin --config_file=context/configs/hiro_orig.gin \
            --config_file=context/configs/ant_maze.gin [--params='BINDING' ...]
  IMPALA: python run_eval.py --level_name=dmlab30 --logdir=DIR --test_num_episodes=10  (experiment.py --mode=test)
"""

from absl import flags

import launcher

launcher.prepare_process()  # before TensorFlow loads
launcher.define_flags()
flags.adopt_module_key_flags(launcher)

if __name__ == '__main__':
  launcher.run('eval')
