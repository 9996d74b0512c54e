"""Side-by-side benchmarks of ffrecord against the loaders users would otherwise pick.

Run ``python benchmarks/run.py --quick`` (about 2 minutes) or ``python benchmarks/run.py``
(about 10-15 minutes). Results go to ``benchmarks/results/<mode>.json`` and PNG plots beside it.
"""
