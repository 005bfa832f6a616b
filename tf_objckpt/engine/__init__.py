"""The I/O engine: the layer that moves checkpoint bytes.

Layer 1 of 5 (engine). It reads and writes bundles (`SaveV2`, `RestoreV2`,
`MergeV2Checkpoints`, through `functional_saver`), checks and executes
restores' read plans (`read_plan`), parses `.index` tables, shards,
batches variable reads, writes asynchronously, commits (temporary names,
renames, directory locks, fsync, cleanup after crashes), and keeps
TensorFlow-version shims. It may use TensorFlow, the foundation
(`foundation/`, `version`) and the engine's own modules; nothing above.
"""
