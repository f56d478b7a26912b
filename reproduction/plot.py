"""The PNG of an aggregate (`summary.aggregate`'s result), drawn with Pillow: the success rate of each seed and their
mean +- s.e. per eval mode, the paper's Table 1 value, the held-out policies, and the headline mode's mean final
distance (maze units) against the success distance. x: environment steps."""

import os

from reproduction import protocol
from reproduction import summary
from uvf import protocol as uvf_protocol

# Seeds' colours (the spread), the mean, its band, the paper's line.
_SEED_COLOURS = [(150, 150, 150), (170, 140, 110), (120, 160, 120), (160, 120, 160), (110, 150, 170),
                 (180, 150, 90), (140, 140, 180), (170, 120, 120), (120, 170, 160), (150, 160, 100)]
_MEAN, _BAND, _PAPER, _THRESHOLD = (20, 60, 200), (190, 205, 245), (210, 30, 30), (30, 150, 60)


class _Panel(object):
  """One x-y panel of the PNG: data coordinates to pixels, axes, ticks, lines."""

  def __init__(self, draw, font, box, x_max, y_range, title):
    self.d, self.font = draw, font
    self.x0, self.y1, self.x1, self.y0 = box  # left, top, right, bottom (pixels)
    self.x_max = max(float(x_max), 1.0)
    self.y_low, self.y_high = y_range
    draw.rectangle([self.x0, self.y1, self.x1, self.y0], outline='black')
    draw.text((self.x0, self.y1 - 16), title, fill='black', font=font)
    for i in range(6):
      s, v = self.x_max * i / 5, self.y_low + (self.y_high - self.y_low) * i / 5
      draw.line([self.sx(s), self.y0, self.sx(s), self.y0 + 4], fill='black')
      draw.text((self.sx(s) - 14, self.y0 + 6), summary.steps_label(s), fill='black', font=font)
      draw.line([self.x0 - 4, self.sy(v), self.x0, self.sy(v)], fill='black')
      draw.text((self.x0 - 40, self.sy(v) - 6), f'{v:.3g}', fill='black', font=font)

  def sx(self, step):
    return self.x0 + (self.x1 - self.x0) * step / self.x_max

  def sy(self, value):
    value = min(max(value, self.y_low), self.y_high)
    return self.y0 - (self.y0 - self.y1) * (value - self.y_low) / (self.y_high - self.y_low)

  def line(self, steps, values, colour, width=1, dots=False):
    xy = [(self.sx(s), self.sy(v)) for s, v in zip(steps, values) if v is not None]
    if len(xy) > 1:
      self.d.line(xy, fill=colour, width=width)
    if dots or len(xy) == 1:
      for x, y in xy:
        self.d.ellipse([x - 2, y - 2, x + 2, y + 2], fill=colour)

  def marker(self, step, value, colour, shape, size=5):
    x, y = self.sx(step), self.sy(value)
    if shape == 'diamond':
      self.d.polygon([(x, y - size), (x + size, y), (x, y + size), (x - size, y)], fill=colour, outline='black')
    else:
      self.d.rectangle([x - size + 1, y - size + 1, x + size - 1, y + size - 1], fill=colour, outline='black')

  def band(self, steps, low, high, colour):
    upper = [(self.sx(s), self.sy(v)) for s, v in zip(steps, high)]
    lower = [(self.sx(s), self.sy(v)) for s, v in zip(steps, low)]
    if len(upper) > 1:
      self.d.polygon(upper + lower[::-1], fill=colour)

  def hline(self, value, colour, label):
    y = self.sy(value)
    for x in range(int(self.x0), int(self.x1), 12):
      self.d.line([x, y, min(x + 6, self.x1), y], fill=colour, width=2)
    self.d.text((self.x1 - 7 * len(label) - 4, y - 14), label, fill=colour, font=self.font)


