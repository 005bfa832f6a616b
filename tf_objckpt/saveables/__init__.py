"""Saveables: what objects and named variables save and restore as.

Layer 2 of 6 (saveables), behind `saveable_object_util` (and, for the
saveables of Python state, `saveable_object` and `base`). Here, in one
place, every saveable the package makes: those of variables
(`variable_saveables`), of trackables, by the protocol each implements
(`trackable_saveables`, `keras3_variables`), of Python state
(`python_state_saveables`), of variables named by the v1 `Saver`
(`named_saveables`), and of a v1 optimizer's values restored into a Keras
3 optimizer (`v1_optimizer_saveables`). Saves gather them (`objects`),
restores match them to a checkpoint's values (`restoring`), and the engine
writes and reads them: they are the engine's types
(`engine.saveable_objects`). It may use the engine and the foundation;
never objects, the restore walk or the API.
"""
