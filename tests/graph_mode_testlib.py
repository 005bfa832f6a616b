"""Shared by the graph-mode tests: a small model trained in its own graph.

The model is `tf.compat.v1.get_variable` variables (resource, reference or
partitioned) tracked on an AutoTrackable (TensorFlow's or ours) and trained
by a `tf.compat.v1.train` optimizer, so checkpoints hold slot variables and
non-slot optimizer variables such as Adam's `beta1_power`.
"""

import functools

import tensorflow as tf
from tensorflow.python.trackable import autotrackable as tf_autotrackable
from tensorflow.python.trackable import python_state

import tf_objckpt
from tf_objckpt import base

IMPLS = {
    "tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
    "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1),
}
OPTIMIZERS = {
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.1),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
}
VARIABLE_KINDS = ("resource", "reference", "partitioned")


class Model:
  """A model in its own graph: root trackable, optimizer and checkpoint."""

  def __init__(self, impl, kind="resource", optimizer="adam",
               create_optimizer=True, seed=1):
    self.impl = impl
    self.kind = kind
    autotrackable_cls, self.checkpoint_cls = IMPLS[impl]
    self.graph = tf.Graph()
    self.session = tf.compat.v1.Session(graph=self.graph)
    with self.graph.as_default():
      init = tf.compat.v1.random_uniform_initializer(seed=seed)
      use_resource = kind != "reference"
      self.root = autotrackable_cls()
      self.root.w = tf.compat.v1.get_variable(
          "w", [3, 2], initializer=init, use_resource=use_resource)
      self.root.b = tf.compat.v1.get_variable(
          "b", [2], initializer=init, use_resource=use_resource)
      trained = [self.root.w, self.root.b]
      if kind == "partitioned":
        self.root.parts = list(tf.compat.v1.get_variable(
            "p", [4, 2], initializer=init,
            partitioner=tf.compat.v1.fixed_size_partitioner(2)))
        trained.extend(self.root.parts)
      self.trained = trained
      self.optimizer = OPTIMIZERS[optimizer]()
      self.checkpoint = self.checkpoint_cls(model=self.root,
                                            optimizer=self.optimizer)
      self.train_op = None
      if create_optimizer:
        self.create_slots()

  def create_slots(self):
    """Builds the training op, creating slot and non-slot variables."""
    with self.graph.as_default():
      x = tf.constant([[1., 2., 3.]])
      loss = tf.reduce_sum(tf.square(tf.matmul(x, self.root.w) + self.root.b))
      for part in self.trained[2:]:
        loss += tf.reduce_sum(tf.square(part))
      self.train_op = self.optimizer.minimize(loss)

  def variables(self):
    """Model and optimizer variables, labelled alike in every program."""
    return labelled_variables(
        {"w": self.root.w, "b": self.root.b,
         **{f"p{i}": part for i, part in enumerate(self.trained[2:])}},
        self.optimizer)

  def values(self):
    variables = self.variables()
    return dict(zip(variables, self.session.run(list(variables.values()))))

  def initialize(self):
    with self.graph.as_default():
      self.session.run(tf.compat.v1.global_variables_initializer())

  def train(self, steps=3):
    for _ in range(steps):
      self.session.run(self.train_op)

  def save(self, prefix):
    with self.graph.as_default():
      return self.checkpoint.save(prefix, session=self.session)

  def restore(self, path):
    with self.graph.as_default():
      return self.checkpoint.restore(path)

  def close(self):
    self.session.close()


def labelled_variables(variables, optimizer):
  """Adds an optimizer's slot and non-slot variables to `{label: variable}`.

  Labels do not depend on graph names, which differ between programs (and
  between eager and graph mode).
  """
  labelled = dict(variables)
  for label, variable in variables.items():
    for slot_name in optimizer.get_slot_names():
      slot = optimizer.get_slot(variable, slot_name)
      if slot is not None:
        labelled[f"{label}/{slot_name}"] = slot
  for (name, _), variable in optimizer._non_slot_dict.items():  # pylint: disable=protected-access
    labelled[name] = variable
  return labelled


class StringState(tf_objckpt.AutoTrackable):
  """Python state saved through a PythonStringStateSaveable factory."""

  impl = "ours"

  def __init__(self):
    super().__init__()
    self.state = "initial"
    self.restored = []

  def _gather_saveables_for_checkpoint(self):
    return {python_state.PYTHON_STATE: functools.partial(
        base.PythonStringStateSaveable, state_callback=lambda: self.state,
        restore_callback=self._restore)}

  def _restore(self, string_value):
    self.restored.append(string_value.decode())


class TfStringState(python_state.PythonState):
  """The same Python state, saved TensorFlow's way."""

  impl = "tf"

  def __init__(self):
    self.state = "initial"
    self.restored = []

  def serialize(self):
    return self.state

  def deserialize(self, string_value):
    self.restored.append(string_value.decode())
