"""The I/O engine: the layer that moves checkpoint bytes.

Layer 1 of 6 (engine). It reads and writes bundles (`SaveV2`, `RestoreV2`,
`MergeV2Checkpoints`, through `multi_device_saver`) from the saveables it
is given (of the types it declares: `saveable_objects`), checks and executes
restores' read plans (`read_plan`), parses `.index` tables, shards,
batches variable reads, writes asynchronously, commits (temporary names,
renames, directory locks, fsync, cleanup after crashes), and keeps
TensorFlow-version shims. It may use TensorFlow, the foundation
(`foundation/`, `version`) and the engine's own modules; nothing above.
"""
