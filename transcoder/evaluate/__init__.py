"""`transcoder evaluate` (issue 12): codec x level x batch-size grid, scoring, recommendation. Empty until then."""
