"""What the API's classes are made of, behind `util` and `checkpoint`.

Layer 4 of 5 (api), with `util`, `checkpoint`, `saver` and
`checkpoint_management`: load statuses and the manager's restore of the
newest intact checkpoint. It may use every layer below (objects, plans,
engine, foundation) and the API layer; never the tools.
"""
