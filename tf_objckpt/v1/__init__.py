"""The v1 `Saver`'s internals, behind `saver`.

Layer 4 of 5 (api): the saver builders that make a `SaverDef`'s save and
restore ops. It may use every layer below and the API layer; never the
tools.
"""
