"""Name-based (v1 `Saver`) checkpoints restored through the object-based API.

A checkpoint without an object graph, written by TensorFlow's or our v1
`Saver` (graph mode or eagerly), is restored into a `tf.Module`, a tf_keras
model and a Keras 3 model by `Checkpoint` (eagerly, into existing variables
and on creation) and by `CheckpointV1` in a graph (`initialize_or_restore`,
`run_restore_ops`). Every scenario runs once with TensorFlow's classes and
once with ours; values and the outcomes of the status assertions must agree.

Covers: tf_objckpt.restoring.name_based, tf_objckpt.api.load_status,
tf_objckpt.api.name_based_status, tf_objckpt.v1.saver_restores,
tf_objckpt.saveables.named_saveables.
"""

import logging as py_logging

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.util import deprecation
import tf_keras

import tf_objckpt
from tf_objckpt.restoring import name_based

import testlib as tl

# Keras 3 warns (inside Keras) about numpy 2's `copy` argument.
pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning")

# Who writes the name-based checkpoint, "<saver>_<mode>": (saver, eagerly).
WRITERS = {
    "tf_graph": ("tf", False),
    "tf_eager": ("tf", True),
    "ours_graph": ("ours", False),
    "ours_eager": ("ours", True)
}
TARGETS = ("module", "tf_keras", "keras3")


class _Net(tf.Module):
  """A module whose variables have fixed global names, built on demand."""

  def __init__(self, built):
    super().__init__(name="net")
    self.sub = tf.Module(name="sub")
    if built:
      self.build()

  def build(self):
    self.w = tf.Variable(tf.zeros([3, 2]), name="net/w")
    self.sub.b = tf.Variable(tf.zeros([2]), name="net/sub/b")
    self.step = tf.Variable(tf.constant(0, tf.int64), name="net/step")

  @property
  def weights(self):
    return [self.w, self.sub.b, self.step]


class _Model:
  """A Keras model (Dense, BatchNormalization, Dense) with fixed names.

  Kernels start at zero, so fresh models of both runs hold equal values.
  """

  def __init__(self, k, built):
    self._k = k
    layers = [
        k.layers.Dense(3, kernel_initializer="zeros", name="dense"),
        k.layers.BatchNormalization(name="bn"),
        k.layers.Dense(2, kernel_initializer="zeros", name="out")
    ]
    self.obj = k.Sequential(layers, name="seq")
    if built:
      self.build()

  def build(self):
    self.obj(np.zeros((1, 4), np.float32))

  @property
  def weights(self):
    if self._k is keras:
      return [w.value for w in self.obj.weights]  # The tf.Variables.
    return self.obj.weights


def _make_target(kind, built=True):
  """A fresh target; `.obj` is what is checkpointed, `.weights` its values."""
  if kind == "module":
    target = _Net(built)
    target.obj = target
    return target
  return _Model(keras if kind == "keras3" else tf_keras, built)


def _checkpointed_values(kind, with_save_counter, graph_mode=False):
  """`{global name: value}` for `kind`'s variables, none equal to a fresh one.

  Keras 3 variables have no global names of their own; their checkpoint
  uses the names Keras 2 gives the same model. Keras 2 names depend on the
  mode (in a graph they start with the model's name).
  """
  rng = np.random.RandomState(0)
  kind = "tf_keras" if kind == "keras3" else kind
  if graph_mode:
    with tf.Graph().as_default():
      target = _make_target(kind)
  else:
    target = _make_target(kind)
  values = {}
  for weight in target.weights:
    dtype = weight.dtype.as_numpy_dtype
    values[weight.name.split(":")[0]] = (rng.randint(
        1, 100, weight.shape) if dtype == np.int64 else rng.uniform(
            2., 3., weight.shape)).astype(dtype)
  if with_save_counter:
    values["save_counter"] = np.int64(7)
  return values


def _assert_restored(observed_values, values):
  """The target holds the checkpointed values (besides the save counter)."""
  expected = [v for name, v in values.items() if name != "save_counter"]
  np.testing.assert_equal(observed_values, expected)


def _eager_restore(impl, kind, path, on_create, options=None):
  target = _make_target(kind, built=not on_create)
  checkpoint = tl.IMPLS[impl].Checkpoint(model=target.obj)
  status = checkpoint.restore(path, options=options)
  observed = {
      "status": type(status).__name__,
      "before": tl.assertion_outcomes(status, messages=True)
  }
  if on_create:
    target.build()
    observed["after"] = tl.assertion_outcomes(status, messages=True)
  observed["values"] = [w.numpy() for w in target.weights]
  observed["save_counter"] = int(checkpoint.save_counter.numpy())
  return observed


@pytest.mark.parametrize("on_create", [False, True],
                         ids=["existing", "on_create"])
