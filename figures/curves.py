"""Learning curves as a PNG: panels stacked over one x axis, drawn with matplotlib's Agg canvas (no pyplot).

  panels = [curves.Panel('success rate, eval2', 'success rate', [
      curves.Series(steps, seed_0, 'seed 0', color='tab:orange', marker='o'),
      curves.Series(steps, mean, 'mean over seeds +- s.e.', linewidth=2.5, band=(mean - se, mean + se))],
      hlines=[(0.92, 'paper: 0.92 +- 0.04 at 10M')], ylim=(0, 1))]
  description = curves.draw('ant_push.png', panels, 'AntPush: 2 seeds, 3M steps', 'environment steps')

Each panel has its title, y label, series, dashed horizontal lines (each with its legend entry) and a legend box to
the right of its plot (it never covers the data). The x axis is shared: ticks at round values (`MaxNLocator`)
labelled as steps are read ('0', '500k', '1M', '2.5M'); the y ticks are round values too. Fonts are matplotlib's
own (DejaVu Sans), so the same inputs give the same PNG bytes on every machine with the same matplotlib: no
timestamp, no 'Software' entry. `draw` returns a description of what it drew (titles, labels, number of points and
their ranges, the lines' values; JSON-ready) and stores it in the PNG's 'Description' text chunk, where `read_png`
finds it again: a test checks the chart a user sees without comparing pixels.
"""

import dataclasses
import json
import os
import struct
from typing import Any, Dict, List, Optional, Sequence, Tuple, TYPE_CHECKING, Union

import matplotlib
from matplotlib import ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
import numpy as np

if TYPE_CHECKING:
  from matplotlib import typing as mpl_typing
  from matplotlib.axes import Axes

# The x or y values of a series: numbers (None or nan: a gap), as a sequence or an array.
Values = Union[Sequence[Optional[float]], np.ndarray[Any, Any]]
_Floats = np.ndarray[Any, np.dtype[np.float64]]

# Colours for several series of one kind (the seeds of a run): matplotlib's tab10 without the blue, red and green
# that `MEAN`, `PAPER` and `THRESHOLD` stand for.
PALETTE = ('tab:orange', 'tab:purple', 'tab:brown', 'tab:pink', 'tab:olive', 'tab:cyan', 'tab:gray', '#8c6d31',
           '#7b4173', '#3182bd')
MEAN, PAPER, THRESHOLD = '#1f3fbf', 'tab:red', 'tab:green'

# Sizes in pixels (at `DPI`) and fonts in points.
DPI = 100
_LEFT, _RIGHT = 80, 12  # left of the plots (room for the y labels); right of the legends
_TITLE_H, _NOTE_H, _PANEL_TITLE_H, _TICKS_H, _XLABEL_H = 24, 15, 26, 36, 24
_STYLE: 'Dict[mpl_typing.RcKeyType, Any]' = {
    'font.family': 'DejaVu Sans',
    'font.size': 9,
    'axes.titlesize': 10,
    'axes.labelsize': 9,
    'legend.fontsize': 8,
    'xtick.labelsize': 8.5,
    'ytick.labelsize': 8.5,
    'axes.grid': True,
    'grid.color': '0.9',
    'grid.linewidth': 0.8,
    'axes.axisbelow': True,
    'axes.edgecolor': '0.3',
    'figure.facecolor': 'white',
    'savefig.facecolor': 'white',
    'path.simplify': True
}
_TITLE_PT, _NOTE_PT = 12, 8.5


@dataclasses.dataclass
class Series:
  """One curve of a panel: y against x (same length; None or nan in y leaves a gap).

  label: its legend entry (None: not in the legend). color: a matplotlib colour; `colors`: one per point instead
  (markers only, e.g. each seed's colour; the legend shows a grey marker). linewidth in points (0: markers only),
  marker ('o', 's', 'D', '.'; None: none) and markersize in points, edgecolor of the markers. yerr: +- error bars per
  point. band: (low, high) per point, shaded in the series' colour behind it (one legend entry with the line).
  """
  x: Values
  y: Values
  label: Optional[str] = None
  color: 'Optional[mpl_typing.ColorType]' = None
  colors: 'Optional[Sequence[mpl_typing.ColorType]]' = None
  linewidth: float = 1.0
  linestyle: str = '-'
  marker: Optional[str] = None
  markersize: float = 3.0
  edgecolor: 'Optional[mpl_typing.ColorType]' = None
  alpha: float = 1.0
  yerr: Optional[Values] = None
  band: Optional[Tuple[Values, Values]] = None
  zorder: float = 2.0


