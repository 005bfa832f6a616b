"""The restore walk: a checkpoint's object graph matched to the objects.

Layer 4 of 6 (restoring), above the objects it restores, behind `restore`
(TensorFlow's name for the module of `CheckpointPosition`). Here: the walk
(`restore_walk`, which binds nodes to objects: `node_binding`; its Keras 3
steps behind one hook: `keras3_slot_binding`, `keras3_slots`), its node
(`checkpoint_position`, what TensorFlow's trackables call), the state of
one restore and its one owner (`restore_coordinator`), the building of
each restore step's read plan (`restore_plan`; the engine checks and
executes it), the object-graph check and the index of the graph a restore
reads (`object_graph_check`), object maps (`object_maps`) and a restore's
dry run (`map_preview`), initial values of variables created during a
restore (`initial_values`), name-based restores (`name_based`,
`name_matching`, `v1_optimizer_state`), and restore reports. It may use
the objects, the saveables, the engine and the foundation; never the API
or the tools.
"""