@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("writer", WRITERS)
def test_eager_restore(tmp_path, writer, kind, on_create):
  values = _checkpointed_values(kind, with_save_counter=False)
  saver_impl, eagerly = WRITERS[writer]
  path = tl.write_with_saver(saver_impl,
                             tmp_path / "ckpt",
                             values,
                             eager=eagerly)
  if kind == "keras3":
    # TensorFlow looks Keras 3 variables up under the key "VARIABLE_VALUE",
    # which a name-based checkpoint does not have, and those created later
    # not at all: nothing is restored. We match their paths (`seq/dense/
    # kernel` reads `dense/kernel`; a departure, see API.md).
    by_impl = tl.by_impl(_eager_restore, kind, path, on_create)
    stage = "after" if on_create else "before"
    reason = ("Object not restored" if on_create else
              "Some objects had attributes which were not restored")
    assert by_impl["tf"][stage] == [("AssertionError", reason)] * 3
    assert not np.any(by_impl["tf"]["values"][0])
    assert by_impl["ours"][stage] == ["ok"] * 3
    _assert_restored(by_impl["ours"]["values"], values)
    return
  observed = tl.agreed(_eager_restore, kind, path, on_create)
  assert observed["status"] == "NameBasedSaverStatus"
  assert observed["save_counter"] == 0
  final = observed["after" if on_create else "before"]
  # The save counter is optional: its absence fails no assertion.
  assert final == ["ok"] * 3
  _assert_restored(observed["values"], values)


@pytest.mark.parametrize("kind", ["module", "tf_keras"])
def test_eager_restore_with_save_counter_and_missing_variable(tmp_path, kind):
  values = _checkpointed_values(kind, with_save_counter=True)
  missing = sorted(values)[0]
  del values[missing]
  path = tl.write_with_saver("tf", tmp_path / "ckpt", values)
  observed = tl.agreed(_eager_restore, kind, path, False)
  assert observed["save_counter"] == 7
  assert observed["before"] == [
      ("AssertionError", "Some objects had attributes which were not restored")
  ] * 3


def test_keras3_variable_value_key_is_restored(tmp_path):
  """A Keras 3 model with one variable takes the "VARIABLE_VALUE" key."""
  value = np.arange(6, dtype=np.float32).reshape(3, 2)
  path = tl.write_with_saver("tf", tmp_path / "ckpt", {"VARIABLE_VALUE": value})

  def scenario(impl):
    model = keras.Sequential([
        keras.Input((3,)),
        keras.layers.Dense(2, use_bias=False, kernel_initializer="zeros")
    ])
    status = tl.IMPLS[impl].Checkpoint(model=model).restore(path)
    return (tl.assertion_outcomes(status,
                                  messages=True), model.weights[0].numpy())

  outcomes, restored = tl.agreed(scenario)
  assert outcomes == ["ok"] * 3
  np.testing.assert_array_equal(restored, value)


def _graph_restore(impl, kind, path, method, options=None):
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    target = _make_target(kind)
    checkpoint = tl.IMPLS[impl].CheckpointV1(model=target.obj)
    # TensorFlow's CheckpointV1.restore takes no options.
    status = (checkpoint.restore(path)
              if options is None else checkpoint.restore(path, options=options))
    observed = [
        type(status).__name__,
        tl.assertion_outcomes(status, messages=True)
    ]
    if method == "run_restore_ops":
      session.run(tf.compat.v1.global_variables_initializer())
      observed.append(
          tl.outcome(lambda: status.run_restore_ops(session)).described)
    else:
      observed.append(
          tl.outcome(lambda: status.initialize_or_restore(session)).described)
    observed.append(tl.assertion_outcomes(status, messages=True))
    uninitialized = session.run(
        tf.compat.v1.report_uninitialized_variables()).tolist()
    observed.append(sorted(uninitialized))
    if not uninitialized:
      observed.append(session.run(target.weights + [checkpoint.save_counter]))
    return observed


@pytest.mark.parametrize("method", ["initialize_or_restore", "run_restore_ops"])
@pytest.mark.parametrize("kind", TARGETS)
@pytest.mark.parametrize("writer", WRITERS)
def test_graph_restore(tmp_path, writer, kind, method):
  values = _checkpointed_values(kind, with_save_counter=True, graph_mode=True)
  saver_impl, eagerly = WRITERS[writer]
  path = tl.write_with_saver(saver_impl,
                             tmp_path / "ckpt",
                             values,
                             eager=eagerly)
  if kind == "keras3":
    by_impl = tl.by_impl(_graph_restore, kind, path, method)
    # TensorFlow: no "VARIABLE_VALUE" key. Ours matches the paths.
    assert by_impl["tf"][2][0] == "NotFoundError"
    observed = by_impl["ours"]
  else:
    observed = tl.agreed(_graph_restore, kind, path, method)
  assert observed[0] == "NameBasedSaverStatus"
  assert observed[2] == "ok"
  assert observed[3] == ["ok"] * 3
  _assert_restored(observed[-1][:-1], values)
  assert observed[-1][-1] == 7


