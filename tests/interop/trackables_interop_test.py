"""Less common trackables, saved and restored like TensorFlow does.

`tf.train.experimental.PythonState`, trackables with their own
`_serialize_to_tensors`, variables of a `MirroredStrategy`, TensorFlow's and
our `NoDependency`, and containers changed after assignment. Each test runs
the same program with `tf.train.Checkpoint` and `tf_objckpt.Checkpoint`.

Covers: tf_objckpt.saveable_object_util, tf_objckpt.tracking,
tf_objckpt.data_structures, tf_objckpt.checkpoint,
tf_objckpt.objects.auto_trackable, tf_objckpt.api.object_checkpoints,
tf_objckpt.saveables.trackable_saveables.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import base as tf_base
from tensorflow.python.trackable import data_structures

import testlib as tl


@pytest.mark.parametrize("payload", [b"ascii text", b"\x00\xff\xfe binary"],
                         ids=["ascii", "binary"])
@pytest.mark.parametrize("impl", tl.IMPLS)
def test_python_state_deserialize_receives_bytes(tmp_path, impl, payload):
  path = tl.write("tf", tmp_path / "ckpt", state=tl.Recorder(payload))
  target = tl.Recorder(b"")
  tl.IMPLS[impl].Checkpoint(state=target).read(path).assert_consumed()
  assert target.received == [payload]
  assert isinstance(target.received[0], bytes)


@pytest.mark.parametrize("deferred", [False, True])
@pytest.mark.parametrize("writer", tl.IMPLS)
def test_documented_numpy_wrapper_round_trips(tmp_path, writer, deferred):
  source = tf.Module()
  source.numpy = tl.NumpyWrapper(np.arange(6.0).reshape(2, 3))
  path = tl.IMPLS[writer].Checkpoint(holder=source).save(
      os.fspath(tmp_path / "ckpt"))
  for impl, lib in tl.IMPLS.items():
    target = tl.NumpyWrapper(np.zeros(1))
    holder = tf.Module()
    if deferred:
      status = lib.Checkpoint(holder=holder).restore(path)
      holder.numpy = target
    else:
      holder.numpy = target
      status = lib.Checkpoint(holder=holder).restore(path)
    status.assert_consumed()
    np.testing.assert_array_equal(target.array,
                                  source.numpy.array,
                                  err_msg=impl)


class _TwoTensors(tf_base.Trackable):
  """A trackable saving two named tensors through _serialize_to_tensors."""

  def __init__(self, a, b):
    self.a = tf.Variable(a)
    self.b = tf.Variable(b)
    self.restores = 0

  def _serialize_to_tensors(self):
    return {"first": self.a.read_value(), "second": self.b.read_value()}

  def _restore_from_tensors(self, restored_tensors):
    self.restores += 1
    self.a.assign(restored_tensors["first"])
    self.b.assign(restored_tensors["second"])
    return tf.no_op()


def _custom_program(offset):
  module = tf.Module()
  module.pair = _TwoTensors(1.0 + offset, [2.0 + offset, 3.0])
  module.pairs = [_TwoTensors(4.0 + offset, 5.0)]
  return module


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_serialize_to_tensors_trackables(tmp_path, writer):
  paths = tl.write_both(tmp_path, tree=_custom_program(0.0))
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  for impl, lib in tl.IMPLS.items():
    target = _custom_program(100.0)
    lib.Checkpoint(tree=target).read(paths[writer]).assert_consumed()
    assert target.pair.restores == 1, impl
    assert float(target.pair.a.numpy()) == 1.0
    assert target.pair.b.numpy().tolist() == [2.0, 3.0]
    assert float(target.pairs[0].a.numpy()) == 4.0
    # Restore on attach.
    holder = tf.Module()
    lib.Checkpoint(tree=holder).read(paths[writer])
    holder.pair = _TwoTensors(0.0, [0.0, 0.0])
    assert float(holder.pair.a.numpy()) == 1.0, impl


class _SavesNothing(tf.Module):
  """Serializes no tensors, and has TensorFlow's `_restore_from_tensors`."""

  def _serialize_to_tensors(self):
    return {}


def test_object_that_saves_nothing_takes_the_place_of_a_variable(tmp_path):
  """As in TensorFlow: it matches, nothing is read, nothing is restored."""
  path = tl.write("tf", tmp_path / "ckpt", v=tf.Variable(1.))
  outcomes = {}
  for impl, lib in tl.IMPLS.items():
    status = tl.outcome(lib.Checkpoint(v=_SavesNothing()).read, path)
    assert status.error is None, (impl, status.error)
    outcomes[impl] = tl.assertion_outcomes(status.result)
  assert outcomes["ours"] == outcomes["tf"]


