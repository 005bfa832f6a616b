"""What the v1 `Saver`'s restores check first, and how their errors read.

Before a `Saver`'s restore op runs, the checkpoint's keys, dtypes and
shapes are checked against the op's read plan (`saver_builders.check_plan`),
so that an error which can be detected up front never leaves some
variables restored and others not. A saver that built its ops keeps the
plan its builder made; one given a `SaverDef` reads the plan from the
graph. Errors of the restore keep TensorFlow's type and text, led by the
likely cause.
"""

import weakref

from tf_objckpt.engine import checkpoint_opening
from tf_objckpt.engine import reads
from tf_objckpt.restoring import restore_plan
from tf_objckpt.v1 import saver_builders


def with_restore_hint(error, likely_cause):
  """`error` again, of its type, its message led by its likely cause.

  The text is TensorFlow's, which users and tests match on.
  """
  message = (
      "Restoring from checkpoint failed. This is most likely due to {} from "
      "the checkpoint. Please ensure that you have not altered the graph "
      "expected based on the checkpoint. Original error:\n\n{}").format(
          likely_cause, error.message)
  return type(error)(error.node_def, error.op, message)


class RestorePlans:
  """The read plan of one saver's restore op, and the last check made.

  Attributes:
    cached: (weak reference to the graph, restore op name, plan) of the
      plan last kept or read, or None.
  """

  def __init__(self):
    self.cached = None
    # (checkpoint file identity, plan) of the last successful check.
    self._last_verified = None

  def keep(self, graph, restore_op_name, plan):
    """Keeps `plan`, of the op `restore_op_name` in `graph`, if both given."""
    if restore_op_name is not None and plan is not None:
      self.cached = (weakref.ref(graph), restore_op_name, plan)

  def plan(self, graph, restore_op_name):
    """The plan of the restore op `restore_op_name` in `graph`, or None.

    Read from the graph when it was not kept. None when the restore op is
    not in `graph`: running it then raises TensorFlow's error.
    """
    cached = self.cached
    if (cached is None or cached[0]() is not graph or
        cached[1] != restore_op_name):
      try:
        plan = restore_plan.plan_from_graph(graph, restore_op_name)
      except (KeyError, ValueError, TypeError):
        return None
      self.keep(graph, restore_op_name, plan)
    return self.cached[2]

  def check(self, graph, restore_op_name, save_path):
    """Checks the checkpoint at `save_path` against the restore op's plan.

    Raises:
      NotFoundError, InvalidArgumentError: As the restore op would, before
        it assigns anything.
    """
    plan = self.plan(graph, restore_op_name)
    # Checking an unchanged checkpoint against the same plan again would
    # find the same: skip it when restoring repeatedly from one file.
    # Without a plan there is nothing to check: the restore op reports.
    identity = saver_builders.checkpoint_identity(save_path)
    if plan is not None and (identity is None or
                             self._last_verified != (identity, plan)):
      saver_builders.check_plan(plan, reads.readable_values(save_path))
      self._last_verified = (identity, plan)


def restored_values(save_path, plan):
  """(shape, dtype name) of each value a restore of `save_path` read.

  Those of `plan`, or, without one (eagerly), all of the checkpoint's.
  """
  values = reads.CheckpointValues(save_path,
                                  checkpoint_opening.open_reader(save_path))
  keys = ([value.key for value in plan.reads]
          if plan is not None else list(values.shapes))
  return [(values.shapes[key], values.dtypes[key].name)
          for key in keys
          if key in values.shapes]
