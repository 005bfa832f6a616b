"""Our `ShardByTaskPolicy` and `MaxShardSizePolicy` against TensorFlow's.

`tf_objckpt.sharding_policies` holds policies of TensorFlow's names, ours:
given the same `ShardableTensor`s they return the shards TensorFlow's
return (same keys, slice specs and values, in the same order), for the
installed TensorFlow (2.16 cuts values otherwise than later versions),
over many shapes, dtypes, strings, values given as slices and shard
sizes. A save with ours, through our `Checkpoint` or TensorFlow's, writes
TensorFlow's files byte for byte, and both libraries restore them. Where
TensorFlow's `MaxShardSizePolicy` of 2.17 and later loops forever (not one
row of a value fits a shard), ours cuts it row by row. On TensorFlow 2.15,
which has no sharding callbacks, making them raises TypeError
(tests/eager/tensorflow_versions_test.py).

Covers: tf_objckpt.engine.sharding_policies, tf_objckpt.sharding_policies,
tf_objckpt.engine.tf_compat.
"""

import random

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.checkpoint.sharding import sharding_util
from tensorflow.python.framework import device as device_lib

import testlib as tl
from tf_objckpt import sharding_policies
from tf_objckpt.engine import tf_compat

_CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_SLICED = not tf_compat.MAX_SHARD_SIZE_CUTS_AS_2_16  # 2.16 cannot.


def _shardable(key, value, slice_spec=""):
  """A `ShardableTensor` of `value`, given as the slice `slice_spec`."""
  tensor = tf.constant(value)
  return sharding_util.ShardableTensor(
      _tensor_save_spec=None,
      tensor=tensor,
      dtype=tensor.dtype,
      device=device_lib.DeviceSpec.from_string(_CPU),
      name=key,
      shape=tensor.shape,
      slice_spec=slice_spec,
      checkpoint_key=key,
      trackable=None)


def _as_numpy(shards):
  """Shards as `[{key: {slice spec: value as a list}}]`, for comparing."""
  return [{
      key: {
          spec: np.asarray(value).tolist() for spec, value in slices.items()
      } for key, slices in shard.items()
  } for shard in shards]


def _random_value(rng, shape, kind):
  if kind == "string":
    return np.array(
        [b"x" * rng.randrange(0, 12) for _ in range(int(np.prod(shape)))],
        dtype=object).reshape(shape)
  dtype = {"float32": np.float32, "int64": np.int64, "int8": np.int8}[kind]
  return (np.arange(int(np.prod(shape))) % 100).astype(dtype).reshape(shape)


def _smallest_row_bytes(value):
  """The bytes of one row along the value's longest axis (0 for scalars)."""
  if value.ndim == 0:
    return 0
  element = (max((len(item) for item in value.ravel()), default=0)
             if value.dtype == object else value.itemsize)
  return value.size // max(value.shape) * element


def _random_case(seed):
  """Values of one task, and a shard size no row of any value exceeds.

  (A smaller size makes TensorFlow's policy of 2.17 and later loop
  forever.)
  """
  rng = random.Random(seed)
  tensors, rows = [], [1]
  for index in range(rng.randrange(1, 5)):
    kind = rng.choice(["float32", "int64", "int8", "string"])
    # TensorFlow's policy fails on strings of more than one dimension.
    rank = rng.randrange(0, 2 if kind == "string" else 4)
    shape = [rng.randrange(1, 6) for _ in range(rank)]
    value = _random_value(rng, shape, kind)
    rows.append(_smallest_row_bytes(value))
    key = f"v{index}/.ATTRIBUTES/VARIABLE_VALUE"
    if _SLICED and shape and kind != "string" and rng.random() < 0.3:
      full = [length + rng.randrange(0, 3) for length in shape]
      offset = [
          rng.randrange(0, extra + 1) for extra in np.subtract(full, shape)
      ]
      spec = tf.Variable.SaveSliceInfo(key, full, offset, shape).spec
      tensors.append(_shardable(key, value, spec))
    else:
      tensors.append(_shardable(key, value))
  tensors.append(_shardable(tl.OBJECT_GRAPH_KEY, b"graph"))
  limit = rng.randrange(max(rows), max(rows) * 4 + 8)
  return tensors, limit


@pytest.mark.parametrize("seed", range(60))
def test_max_shard_size_shards_are_tensorflows(seed):
  tensors, limit = _random_case(seed)
  ours = sharding_policies.MaxShardSizePolicy(limit)(tensors)
  theirs = tf.train.experimental.MaxShardSizePolicy(limit)(tensors)
  assert _as_numpy(ours) == _as_numpy(theirs), (seed, limit)


# (Under 12 bytes TensorFlow's policy of 2.17 and later loops forever.)
@pytest.mark.parametrize("limit", [12, 13, 16, 18, 24, 100])
def test_max_shard_size_of_matrices_is_tensorflows(limit):
  tensors = [
      _shardable("a",
                 np.arange(6, dtype=np.int32).reshape(3, 2)),
      _shardable("b",
                 np.arange(6, dtype=np.float32).reshape(3, 2, 1)),
      _shardable("s", b"a scalar string"),
      _shardable(tl.OBJECT_GRAPH_KEY, b"graph"),
  ]
  ours = sharding_policies.MaxShardSizePolicy(limit)(tensors)
  theirs = tf.train.experimental.MaxShardSizePolicy(limit)(tensors)
  assert _as_numpy(ours) == _as_numpy(theirs)


