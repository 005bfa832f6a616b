"""Trackables and their object graph, behind `base`, `tracking`, `graph_view`.

Layer 3 of 5 (objects), behind TensorFlow's names `base`, `tracking`,
`data_structures` and `graph_view`. Here: `Trackable` (`trackable`) and
`AutoTrackable` (`auto_trackable`); the walk of the object graph
(`graph_walk`) and its description as a `TrackableObjectGraph` with the
objects' saveables (`graph_serialization`); variables that trackables
create (`variable_creation`); how an assigned value becomes what a
trackable stores (`wrapping`), the containers' common base
(`structure_base`) and the containers themselves (`lists`, `dicts`,
`tuples`). It may use the plans, the engine, the foundation and the
objects layer; never the API or the tools.
"""