@pytest.mark.parametrize("method", ["initialize_or_restore", "run_restore_ops"])
def test_graph_restore_needs_the_save_counter(tmp_path, method):
  """Unlike eager restores, a graph's name-based restore needs every name."""
  values = _checkpointed_values("module", with_save_counter=False)
  path = tl.write_with_saver("tf", tmp_path / "ckpt", values)
  observed = tl.agreed(_graph_restore, "module", path, method)
  assert observed[2][0] == "NotFoundError"
  if method == "run_restore_ops":
    # Nothing is assigned: the variables keep their initial values.
    assert not np.any(observed[-1][0])


def test_one_line_points_to_convert_where_tensorflow_warns(
    tmp_path, monkeypatch):
  """TensorFlow warns the feature is deprecated; we log how to convert."""
  path = tl.write_with_saver("tf",
                             tmp_path / "ckpt",
                             _checkpointed_values("module",
                                                  with_save_counter=False),
                             eager=True)
  hint = name_based.conversion_hint  # pylint: disable=protected-access

  def restore_twice(impl, level):
    # Both libraries log once per process; forget earlier restores.
    monkeypatch.setattr(deprecation, "_PRINTED_WARNING", {})
    monkeypatch.setattr(hint, "logged", False)
    with tl.captured_logs(level=level) as messages:
      for _ in range(2):
        tl.IMPLS[impl].Checkpoint(
            model=_make_target("module").obj).restore(path)
    return messages

  assert [m for m in restore_twice("tf", None) if "is deprecated" in m]
  assert restore_twice("ours", None) == []  # Nothing at default levels.
  assert [m for m in restore_twice("ours", py_logging.INFO) if "convert" in m
         ] == [
             f"Restoring {path!r} by variable names: it is a name-based "
             "checkpoint. `tf-objckpt convert` rewrites it as an "
             "object-based checkpoint, restored by object."
         ]


def _streaming_restore_eagerly(impl, path):
  """Eagerly, restores already stream: the call changes nothing."""
  lib = tl.IMPLS[impl]
  target = _make_target("module", built=False)
  checkpoint = lib.CheckpointV1(model=target.obj)
  status = checkpoint.restore(path)
  checkpoint.save_counter.assign(3)  # Restored: assigned since stays.
  outcome = tl.outcome(lib.checkpoint.streaming_restore, status).name
  target.build()  # Restored on creation.
  return {
      "streaming_restore": outcome,
      "status": tl.assertion_outcomes(status, messages=True),
      "save_counter": int(checkpoint.save_counter.numpy()),
      "values": [w.numpy() for w in target.weights]
  }


@pytest.mark.parametrize("graph_mode", [False, True], ids=["eager", "graph"])
def test_streaming_restore(tmp_path, graph_mode):
  """Not supported for name-based checkpoints when graph building."""
  values = _checkpointed_values("module", with_save_counter=True)
  path = tl.write_with_saver("tf", tmp_path / "ckpt", values)
  if not graph_mode:
    observed = tl.agreed(_streaming_restore_eagerly, path)
    assert observed["streaming_restore"] == "ok"
    assert observed["status"] == ["ok"] * 3
    assert observed["save_counter"] == 3
    _assert_restored(observed["values"], values)
    return

  def scenario(impl):
    lib = tl.IMPLS[impl]
    with tl.GraphProgram(impl) as program:
      status = lib.CheckpointV1(model=_make_target("module").obj).restore(path)
      return tl.outcome(lib.checkpoint.streaming_restore, status,
                        program.session).name

  assert tl.agreed(scenario) == "NotImplementedError"


@pytest.mark.parametrize("method",
                         ["initialize_or_restore", "run_restore_ops", "eager"])
def test_assignment_map_renames_checkpoint_scopes(tmp_path, method):
  """`CheckpointOptions(assignment_map=)` (ours only) in graphs and eagerly.

  The checkpoint's `old/...` names are restored into the module's `net/...`
  variables; without the map nothing matches them.
  """
  values = {
      name.replace("net/", "old/", 1): value for name, value in
      _checkpointed_values("module", with_save_counter=True).items()
  }
  path = tl.write_with_saver("tf", tmp_path / "ckpt", values)
  options = tf_objckpt.CheckpointOptions(assignment_map={"old/": "net/"})
  if method == "eager":
    observed = _eager_restore("ours", "module", path, False, options)
    observed = observed["values"] + [observed["save_counter"]]
  else:
    observed = _graph_restore("ours", "module", path, method, options)
    assert observed[2:4] == ["ok", ["ok"] * 3], observed
    observed = observed[-1]
  _assert_restored(observed[:-1], values)
  assert observed[-1] == 7
