"""`transcoder evaluate`: what each codec, level and batch size would cost and save on a topic's records.

`grid` is the grid to measure (codec settings x batch sizes) from the command line; `sample` reads the records
(and the topic's facts) from a topic; `batches` cuts them into batches as transcoder's producers do; `measure`
compresses each batch, timed on the thread's CPU clock, and folds partitions into one figure per cell; `recommend`
prices each cell and chooses; `render` writes the results as a table, Markdown, JSON or CSV, `html` as a static
report with plots (written to a directory). `grid`, `batches`, `recommend` and `render` are pure.
Live scoring (`evaluate:` in a running config), shared by both engines: `live_windows` captures windows of
consecutive records of one partition, `live_scoring` scores them on a thread of its own with `measure`;
`evaluate --engine spark` measures with `measure` too.
May import: transcoder.metrics and below.
"""
