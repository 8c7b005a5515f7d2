"""`transcoder migrate`: moving consumer groups from a source topic to its transcoded copy, and watching rollouts.

Staged migration (the commands plan, start: the copy runs in shadow, verify, cutover, rollback, finish):
`plan` gathers and renders a migration's facts before it starts; `target` names the destination a migration moves
consumers to; `state` keeps a migration's state in a compacted topic, and `lease` in it the hold that admits one
controller at a time; `controller` runs each step as I/O around `gates` (the cutover rules and the translation of
a group's offsets, pure); `groups` reads and moves consumer groups; `verify` reads both sides for content
verification and `compare` compares them (pure).
In-place rollouts (producers switched to a codec, nothing copied): `watch` samples the codecs the broker stores.
May import: transcoder.evaluate and below.
"""
