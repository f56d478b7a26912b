"""Train HIRO (uvf) or IMPALA (scalable_agent); the gin configuration decides which.

`python run_train.py --help` prints the usage, with examples, and every flag. The program is
`launcher.programs.script_main` (the usage text: `launcher.programs.USAGE`); an installed package has it as the
command `hiro-impala-train`.
"""

from launcher import programs

if __name__ == '__main__':
  programs.script_main('train', 'python run_train.py')