def draw_png(result, path, name, width=1000, panel_height=260):
  """The curves of `aggregate`'s result as a PNG (Pillow): one panel per eval mode with the success rate of each
  seed (thin, the spread), the mean over seeds (thick) with its +- s.e. band and, for the paper's mode, the paper's
  Table 1 value (dashed red); then the primary mode's mean final distance, with the success distance 5."""
  from PIL import Image, ImageDraw, ImageFont  # pylint: disable=g-import-not-at-top
  modes = [result['primary_mode']] + [m for m in result['modes'] if m != result['primary_mode']]
  panels = len(modes) + 1
  extra = summary.heldout_lines(result)
  left, right, top, gap = 70, 20, 60 + 16 * len(extra), 70
  height = top + panels * (panel_height + gap)
  image = Image.new('RGB', (width, height), 'white')
  d = ImageDraw.Draw(image)
  font = ImageFont.load_default()
  budget = result['budget']
  x_max = max([budget] + [p['step'] for e in result['modes'].values() for pts in e['per_seed'].values()
                          for p in pts])
  lines = summary.summary_lines(result)
  d.text((10, 8), f'{name}: {result["protocol"]["task"]}, {len(result["seeds"])} seeds, Table 1 budget '
         f'{budget:,} steps', fill='black', font=font)
  d.text((10, 24), lines[0], fill='black', font=font)
  for k, line in enumerate(extra):
    d.text((10, 40 + 16 * k), line.strip(), fill='black', font=font)
  d.text((10, 40 + 16 * len(extra)), 'thin: each seed; thick: mean over seeds, band +- s.e.' + (
      '; black-edged diamond: a seed\'s best policy held out, square: its final policy held out' if extra else ''),
         fill='black', font=font)

  def draw_mode(index, mode, key, y_range, title):
    entry = result['modes'][mode]
    box_top = top + index * (panel_height + gap) + 20
    panel = _Panel(d, font, (left, box_top, width - right, box_top + panel_height), x_max, y_range, title)
    curve = entry['curve']
    steps = [row['step'] for row in curve]
    mean = [row[f'{key}_mean'] for row in curve]
    se = [row[f'{key}_se'] or 0.0 for row in curve]
    panel.band(steps, [m - s for m, s in zip(mean, se)], [m + s for m, s in zip(mean, se)], _BAND)
    for k, (seed, points) in enumerate(sorted(entry['per_seed'].items())):
      field = 'success' if key == 'success' else 'distance'
      panel.line([p['step'] for p in points], [p[field] for p in points], _SEED_COLOURS[k % len(_SEED_COLOURS)],
                 dots=True)
    panel.line(steps, mean, _MEAN, width=3)
    return panel

  for index, mode in enumerate(modes):
    goal = result['modes'][mode]['goal']
    panel = draw_mode(index, mode, 'success', (0.0, 1.0), f'success rate, {mode} (goal {goal})')
    if mode == result['primary_mode'] and result.get('heldout'):
      seeds = sorted(result['modes'][mode]['per_seed'])
      for seed, chosen in result['heldout']['per_seed'].items():
        colour = _SEED_COLOURS[seeds.index(seed) % len(_SEED_COLOURS)] if seed in seeds else _MEAN
        for key, shape in (('best', 'diamond'), ('final', 'square')):
          if chosen[f'{key}_heldout'] is not None:
            panel.marker(chosen[f'{key}_step'], chosen[f'{key}_heldout'], colour, shape)
    if mode == result['primary_mode'] and result['paper']:
      paper = result['paper']
      label = (f'paper Table 1: {paper["success"]:.2f} +- {paper["standard_error"]:.2f} (best within '
               f'{summary.steps_label(paper["steps"])})')
      panel.hline(paper['success'], _PAPER, label)
  mode = result['primary_mode']
  distances = [p['distance'] for pts in result['modes'][mode]['per_seed'].values() for p in pts]
  high = max(distances + [2 * uvf_protocol.SUCCESS_DISTANCE]) * 1.05
  panel = draw_mode(len(modes), mode, 'distance', (0.0, high), f'mean final distance, {mode}')
  panel.hline(uvf_protocol.SUCCESS_DISTANCE, _THRESHOLD, f'success: distance < {uvf_protocol.SUCCESS_DISTANCE:g}')
  d.text((width // 2 - 60, height - 18), 'environment steps', fill='black', font=font)
  tmp = path + '.tmp.png'
  image.save(tmp)
  os.replace(tmp, path)
