"""Plot helpers and notebook faces: one small module per topic, matplotlib imported only here
(never in the engines); ``viz`` never imports ``parlab.widgets`` (the dashboards import ``viz``).

- ``figures``: ``new_figure``, ``render_png`` (2x pixel density), ``show_figure`` (natural width);
- ``html``: ``html_table`` / ``show_table`` (HTML with a plain-text twin), ``check_yourself``;
- ``walls``, ``costmodel``, ``comm``: the pictures of each topic. Helpers draw on a given Axes (or
  return a Figure from ``new_figure``) so that dashboards and static notebook cells share them.
"""
