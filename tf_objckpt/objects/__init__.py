"""Trackables and their object graph, behind `base`, `tracking`, `graph_view`.

Layer 3 of 6 (objects), behind TensorFlow's names `base`, `tracking`,
`data_structures` and `graph_view`. Here: `Trackable` (`trackable`) and
`AutoTrackable` (`auto_trackable`); the walk of the object graph
(`graph_walk`) and its description as a `TrackableObjectGraph` with the
objects' saveables (`graph_serialization`); variables that trackables
create (`variable_creation`); how an assigned value becomes what a
trackable stores (`wrapping`), the containers' common base
(`structure_base`) and the containers themselves (`lists`, `dicts`,
`tuples`). A trackable restores through the position it is handed
(`restore_positions` declares what it asks of one), so it imports nothing
of the restore walk. It may use the saveables, the engine, the foundation
and the objects layer; never the restore walk, the API or the tools.
"""
