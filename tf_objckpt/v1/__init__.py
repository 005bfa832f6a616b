"""The v1 `Saver` and meta graphs, behind `saver`.

Layer 5 of 6 (api): the `Saver` (`name_based_saver`), which checkpoints it
keeps (`saver_retention`), what its restores check first
(`saver_restores`), the builders that make a `SaverDef`'s save and restore
ops, meta graphs, and object-based checkpoints read by variable names. It
may use every layer below and the API layer; never the tools.
"""
