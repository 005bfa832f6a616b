"""Sharding callbacks that hand back values, not the tensors they were given.

A `ShardingCallback` may return numpy values (TensorFlow's
`MaxShardSizePolicy` does for strings it measures in a default session):
slices of whole values, slices of values that were slices already, values
of keys it was not given, None, or tensors moved to another task. Each
value that lies within a tensor the callback was given is saved as a slice
of that tensor, so graph-mode saves, which reuse their save op, write the
variables' current values; other values are saved as they are, as
TensorFlow saves them. What would lose or misplace a value fails our save
with a RuntimeError, before anything is written. With
sharding_policies_test.py and interop/departures_test.py, these tests run
every branch of `tf_objckpt.engine.sharding`.

Covers: tf_objckpt.engine.sharding.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import base
from tensorflow.python.training.saving import saveable_object

import testlib as tl

_TASK_0 = "/job:localhost/replica:0/task:0/device:CPU:0"
_TASK_1 = "/job:localhost/replica:0/task:1/device:CPU:0"
_PARTS = np.arange(12, dtype=np.float32).reshape(6, 2)


def _options(callback):
  return tf.train.CheckpointOptions(experimental_sharding_callback=callback)


def _spec(key, full_shape, offset, shape):
  """The slice spec of `shape` at `offset` in a value of `full_shape`."""
  return tf.Variable.SaveSliceInfo(full_name=key,
                                   full_shape=list(full_shape),
                                   var_offset=list(offset),
                                   var_shape=list(shape)).spec


class TwoParts(base.Trackable):
  """A [6, 2] value kept as two variables of 3 rows, saved as two slices."""

  def __init__(self, value):
    self.parts = [tf.Variable(value[:3]), tf.Variable(value[3:])]

  def _serialize_to_tensors(self):
    return {
        "x": {
            _spec("x", [6, 2], [start, 0], [3, 2]): part.read_value()
            for start, part in zip((0, 3), self.parts)
        }
    }

  def _restore_from_tensors(self, restored_tensors):
    raise NotImplementedError("Read with TensorFlow's checkpoint reader.")


def _numpy(tensor):
  """The value of `tensor`: eagerly, or run in the default session."""
  if tf.executing_eagerly():
    return tensor.numpy()
  return tf.compat.v1.get_default_session().run(tensor)


def _rows(shardable, value):
  """`{slice spec: row}` of each row of `value`, the value of `shardable`.

  A value that is a slice already is cut into rows of the whole value. The
  rows of whole values name their full dimensions "-".
  """
  key = shardable.checkpoint_key
  if not shardable.slice_spec:
    dims = " ".join(str(length) for length in value.shape)
    return {
        f"{dims} {row},1" + ":-" * (value.ndim - 1): value[row:row + 1]
        for row in range(value.shape[0])
    }
  # "6 2 3,3:0,2": of a value of shape [6, 2], 3 rows from row 3.
  *full_shape, extents = shardable.slice_spec.split()
  offset = [int(extent.split(",")[0]) for extent in extents.split(":")]
  return {
      _spec(key, [int(length) for length in full_shape], [offset[0] + row] + offset[1:], (1,) + value.shape[1:]):
          value[row:row + 1] for row in range(value.shape[0])
  }


class RowsAsNumpy(tf.train.experimental.ShardingCallback):
  """Each row of every value in a file of its own, as a numpy value.

  Scalars go, as numpy values under their own (empty) slice spec, into a
  last file with the object graph. Values are measured by running them,
  as TensorFlow's `MaxShardSizePolicy` measures strings.
  """

  description = "Rows as numpy values, one file each."

  def __call__(self, shardable_tensors):
    rows, rest = [], {}
    for shardable in shardable_tensors:
      key = shardable.checkpoint_key
      if key == "_CHECKPOINTABLE_OBJECT_GRAPH":
        rest[key] = {"": shardable.tensor}
        continue
      value = _numpy(shardable.tensor)
      if value.ndim:
        rows.extend({key: {
            spec: row
        }} for spec, row in _rows(shardable, value).items())
      else:
        rest[key] = {shardable.slice_spec: value}
    return rows + [rest]


def _eager_objects(scale=1):
  return {
      "matrix":
          tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) * scale),
      "vector":
          tf.Variable(np.arange(5, dtype=np.int64) * scale),
      "scalar":
          tf.Variable(np.float64(3.5) * scale),
      "parts":
          TwoParts(_PARTS * scale)
  }


def _assert_holds_the_values(path):
  """TensorFlow's reader finds `_eager_objects()`'s values in `path`."""
  reader = tf.train.load_checkpoint(path)
  for name, obj in _eager_objects().items():
    if isinstance(obj, TwoParts):
      key, value = f"{name}/.ATTRIBUTES/x", _PARTS
    else:
      key, value = f"{name}/.ATTRIBUTES/VARIABLE_VALUE", obj.numpy()
    np.testing.assert_array_equal(reader.get_tensor(key), value, err_msg=key)


def test_numpy_rows_match_tensorflow(tmp_path):
  """Rows of whole values and of slices, and numpy scalars, eagerly."""
  paths = {}
  for impl, lib in tl.IMPLS.items():
    paths[impl] = lib.Checkpoint(**_eager_objects()).write(
        str(tmp_path / impl / "ckpt"), options=_options(RowsAsNumpy()))
  assert tl.file_layout(paths["ours"])["num_shards"] == 4 + 5 + 6 + 1
  tl.assert_same_files(tmp_path)
  _assert_holds_the_values(paths["ours"])


def test_graph_mode_later_saves_write_current_values(tmp_path):
  """Numpy rows become slices of the saved tensors, read when the op runs.

  The first saves give TensorFlow's files. Then the variables change, and
  each library saves again through the op it built: ours writes the new
  values, TensorFlow's the first ones, which its callback turned into
  constants. Values of unknown shape cannot be located in the tensors
  given: they are saved as the callback returned them, in both libraries.
  """
  later = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program, program.session.as_default():
      parts = TwoParts(_PARTS)
      objects = {
          "matrix":
              program.variable("matrix", np.ones([4, 3], np.float32)),
          "scalar":
              program.variable("scalar", 2.),
          "parts":
              parts,
          "unknown_rank":
              tf.Variable([1., 2.], shape=tf.TensorShape(None)),
          "unknown_length":
              tf.Variable([1., 2., 3.], shape=tf.TensorShape([None])),
      }
      program.initialize()
      checkpoint = program.lib.CheckpointV1(**objects)
      checkpoint.write(str(tmp_path / impl / "ckpt"),
                       session=program.session,
                       options=_options(RowsAsNumpy()))
      program.run([
          variable.assign(variable * 10) for variable in [
              objects["matrix"], objects["scalar"], objects["unknown_rank"],
              objects["unknown_length"]
          ] + parts.parts
      ])
      later[impl] = checkpoint.write(str(tmp_path / "later" / impl / "ckpt"),
                                     session=program.session,
                                     options=_options(RowsAsNumpy()))
  tl.assert_same_files(tmp_path)
  scale = {"tf": 1, "ours": 10}
  for impl, path in later.items():
    reader = tf.train.load_checkpoint(path)
    for key, first, scales in [
        ("matrix/.ATTRIBUTES/VARIABLE_VALUE", np.ones([4, 3]), True),
        ("scalar/.ATTRIBUTES/VARIABLE_VALUE", 2., True),
        ("parts/.ATTRIBUTES/x", _PARTS, True),
        ("unknown_rank/.ATTRIBUTES/VARIABLE_VALUE", [1., 2.], False),
        ("unknown_length/.ATTRIBUTES/VARIABLE_VALUE", [1., 2., 3.], False)
    ]:
      np.testing.assert_array_equal(reader.get_tensor(key),
                                    np.multiply(first,
                                                scale[impl] if scales else 1),
                                    err_msg=f"{key} saved by {impl}")


class ValuesElsewhere(tf.train.experimental.ShardingCallback):
  """Numpy values that lie within no tensor given, each in a file of its own.

  Across the given slices: rows [0, 2), [2, 5) and [5, 6) of `parts`,
  whose slices hold rows [0, 3) and [3, 6); the middle one lies within
  neither. Otherwise: `parts` whole (under the empty slice spec, which is
  no slice of either), and `vector` as a [5, 1] column.
  """

  def __init__(self, across):
    self.across = across

  @property
  def description(self):
    return f"Values elsewhere, {'across' if self.across else 'beside'}."

  def __call__(self, shardable_tensors):
    shards, rest = [], {}
    for shardable in shardable_tensors:
      key = shardable.checkpoint_key
      if key == "parts/.ATTRIBUTES/x":
        if shardable.slice_spec.startswith("6 2 0,3"):
          shards.extend(self._parts(key))
      elif key == "vector/.ATTRIBUTES/VARIABLE_VALUE" and not self.across:
        column = shardable.tensor.numpy().reshape(5, 1)
        shards.append({key: {_spec(key, [5, 1], [0, 0], [5, 1]): column}})
      else:
        rest.setdefault(key, {})[shardable.slice_spec] = shardable.tensor
    return shards + [rest]

  def _parts(self, key):
    if not self.across:
      return [{key: {"": _PARTS}}]
    return [{
        key: {
            _spec(key, [6, 2], [start, 0], [size, 2]):
                _PARTS[start:start + size]
        }
    } for start, size in ((0, 2), (2, 3), (5, 1))]


@pytest.mark.parametrize("across", [True, False])
def test_values_within_no_tensor_given_are_saved_as_returned(tmp_path, across):
  for impl, lib in tl.IMPLS.items():
    lib.Checkpoint(**_eager_objects()).write(str(tmp_path / impl / "ckpt"),
                                             options=_options(
                                                 ValuesElsewhere(across)))
  tl.assert_same_files(tmp_path)
  reader = tf.train.load_checkpoint(str(tmp_path / "ours" / "ckpt"))
  np.testing.assert_array_equal(reader.get_tensor("parts/.ATTRIBUTES/x"),
                                _PARTS)


class _Changes(tf.train.experimental.ShardingCallback):
  """Keeps each value, as a tensor or as numpy, but what `change` changes."""

  def __init__(self, description, as_numpy=False):
    self._description = description
    self._as_numpy = as_numpy

  @property
  def description(self):
    return self._description

  def __call__(self, shardable_tensors):
    shard = {}
    for shardable in shardable_tensors:
      value = shardable.tensor
      shard.setdefault(shardable.checkpoint_key,
                       {})[shardable.slice_spec] = (_numpy(value) if
                                                    self._as_numpy else value)
    self.change(shard)
    return [shard]

  def change(self, shard):
    raise NotImplementedError


class ReplacesByNone(_Changes):

  def change(self, shard):
    shard["matrix/.ATTRIBUTES/VARIABLE_VALUE"] = {"": None}


class RenamesAsNumpy(_Changes):

  def change(self, shard):
    shard["matrix"] = shard.pop("matrix/.ATTRIBUTES/VARIABLE_VALUE")


_CHANGES = {
    "none_among_tensors":
        (lambda: ReplacesByNone("None among tensors"), "replaced by None"),
    "none_among_numpy_values":
        (lambda: ReplacesByNone("None among numpy values", as_numpy=True),
         "replaced by None"),
    "numpy_value_under_a_new_key":
        (lambda: RenamesAsNumpy("A numpy value under a new key", as_numpy=True),
         "not originally in the object graph"),
}


@pytest.mark.parametrize("change", _CHANGES)
def test_lost_values_fail_our_saves(tmp_path, change):
  """TensorFlow leaves None out and writes new keys; we write nothing."""
  make_callback, problem = _CHANGES[change]
  outcomes = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(**_eager_objects())
    outcomes[impl] = tl.outcome(checkpoint.write,
                                str(tmp_path / impl / "ckpt"),
                                options=_options(make_callback()))
  keys = tl.signature(outcomes["tf"].result)
  assert "matrix/.ATTRIBUTES/VARIABLE_VALUE" not in keys
  assert ("matrix" in keys) == (change == "numpy_value_under_a_new_key")
  error = outcomes["ours"].error
  assert isinstance(error, RuntimeError), error
  assert make_callback().description in str(error)
  assert problem in str(error)
  assert not os.listdir(tmp_path / "ours")


class RecordedNotSaved(base.Trackable):
  """State in the object graph whose value is not saved (its tensor: None)."""

  def _serialize_to_tensors(self):
    return {
        "x":
            saveable_object.SaveSpec(lambda: None,
                                     "",
                                     "x",
                                     dtype=tf.float32,
                                     device=_TASK_0)
    }

  def _restore_from_tensors(self, restored_tensors):
    del restored_tensors  # Never called: nothing is saved.


@pytest.mark.parametrize("policy", ["by_task", "max_size"])
def test_values_not_saved_are_left_out_as_in_tensorflow(tmp_path, policy):
  callback = (tf.train.experimental.ShardByTaskPolicy() if policy == "by_task"
              else tf.train.experimental.MaxShardSizePolicy(16))
  for impl, lib in tl.IMPLS.items():
    lib.Checkpoint(r=RecordedNotSaved(),
                   **_eager_objects()).write(str(tmp_path / impl / "ckpt"),
                                             options=_options(callback))
  tl.assert_same_files(tmp_path)
  assert "r/.ATTRIBUTES/x" not in tl.signature(str(tmp_path / "ours" / "ckpt"))


class MovesToTask1(tf.train.experimental.ShardingCallback):
  description = "Each value copied to task 1."

  def __call__(self, shardable_tensors):
    shard = {}
    for shardable in shardable_tensors:
      with tf.device(_TASK_1):
        shard.setdefault(shardable.checkpoint_key,
                         {})[shardable.slice_spec] = tf.identity(
                             shardable.tensor)
    return [shard]


class AllInOne(tf.train.experimental.ShardingCallback):
  description = "Every value in one file."

  def __call__(self, shardable_tensors):
    shard = {}
    for shardable in shardable_tensors:
      shard.setdefault(shardable.checkpoint_key,
                       {})[shardable.slice_spec] = shardable.tensor
    return [shard]


class Misplaced(base.Trackable):
  """Says its value is on task 0, which is made on task 1."""

  def _serialize_to_tensors(self):
    with tf.device(_TASK_1):
      value = tf.constant(1.)
    return {"x": saveable_object.SaveSpec(value, "", "x", device=_TASK_0)}

  def _restore_from_tensors(self, restored_tensors):
    del restored_tensors  # Never saved.
    return tf.no_op()


@pytest.mark.parametrize("case",
                         ["moved_to_another_task", "tasks_mixed_in_one_shard"])
def test_values_on_other_tasks_fail_our_saves_before_running(tmp_path, case):
  """Graph building, where a tensor may name any task.

  TensorFlow builds the save and fails when it runs, as no task 1 exists;
  ours fails building it, with nothing written.
  """
  callback = (MovesToTask1() if case == "moved_to_another_task" else AllInOne())
  outcomes = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      with tf.device(_TASK_0):
        objects = {"v": program.variable("v", 1.)}
      if case == "tasks_mixed_in_one_shard":
        objects["m"] = Misplaced()
      program.initialize()
      checkpoint = program.lib.CheckpointV1(**objects)
      outcomes[impl] = tl.outcome(checkpoint.save,
                                  str(tmp_path / impl / "ckpt"),
                                  session=program.session,
                                  options=_options(callback))
  assert isinstance(outcomes["tf"].error, tf.errors.InvalidArgumentError)
  error = outcomes["ours"].error
  assert isinstance(error, RuntimeError), error
  assert ("altered task" if case == "moved_to_another_task" else
          "different tasks were found in the same shard") in str(error)
  assert not os.path.exists(tmp_path / "ours") or not os.listdir(
      tmp_path / "ours")


class MalformedSlice(tf.train.experimental.ShardingCallback):
  """`vector` as numpy under a slice spec with one extent too many."""

  description = "A malformed slice spec."

  def __call__(self, shardable_tensors):
    shard = {}
    for shardable in shardable_tensors:
      key = shardable.checkpoint_key
      if key == "vector/.ATTRIBUTES/VARIABLE_VALUE":
        shard[key] = {"5 0,5:0,1": shardable.tensor.numpy()}
      else:
        shard.setdefault(key, {})[shardable.slice_spec] = shardable.tensor
    return [shard]


def test_malformed_slice_specs_fail_as_in_tensorflow(tmp_path):
  outcomes = {}
  for impl, lib in tl.IMPLS.items():
    outcomes[impl] = tl.outcome(lib.Checkpoint(**_eager_objects()).write,
                                str(tmp_path / impl / "ckpt"),
                                options=_options(MalformedSlice()))
  assert {
      impl: outcome.name for impl, outcome in outcomes.items()
  } == {
      "tf": "InternalError",
      "ours": "InternalError"
  }
  assert "Mismatching ranks" in str(outcomes["ours"].error)
  assert not os.listdir(tmp_path / "ours")
