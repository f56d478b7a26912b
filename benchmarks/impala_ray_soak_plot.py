r"""Draws the soaks of benchmarks/impala_ray_soak.py side by side: frames/s, resident memory and policy lag over time.

  python benchmarks/impala_ray_soak_plot.py --soaks docs/impala/soak/soak2 docs/impala/soak/soak16 \
      docs/impala/soak/soak150 --output docs/impala/soak/soaks.png

Each --soaks entry is the path prefix the soak wrote (`<prefix>.csv`, `<prefix>.json`). It also prints the table of
docs/impala/distributed.md (the soaks' frames/s, memory at the start and the end, its slope and the policy lag).
"""

import argparse
import csv
import json
import sys

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


def _read(prefix):
  with open(prefix + '.csv', encoding='utf-8') as f:
    rows = list(csv.DictReader(f))
  with open(prefix + '.json', encoding='utf-8') as f:
    summary = json.load(f)
  return rows, summary


def _column(rows, key):
  points = [(float(r['s']) / 60., float(r[key])) for r in rows if r.get(key) not in (None, '')]
  return [p[0] for p in points], [p[1] for p in points]


def table(soaks):
  """The markdown table of the soaks: one row each."""
  lines = [
      '| actors (processes) | minutes | learner frames/s (steps/s) | learner MB, first → last (MB/min, 2nd half) | '
      'actor + environment processes MB, first → last (MB/min) | Ray MB | tables: unrolls, weights | policy lag: '
      'mean, p50, p99 (unrolls) |', '|---|---|---|---|---|---|---|---|'
  ]
  for rows, summary in soaks:
    first, last, slope = summary['first'], summary['last'], summary['memory_slope_mb_per_min_second_half']
    lag = summary['lag_since_start'] or {}
    actors = lambda r: r['actor_mb_total'] + r['environment_mb_total']
    slope_actors = sum(v for k, v in slope.items() if k in ('actor_mb_total', 'environment_mb_total') and v is not None)
    tables = sorted({(r['unrolls_table'], r['weights_table']) for r in rows if r.get('unrolls_table') not in (None, '')
                    })
    lines.append(f'| {summary["num_actors"]} ({last["actor_processes"]}) | {summary["minutes"]:.0f} | '
                 f'{summary["frames_per_s_mean"]:.0f} ({summary["frames_per_s_mean"] / (32 * 20):.2f}) | '
                 f'{first["learner_mb"]:.0f} → {last["learner_mb"]:.0f} ({slope["learner_mb"]:+.1f}) | '
                 f'{actors(first):.0f} → {actors(last):.0f} ({slope_actors:+.1f}) | {last["ray_mb_total"]:.0f} | '
                 f'{", ".join(f"{u}/{w}" for u, w in tables)} | {lag.get("mean", float("nan")):.2f}, {lag.get("p50")}, '
                 f'{lag.get("p99")} ({lag.get("unrolls")}) |')
  return '\n'.join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
  parser.add_argument('--soaks', nargs='+', required=True)
  parser.add_argument('--output', required=True)
  args = parser.parse_args(argv)
  figure, axes = plt.subplots(1, 4, figsize=(17, 3.8))
  soaks = [_read(prefix) for prefix in args.soaks]
  print(table(soaks))
  for rows, summary in soaks:
    label = f'{summary["num_actors"]} actors' + (' (faults)' if summary.get('events') and
                                                 any('SIGKILL' in e['event'] for e in summary['events']) else '')
    x, frames = _column(rows, 'frames')  # the rate over 2-minute windows (samples and progress lines: every 30 s)
    rates = [(frames[i] - frames[i - 4]) / ((x[i] - x[i - 4]) * 60.) for i in range(4, len(x))]
    axes[0].plot(x[4:], rates, label=label)
    x, y = _column(rows, 'learner_mb')
    axes[1].plot(x, y, label=label)
    x, actors = _column(rows, 'actor_mb_total')
    _, environments = _column(rows, 'environment_mb_total')
    axes[2].plot(x, [a + e for a, e in zip(actors, environments)], label=label)
    x, y = _column(rows, 'lag_mean')
    line, = axes[3].plot(x, y, label=label + ', mean')
    x, y = _column(rows, 'lag_p99')
    axes[3].plot(x, y, linestyle=':', color=line.get_color(), label=label + ', p99')
  titles = ('learner frames/s (2-minute windows)', 'learner process, resident MB',
            'actor + environment processes, resident MB', 'policy lag, learner updates (last 30 s)')
  for axis, title in zip(axes, titles):
    axis.set_title(title, fontsize=10)
    axis.set_xlabel('minutes')
    axis.grid(alpha=.3)
  axes[0].legend(fontsize=8)
  axes[3].legend(fontsize=7)
  figure.tight_layout()
  figure.savefig(args.output, dpi=110)
  print(f'wrote {args.output}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
