"""The run directory: what both systems, the launcher, evaluation and the reproduction kit share about it.

A run directory is where one training run (or evaluation) writes: its checkpoints, its `run.json` and `config.gin`,
its lock, its progress file and its TensorBoard events. This package is the one place that knows how to read,
repair and guard such a directory, so that a fix to one failure case (an unreadable checkpoint, a full disk, a
second writer) holds for HIRO and IMPALA alike and their messages agree:

  errors       exit statuses as named constants, and the user-facing errors that carry them
  formatting   sizes and durations as people read them ('459.2 MB', '3h07m05s')
  storage      free space and disk-full errors
  lock         `RunLock`: one writer per run directory, and who holds it
  progress     the machine-readable progress file a training run keeps up to date
  checkpoints  scanning, set-aside of unreadable checkpoints, clean-up of interrupted saves, index rebuild

It imports neither algorithm package, nor the launcher, nor the kit; all of them may import it.
"""
