"""Repeated eager writes of the same objects save their current state.

Between writes of an unchanged object graph, tf_objckpt reuses the object
graph proto and the variables' saveables. This test changes the state
between writes in every way that must still show in the next checkpoint,
and compares it with what TensorFlow writes after the same changes. (Graph
mode: `graph/graph_mode_ops_test.py`.)

Covers: tf_objckpt.api.trackable_saver, tf_objckpt.graph_view,
tf_objckpt.objects.graph_walk, tf_objckpt.objects.graph_serialization.
"""

import os

import tensorflow as tf
from tensorflow.python.trackable import base as tf_base

import testlib as tl


class _Table(tf_base.Trackable):
  """Saves one tensor per entry of a dict that may change between saves."""

  def __init__(self):
    self.entries = {"a": 1.0}

  def _serialize_to_tensors(self):
    return {name: tf.constant(value) for name, value in self.entries.items()}

  def _restore_from_tensors(self, restored_tensors):
    self.entries = {
        name: float(value.numpy()) for name, value in restored_tensors.items()
    }


def _objects():
  module = tf.Module()
  module.variables_list = [tf.Variable(float(i)) for i in range(20)]
  return {"m": module, "counter": tl.Counter(), "table": _Table()}


def _change(objects, step):
  """Changes every kind of state, differently at each step."""
  objects["m"].variables_list[step].assign(100.0 + step)
  objects["counter"].count = step
  objects["table"].entries = {"a": float(step)}
  if step == 2:  # The table now saves another attribute.
    objects["table"].entries["b"] = -1.0


def test_eager_writes_follow_the_state(tmp_path):
  checkpoints = {
      impl: lib.Checkpoint(**_objects()) for impl, lib in tl.IMPLS.items()
  }
  objects = {
      impl: {
          name: getattr(checkpoint, name) for name in _objects()
      } for impl, checkpoint in checkpoints.items()
  }
  for step in range(4):
    paths = {}
    for impl, checkpoint in checkpoints.items():
      _change(objects[impl], step)
      paths[impl] = checkpoint.write(os.fspath(tmp_path / f"{impl}{step}"))
    tl.assert_same_checkpoint(paths["tf"], paths["ours"])