@dataclasses.dataclass
class HLine:
  """A dashed horizontal line across a panel at y = value, with its legend entry."""
  value: float
  label: str
  color: 'mpl_typing.ColorType' = PAPER
  linestyle: str = '--'


@dataclasses.dataclass
class Panel:
  """One plot: its title (above it; '' for none), y label, series (drawn in order, the first lowest), horizontal
  lines (`HLine`s or (value, label[, color]) tuples) and y range (None: fitted to the data and the lines)."""
  title: str
  ylabel: str
  series: Sequence[Series]
  hlines: Sequence[Union[HLine, Tuple[Any, ...]]] = ()
  ylim: Optional[Tuple[float, float]] = None


def steps_label(value: float, _: Any = None) -> str:
  """An x tick as steps or frames are read: '0', '700', '500k', '1M', '2.5M', '1.2B' (a `FuncFormatter`)."""
  for scale, suffix in ((1e9, 'B'), (1e6, 'M'), (1e3, 'k')):
    if abs(value) >= scale:
      return f'{value / scale:.4g}{suffix}'
  return f'{value:.4g}'


def _floats(values: Values) -> _Floats:
  return np.array([np.nan if v is None else v for v in values], np.float64)


def _hline(line: Union[HLine, Tuple[Any, ...]]) -> HLine:
  return line if isinstance(line, HLine) else HLine(*line)


def _range(values: _Floats) -> Optional[List[float]]:
  finite = values[np.isfinite(values)]
  return [float(finite.min()), float(finite.max())] if finite.size else None


def _wrap(text: str, points: float, width: float, weight: str = 'normal') -> List[str]:
  """`text` as lines no wider than `width` pixels in DejaVu Sans of `points` (measured; continuation lines indented
  by two spaces)."""
  renderer, font = RendererAgg(width, 100, DPI), FontProperties(family='DejaVu Sans', size=points, weight=weight)
  lines: List[str] = []
  for word in text.split(' '):
    candidate = f'{lines[-1]} {word}' if lines else word
    if lines and renderer.get_text_width_height_descent(candidate, font, ismath=False)[0] <= width:
      lines[-1] = candidate
    else:
      lines.append(('  ' if lines else '') + word)
  return lines or ['']


def _plot_series(ax: 'Axes', s: Series) -> Tuple[Any, Dict[str, Any]]:
  """Draws `s` on `ax`; returns (legend handle, description)."""
  x, y = _floats(s.x), _floats(s.y)
  if x.shape != y.shape:
    raise ValueError(f'series {s.label!r}: {x.size} x values, {y.size} y values')
  style: Dict[str, Any] = {'alpha': s.alpha, 'zorder': s.zorder}
  band: Any = None
  handle: Any
  if s.band is not None:
    low, high = _floats(s.band[0]), _floats(s.band[1])
    band = ax.fill_between(x, low, high, color=s.color, alpha=0.25 * s.alpha, linewidth=0, zorder=s.zorder - 0.1)
  if s.colors is not None:
    ax.scatter(x, y, c=list(s.colors), marker=s.marker or 'o', s=s.markersize**2, edgecolors=s.edgecolor,
               linewidths=0.8, **style)
    handle = Line2D([], [], linestyle='none', marker=s.marker or 'o', markersize=s.markersize, markerfacecolor='0.75',
                    markeredgecolor=s.edgecolor or '0.75')
  else:
    line: Dict[str, Any] = {
        'color': s.color,
        'linewidth': s.linewidth,
        'linestyle': s.linestyle if s.linewidth else 'none',
        'marker': s.marker,
        'markersize': s.markersize,
        'markeredgecolor': s.edgecolor,
        'markeredgewidth': 0.8 if s.edgecolor is not None else None
    }
    if s.yerr is not None:
      handle = ax.errorbar(x, y, yerr=_floats(s.yerr), ecolor=s.color, elinewidth=1.2, capsize=3, **line, **style)
    else:
      handle = ax.plot(x, y, **line, **style)[0]
      if not s.linewidth and s.marker and s.markersize < 5:  # Points too small to see in the legend: a bigger one.
        handle = Line2D([], [], linestyle='none', marker=s.marker, markersize=5, color=s.color,
                        markeredgecolor=s.edgecolor, alpha=max(s.alpha, 0.6))
  if band is not None:
    handle = (Patch(facecolor=band.get_facecolor()[0], linewidth=0), handle)
  kept = np.isfinite(x) & np.isfinite(y)
  return handle, {'label': s.label, 'points': int(kept.sum()), 'x': _range(x[kept]), 'y': _range(y[kept])}


