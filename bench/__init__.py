"""`make bench`: the performance suite (see bench/run.py)."""
