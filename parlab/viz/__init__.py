"""Plot helpers: one small module per topic, matplotlib imported only here (never in the engines).

Helpers draw on a given Axes (or return a Figure from ``parlab.widgets.base.new_figure``) so that
both dashboards and static notebook cells use the same picture code.
"""
