"""IMPALA (Espeholt et al. 2018) for TensorFlow 2: a faithful port of deepmind/scalable_agent.

Entry point: `python run_train.py configs/impala_dmlab.gin` (see docs/impala/training.md). The original command-line flags are the
gin parameters of `scalable_agent.experiment.experiment`.
"""