def test_shard_by_task_is_tensorflows():
  tensors, _ = _random_case(0)
  ours = sharding_policies.ShardByTaskPolicy()(tensors)
  assert _as_numpy(ours) == _as_numpy(
      tf.train.experimental.ShardByTaskPolicy()(tensors))


def test_rows_larger_than_a_shard_are_cut_further():
  """Where TensorFlow's policy of 2.17 and later loops forever.

  Not one row of the matrix fits 4 bytes: its elements go one per shard;
  an element larger than a shard goes alone, after the others. (On 2.16,
  where TensorFlow's policy cuts rows that do not fit, ours does too.)
  """
  tensors = [
      _shardable("m",
                 np.arange(6, dtype=np.float32).reshape(2, 3)),
      _shardable("w", np.array([b"a", b"longer than four"])),
  ]
  shards = sharding_policies.MaxShardSizePolicy(4)(tensors)
  if tf_compat.MAX_SHARD_SIZE_CUTS_AS_2_16:
    assert _as_numpy(shards) == _as_numpy(
        tf.train.experimental.MaxShardSizePolicy(4)(tensors))
    return
  pieces = [(key, spec, np.asarray(value).tolist())
            for shard in shards
            for key, slices in shard.items()
            for spec, value in slices.items()]
  assert pieces == [("m", f"2 3 {row},1:{column},1", [[row * 3 + column]])
                    for row in range(2)
                    for column in range(3)] + [
                        ("w", "2 0,1", [b"a"]),
                        ("w", "2 1,1", [b"longer than four"]),
                    ]


def test_strings_of_two_dimensions_where_tensorflows_fails():
  tensors = [_shardable("m", np.array([[b"ab", b"c"], [b"def", b"g"]]))]
  theirs = tl.outcome(tf.train.experimental.MaxShardSizePolicy(4), tensors)
  assert theirs.name == "ValueError"
  shards = sharding_policies.MaxShardSizePolicy(6)(tensors)
  assert [(spec, value.numpy().tolist())
          for shard in shards
          for spec, value in shard.get("m", {}).items()] == [
              ("2 2 0,1:0,2", [[b"ab", b"c"]]),
              ("2 2 1,1:0,2", [[b"def", b"g"]]),
          ]


def _values():
  return {
      "matrix": np.arange(600, dtype=np.float32).reshape(20, 30),
      "cube": np.arange(60, dtype=np.int64).reshape(3, 4, 5),
      "scalar": np.float64(3.5),
      "text": np.array([b"d" * 90, b"e" * 10]),
      "word": b"hello",
  }


_POLICIES = {
    "by_task": ("ShardByTaskPolicy", ()),
    "max_size_1k": ("MaxShardSizePolicy", (1000,)),
    "max_size_row": ("MaxShardSizePolicy", (130,)),
}


def _policy(module, policy):
  name, arguments = _POLICIES[policy]
  return getattr(module, name)(*arguments)


@pytest.mark.parametrize("policy", _POLICIES)
def test_saves_write_tensorflows_files(tmp_path, policy):
  """Ours in our saver and in TensorFlow's, TensorFlow's in TensorFlow's."""
  runs = {
      "tf": (tf.train.Checkpoint, tf.train.experimental),
      "ours": (tl.IMPLS["ours"].Checkpoint, sharding_policies),
      "ours_in_tf": (tf.train.Checkpoint, sharding_policies),
  }
  for name, (checkpoint_class, module) in runs.items():
    variables = {key: tf.Variable(value) for key, value in _values().items()}
    checkpoint_class(**variables).write(
        str(tmp_path / name / "ckpt"),
        options=tf.train.CheckpointOptions(
            experimental_sharding_callback=_policy(module, policy)))
  tl.assert_same_files(tmp_path)
  for reader in tl.IMPLS.values():
    fresh = {
        key: tf.Variable(np.zeros_like(value))
        for key, value in _values().items()
    }
    reader.Checkpoint(**fresh).read(str(
        tmp_path / "ours" / "ckpt")).assert_existing_objects_matched()
    for key, value in _values().items():
      np.testing.assert_array_equal(fresh[key].numpy(), value)


def test_graph_mode_save_writes_tensorflows_files(tmp_path):
  """`CheckpointV1` in a default session: strings are measured by running."""
  for impl in tl.IMPLS:
    module = sharding_policies if impl == "ours" else tf.train.experimental
    with tl.GraphProgram(impl) as program, program.session.as_default():
      variables = {
          key: program.variable(key, value) for key, value in _values().items()
      }
      program.initialize()
      program.lib.CheckpointV1(**variables).write(
          str(tmp_path / impl / "ckpt"),
          session=program.session,
          options=tf.train.CheckpointOptions(
              experimental_sharding_callback=module.MaxShardSizePolicy(130)))
  tl.assert_same_files(tmp_path)


def test_strings_in_a_function_count_as_nothing_with_a_warning():
  tensors = [_shardable("s", np.array([b"abc", b"defgh"]))]
  specs = []

  @tf.function
  def shard_in_a_function():
    shards = sharding_policies.MaxShardSizePolicy(2)(tensors)
    specs.extend(spec for shard in shards for spec in shard["s"])

  with tl.captured_logs() as logs:
    shard_in_a_function()
  assert specs == ["2 0,2"]
  assert any("sharding policy is being executed in a tf.function" in line
             for line in logs)
