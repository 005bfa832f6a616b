"""The restore walk's internals: matching a checkpoint to objects.

Layer 2 of 5 (plans), with `restore` and the saveables
(`saveable_object_util`). Here: the coordinator of one restore, the
building of each restore step's read plan (the engine checks and executes
it), the object-graph check (and the index of the graph a restore reads),
initial values of variables created during a restore, name-based
matching, Keras 3 and v1-optimizer slot mapping, and restore reports. It
may use the engine (layer 1), the foundation modules and the plans layer;
never objects (`base`, `graph_view`, ...) or the API.
"""
