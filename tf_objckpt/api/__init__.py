"""The API's classes, behind `checkpoint`, `util` and `checkpoint_management`.

Layer 5 of 6 (api). Here: `Checkpoint` and `CheckpointV1`
(`object_checkpoints`), `TrackableSaver`, the save transaction, load
statuses, the session graph-mode calls run in, `CheckpointManager` and
which checkpoints it keeps (`retention`), and the manager's restore of the
newest intact checkpoint. It may use every layer below (restoring,
objects, saveables, engine, foundation) and the API layer; never the tools.
"""
