"""Reproduce HIRO's Table 1 on a task config: many seeds, each trained and evaluated on the paper's protocol.

  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root runs/reproduce_ant_maze
  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root ... --status

The command line of the reproduction kit, the package `reproduction/` (`reproduction.cli`; every flag: --help;
docs/hiro/reproduction.md).
"""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

from launcher import console  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from reproduction import cli  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

main = cli.main  # main(argv) -> exit status

if __name__ == '__main__':
  console.protect_streams()  # a closed terminal (SIGHUP) must not fail the kit's last lines
  sys.exit(main())
