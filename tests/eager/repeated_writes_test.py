"""Repeated writes of the same objects save their current state.

Between writes of an unchanged object graph, tf_objckpt reuses the object
graph proto and the variables' saveables. These tests change the state
between writes in every way that must still show in the next checkpoint,
eagerly and when graph building, and compare it with what TensorFlow
writes after the same changes.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import python_state

import compat_util as cu
import tf_objckpt


class _Counter(python_state.PythonState):
  """Python state saved as a string."""

  def __init__(self):
    self.count = 0

  def serialize(self):
    return str(self.count)

  def deserialize(self, string_value):
    self.count = int(string_value)


class _Table(tf_base.Trackable):
  """Saves one tensor per entry of a dict that may change between saves."""

  def __init__(self):
    self.entries = {"a": 1.0}

  def _serialize_to_tensors(self):
    return {name: tf.constant(value) for name, value in self.entries.items()}

  def _restore_from_tensors(self, restored_tensors):
    self.entries = {name: float(value.numpy())
                    for name, value in restored_tensors.items()}


def _objects():
  module = tf.Module()
  module.variables_list = [tf.Variable(float(i)) for i in range(20)]
  return {"m": module, "counter": _Counter(), "table": _Table()}


def _change(objects, step):
  """Changes every kind of state, differently at each step."""
  objects["m"].variables_list[step].assign(100.0 + step)
  objects["counter"].count = step
  objects["table"].entries = {"a": float(step)}
  if step == 2:  # The table now saves another attribute.
    objects["table"].entries["b"] = -1.0


def test_eager_writes_follow_the_state(tmp_path):
  checkpoints = {impl: cls(**_objects())
                 for impl, cls in cu.CHECKPOINT_CLASSES.items()}
  objects = {impl: {name: getattr(checkpoint, name) for name in _objects()}
             for impl, checkpoint in checkpoints.items()}
  for step in range(4):
    paths = {}
    for impl, checkpoint in checkpoints.items():
      _change(objects[impl], step)
      paths[impl] = checkpoint.write(os.fspath(tmp_path / f"{impl}{step}"))
    cu.assert_same_checkpoint(paths["tf"], paths["ours"])


@pytest.mark.parametrize("grow", [False, True])
def test_graph_saves_follow_the_state(tmp_path, grow):
  """In a session, variables and Python state are read at every save."""
  results = {}
  for impl, (autotrackable_cls, checkpoint_cls) in {
      "tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
      "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1)}.items():
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      root = autotrackable_cls()
      root.variables = [tf.compat.v1.get_variable(f"v{i}", initializer=0.)
                        for i in range(20)]
      root.counter = _Counter()
      checkpoint = checkpoint_cls(root=root)
      session.run(tf.compat.v1.global_variables_initializer())
      paths = []
      for step in range(3):
        session.run(root.variables[step].assign(10.0 + step))
        root.counter.count = step
        if grow and step == 1:
          root.extra = tf.compat.v1.get_variable("extra", initializer=5.)
          session.run(root.extra.initializer)
        paths.append(checkpoint.write(os.fspath(tmp_path / f"{impl}{step}"),
                                      session=session))
    results[impl] = paths
  for theirs, ours in zip(results["tf"], results["ours"]):
    cu.assert_same_checkpoint(theirs, ours)
  assert cu.values(results["ours"][-1])[
      "root/variables/2/.ATTRIBUTES/VARIABLE_VALUE"] == np.float32(12.0)
