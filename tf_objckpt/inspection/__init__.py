"""One checkpoint as data: its listing and the check of its integrity.

Layer 5 of 6 (api). `checkpoint_listing` models one checkpoint (keys,
shapes, files, object graph); `verify_checkpoint` finds what is damaged;
`object_metadata` reads its object graph and names its nodes.
The command line prints them, and self-healing restores (past damage to the
newest intact checkpoint, `api.self_healing`) decide by them. It may use every
layer below and the API layer; never the tools.
"""
