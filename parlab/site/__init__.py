"""The course as a static site (``make site``), with calculators that run the cost model in the
reader's browser (Pyodide).

- ``calc``: the four calculators (memory, step time, pipeline Gantt, rank grid) as data (their
  controls) and one function each, inputs as strings in, shown numbers and an SVG out; the same
  module runs natively and, bundled by ``bundle``, in Pyodide.
- ``figures`` / ``svg``: the calculators' SVG figures, drawn in Python (no matplotlib).
- ``sanitize``: the allow-list (``nh3``, Ammonia) every notebook body and rendered markdown goes
  through: a page runs nothing a notebook's output or markdown holds.
- ``build``: renders the executed notebooks (``render``), the pages (``pages``), the search index
  (``search``), vendors Pyodide (``vendor``) and bundles the pure-Python packages (``bundle``).
- ``linkcheck``: every link and image of the built site resolves.

Only ``calc``, ``figures`` and ``svg`` are imported in the browser: they import nothing but the
standard library and ``parlab.costmodel`` / ``parlab.schedules`` / ``parlab.layout``.
"""
