"""The project's charts, drawn with matplotlib off-screen (the Agg canvas: no pyplot, no display, matplotlib's global
state left as it was).

  curves   learning curves as a PNG: panels stacked over one x axis (environment steps or frames), each with its
           series (lines, points, markers with error bars, a +- s.e. band), dashed reference lines (the paper's value,
           a threshold) and a legend box; nice ticks, step labels such as 500k / 2.5M, deterministic PNG bytes, and a
           description of what was drawn, returned and stored in the PNG (`curves.read_png`)

A layer-0 package, like `rundir`: it imports nothing of the project (numpy and matplotlib only). The reproduction
kit's PNG (`reproduction/plot.py`) and the learning-curve scripts (`scripts/plot_learning_curve.py`,
`scripts/hiro_learning_check.py`, `scripts/atari_learning_run.py`) draw through it; the two systems (`uvf`,
`scalable_agent`) never import it.
"""
