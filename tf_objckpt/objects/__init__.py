"""The trackable containers, behind TensorFlow's name `data_structures`.

Layer 3 of 5 (objects), with `base`, `tracking`, `data_structures` and
`graph_view`. Here: how an assigned value becomes what a trackable stores
(`wrapping`), the containers' common base (`structure_base`) and the
containers themselves (`lists`, `dicts`, `tuples`). It may use the plans,
the engine, the foundation modules and the objects layer; never the API or
the tools.
"""
