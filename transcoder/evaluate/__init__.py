"""`transcoder evaluate` (issue 12, under way): codec x level x batch-size grid, scoring, recommendation.

So far: the grid from the command line's specs (`grid`). May import: transcoder.metrics and below.
"""