def _layout(fig: Figure, axes: Sequence['Axes'], height: float, panel_height: float, top: float,
            legend_width: float) -> None:
  """Places each panel's plot (pixels from the top of the figure: `top`, then one block per panel)."""
  width = fig.bbox.width
  right = width - _RIGHT - legend_width
  block = _PANEL_TITLE_H + panel_height + _TICKS_H
  for k, ax in enumerate(axes):
    bottom_px = top + k * block + _PANEL_TITLE_H + panel_height
    ax.set_position((_LEFT / width, 1 - bottom_px / height, (right - _LEFT) / width, panel_height / height))


def draw(path: str, panels: Sequence[Panel], title: str, xlabel: str, notes: Sequence[str] = (),
         xlim: Optional[Tuple[float, float]] = None, width: int = 1000, panel_height: int = 260) -> Dict[str, Any]:
  """Writes the PNG of `panels` (stacked, one x axis) to `path` (replaced atomically).

  Args:
    path: the PNG to write.
    panels: `Panel`s, top to bottom.
    title: the chart's title (wrapped to the width).
    xlabel: the x axis' label, below the last panel.
    notes: lines of smaller text below the title (each wrapped to the width).
    xlim: (low, high) of x; None: from 0 (or the lowest x below 0) to the highest x of all series, 1% wider so
      that markers at the ends are whole.
    width: pixels.
    panel_height: pixels of each panel's plotting area (its title and tick labels come on top).

  Returns:
    what was drawn, JSON-ready (also in the PNG, `read_png`): {'title', 'xlabel', 'notes', 'size': [width, height]
    in pixels, 'xlim', 'xticks' (their labels), 'panels': [{'title', 'ylabel', 'ylim', 'yticks' (values), 'series':
    [{'label', 'points' (finite (x, y) pairs), 'x', 'y' ([min, max] of those points, or None)}], 'hlines':
    [{'value', 'label'}], 'legend': [labels]}]}.
  """
  with matplotlib.rc_context(_STYLE):
    note_lines = [w for line in notes for w in _wrap(line, _NOTE_PT, width - 20)]
    title_lines = _wrap(title, _TITLE_PT, width - 20, 'bold')
    top = 10 + _TITLE_H * len(title_lines) + _NOTE_H * len(note_lines) + 4
    height = top + len(panels) * (_PANEL_TITLE_H + panel_height + _TICKS_H) + _XLABEL_H
    # + 0.01 pixel: the canvas truncates width / dpi * dpi, which may fall just below the whole number.
    fig = Figure(figsize=((width + 0.01) / DPI, (height + 0.01) / DPI), dpi=DPI)
    canvas = FigureCanvasAgg(fig)
    y = 10
    for line in title_lines:
      fig.text(10 / width, 1 - y / height, line, fontsize=_TITLE_PT, fontweight='bold', va='top')
      y += _TITLE_H
    for line in note_lines:
      fig.text(10 / width, 1 - y / height, line, fontsize=_NOTE_PT, color='0.25', va='top')
      y += _NOTE_H
    axes = [fig.add_axes((0, 0, 1, 1)) for _ in panels]
    described: List[Dict[str, Any]] = []
    legends: List[Tuple['Axes', Any]] = []
    for ax, panel in zip(axes, panels):
      handles: List[Tuple[Any, str]] = []
      entries: List[Dict[str, Any]] = []
      for s in panel.series:
        handle, entry = _plot_series(ax, s)
        entries.append(entry)
        if s.label:
          handles.append((handle, s.label))
      lines = [_hline(h) for h in panel.hlines]
      for h in lines:
        artist = ax.axhline(h.value, color=h.color, linestyle=h.linestyle, linewidth=1.5, zorder=1.5)
        handles.append((artist, h.label))
      if panel.ylim is not None:
        ax.set_ylim(*panel.ylim)
      if panel.title:
        ax.set_title(panel.title, loc='left', pad=6)
      ax.set_ylabel(panel.ylabel)
      ax.yaxis.set_major_locator(ticker.MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
      ax.xaxis.set_major_locator(ticker.MaxNLocator(nbins=8, steps=[1, 2, 2.5, 5, 10]))
      ax.xaxis.set_major_formatter(ticker.FuncFormatter(steps_label))
      if handles:
        legends.append((ax,
                        ax.legend([h for h, _ in handles], [label for _, label in handles], loc='upper left',
                                  bbox_to_anchor=(1.0, 1.0), borderaxespad=1.0, framealpha=1.0, edgecolor='0.6',
                                  borderpad=0.6, handlelength=2.2)))
      described.append({
          'title': panel.title,
          'ylabel': panel.ylabel,
          'series': entries,
          'hlines': [{
              'value': float(h.value),
              'label': h.label
          } for h in lines],
          'legend': [label for _, label in handles]
      })
    xs = [v for p in described for s in p['series'] if s['x'] for v in s['x']]
    if xlim is None:
      low, high = min(xs + [0.0]), max(xs + [1.0])
      xlim = (low, high + 0.01 * (high - low))
    for ax in axes:
      ax.set_xlim(*xlim)
    axes[-1].set_xlabel(xlabel)
    # The legends' width (once laid out) sets the plots' right edge: all plots as wide, every legend beside its own.
    _layout(fig, axes, height, panel_height, top, 0)
    renderer = canvas.get_renderer()
    legend_width = max(
        [legend.get_window_extent(renderer).x1 - ax.get_window_extent(renderer).x1 for ax, legend in legends] + [0])
    legend_width = min(legend_width, 0.45 * width)
    _layout(fig, axes, height, panel_height, top, legend_width)
    for ax, entry in zip(axes, described):
      low, high = ax.get_ylim()
      entry['ylim'] = [float(low), float(high)]
      entry['yticks'] = [float(f'{v:.12g}') for v in ax.get_yticks() if low <= v <= high]
    xticks = [steps_label(v) for v in axes[-1].get_xticks() if xlim[0] <= v <= xlim[1]]
    description = {
        'title': title,
        'xlabel': xlabel,
        'notes': list(notes),
        'size': [int(width), int(height)],
        'xlim': [float(v) for v in xlim],
        'xticks': xticks,
        'panels': described
    }
    tmp = path + '.tmp.png'
    fig.savefig(tmp, format='png', dpi=DPI, metadata={
        'Software': None,
        'Description': json.dumps(description, sort_keys=True)
    })
  os.replace(tmp, path)
  return description


def read_png(path: str) -> Dict[str, Any]:
  """{'size': [width, height] (pixels, from the PNG header), 'description': `draw`'s description, or None for a PNG
  that `draw` did not write}. Raises ValueError if `path` is not a PNG."""
  with open(path, 'rb') as f:
    data = f.read()
  if data[:8] != b'\x89PNG\r\n\x1a\n' or data[12:16] != b'IHDR':
    raise ValueError(f'{path} is not a PNG file')
  size = list(struct.unpack('>II', data[16:24]))
  position, description = 8, None
  while position + 8 <= len(data):
    length, kind = struct.unpack('>I4s', data[position:position + 8])
    body = data[position + 8:position + 8 + length]
    if kind == b'tEXt':
      key, _, text = body.partition(b'\0')
      if key == b'Description':
        description = json.loads(text.decode('latin-1'))
    elif kind == b'IEND':
      break
    position += 12 + length
  return {'size': size, 'description': description}