def test_mirrored_strategy_variables(tmp_path):
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

  def program(offset):
    with strategy.scope():
      module = tf.Module()
      module.v = tf.Variable([1.0 + offset, 2.0])
      module.on_read = tf.Variable(
          5.0 + offset,
          synchronization=tf.VariableSynchronization.ON_READ,
          aggregation=tf.VariableAggregation.SUM)
    return module

  paths = tl.write_both(tmp_path, tree=program(0.0))
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  for impl, lib in tl.IMPLS.items():
    target = program(100.0)
    lib.Checkpoint(tree=target).read(paths["tf"]).assert_consumed()
    assert target.v.numpy().tolist() == [1.0, 2.0], impl
    assert float(target.on_read.numpy()) == 5.0, impl
    holder = tf.Module()
    lib.Checkpoint(tree=holder).read(paths["ours"])
    with strategy.scope():
      holder.v = tf.Variable([0.0, 0.0])
    assert holder.v.numpy().tolist() == [1.0, 2.0], impl


def _no_dependency_program(auto_cls, no_dependency):
  obj = auto_cls()
  variable = tf.Variable(1.0)
  obj.x = no_dependency(variable)
  obj.items = no_dependency([variable])
  obj.kept = tf.Variable(2.0)
  return obj, variable


def test_tensorflows_no_dependency_is_unwrapped():
  """TF's NoDependency on our AutoTrackable acts as on TF's AutoTrackable."""
  results = {}
  for impl, lib in tl.IMPLS.items():
    obj, variable = _no_dependency_program(lib.AutoTrackable,
                                           data_structures.NoDependency)
    results[impl] = (obj.x is variable, type(obj.items).__name__,
                     sorted(obj._trackable_children()))  # pylint: disable=protected-access
  assert results["ours"] == results["tf"] == (True, "list", ["kept"])


def test_checkpoint_argument_wrapped_in_tensorflows_no_dependency(tmp_path):
  keys = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(x=data_structures.NoDependency(
        tf.Variable(1.0)),
                                y=tf.Variable(2.0))
    keys[impl] = sorted(
        tl.signature(checkpoint.write(os.fspath(tmp_path / impl))))
  assert keys["ours"] == keys["tf"]


def _mutate(name, obj):
  """Changes a container held by `obj` after assignment."""
  v = tf.Variable
  if name == "dict_setitem":
    obj.d = {"x": v(1.0)}
    obj.d["y"] = v(2.0)
  elif name == "dict_del":
    obj.d = {"x": v(1.0), "y": v(2.0)}
    del obj.d["x"]
  elif name == "dict_pop":
    obj.d = {"x": v(1.0)}
    obj.d.pop("x")
  elif name == "dict_int_key":
    obj.d = {1: v(1.0)}
  elif name == "dict_int_key_plain_value":
    obj.d = {1: 5, "a": v(1.0)}
  elif name == "list_append":
    obj.l = [v(1.0)]
    obj.l.append(v(2.0))
    obj.l.extend([v(3.0)])
  elif name == "list_setitem":
    obj.l = [v(1.0), v(2.0)]
    obj.l[0] = v(3.0)
  elif name == "list_pop":
    obj.l = [v(1.0), v(2.0)]
    obj.l.pop()
  elif name == "list_setitem_plain":
    obj.l = [v(1.0), 2]
    obj.l[1] = 5
  elif name == "list_imul":
    obj.l = [v(1.0)]
    obj.l *= 2
  elif name == "nested":
    obj.l = [[], {}]
    obj.l[0].append(v(1.0))
    obj.l[1]["k"] = v(2.0)
  elif name == "aliased_list":
    obj.a = [v(1.0)]
    obj.b = obj.a
    obj.b.append(v(2.0))
  else:
    raise ValueError(name)


_MUTATIONS = [
    "dict_setitem", "dict_del", "dict_pop", "dict_int_key",
    "dict_int_key_plain_value", "list_append", "list_setitem", "list_pop",
    "list_setitem_plain", "list_imul", "nested", "aliased_list"
]


@pytest.mark.parametrize("mutation", _MUTATIONS)
def test_changed_containers_save_like_tensorflows(tmp_path, mutation):
  """Our AutoTrackable's wrappers save or refuse as TF's AutoTrackable's."""
  outcomes, paths = {}, {}
  for impl, lib in tl.IMPLS.items():
    obj = lib.AutoTrackable()
    _mutate(mutation, obj)
    prefix = os.fspath(tmp_path / impl / "ckpt")
    outcomes[impl] = tl.outcome(tf.train.Checkpoint(obj=obj).write, prefix).name
    if outcomes[impl] == "ok":
      paths[impl] = prefix
  assert outcomes["ours"] == outcomes["tf"]
  if outcomes["tf"] == "ok":
    tl.assert_same_checkpoint(paths["tf"], paths["ours"])
