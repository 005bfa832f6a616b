"""The plans layer: the saveables, and the restore walk's internals.

Layer 2 of 5 (plans), behind `restore` and `saveable_object_util`, which
re-export TensorFlow's names from here. Here: the saveables objects and
named variables save and restore as (`trackable_saveables`,
`named_saveables`, `keras3_variables`); the restore walk
(`checkpoint_position`, `restore_walk`, `node_binding`,
`keras3_slot_binding`) and the coordinator of one restore; the building of
each restore step's read plan (the engine checks and executes it); the
object-graph check (and the index of the graph a restore reads); initial
values of variables created during a restore; name-based matching; Keras
3 and v1-optimizer slot mapping; and restore reports. It may use the
engine (layer 1), the foundation modules and the plans layer; never
objects (`base`, `graph_view`, ...) or the API.
"""
