"""Evaluate HIRO (uvf) checkpoints, or run IMPALA (scalable_agent) in test mode; the gin configuration decides.

`python run_eval.py --help` prints the usage, with examples, and every flag. The program is
`launcher.programs.script_main` (the usage text: `launcher.programs.USAGE`); an installed package has it as the
command `hiro-impala-eval`.
"""

from launcher import programs

if __name__ == '__main__':
  programs.script_main('eval', 'python run_eval.py')
