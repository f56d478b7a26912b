"""The reproduction kit: HIRO's Table 1 protocol over many seeds, run, watched and aggregated (`scripts/reproduce.py`;
docs/hiro/reproduction.md).

Modules, one job each, in import order: a module imports only modules listed above it (no cycles; nothing imports
`cli` but `scripts/reproduce.py`):

  protocol    the paper's protocol and Table 1 rows (`PaperResult`), a gin configuration's `Protocol`, the budgets
              (--steps <-> train_uvf.num_episodes_train)
  statistics  one score per seed: mean +- standard error, IQM and its 95% interval (rliable), seeds reaching a value
  results     a seed's evaluations (`<eval_dir>/results.json`) as curves; the Table 1 and Figure 4 views; the best
              policy over all seeds
  heldout     the held-out view beside Table 1: which policies are evaluated again, and their statistics
  summary     `aggregate` (everything reported, JSON-ready) and its text lines
  report      an aggregate's views as Markdown tables (ours in every view; one row per seed)
  plot        the PNG of an aggregate
  outputs     the aggregate as files (per_seed.csv, curves.csv, table1.csv, heldout.csv, table.md, summary.json,
              the PNG)
  progress    where a seed's training stands: its progress file, else its checkpoints
  processes   the kit's processes: started and recorded, found by the holders of their directories' locks, stopped
  seeds       one seed's job (`SeedSpec`, `SeedJob`, `run_seed`): train, evaluate every policy, the held-out policies
  plan        a launch's plan (`Plan`, `KitError`): configuration, seeds' commands, manifest, --results_from rows
  status      the --status table and the aggregate refresher of a running kit
  export      --export_best: the best policy over all seeds copied out to be published
  backends    the seeds' jobs at once: threads of the kit (`run_local`) or Ray tasks (`run_ray`)
  cli         the command line (argument parsing, `main`)

Outside the kit: `rundir` (locks, progress files, checkpoint listing, formatting, exit statuses) everywhere, and
`launcher` when planning (`plan`, which loads TensorFlow then) and for `console` (`cli`). Of `uvf`, only `uvf.protocol`
(success distance, results file, run length: constants without TensorFlow, which the kit's start-up, `--help` and its
Ray workers avoid).

Units: steps are environment steps (the global step of a checkpoint); success rates are fractions in [0, 1];
distances are maze units; times are seconds.
"""
