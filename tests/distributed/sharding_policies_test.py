"""`CheckpointOptions.experimental_sharding_callback`, on one machine.

TensorFlow's `ShardByTaskPolicy` and `MaxShardSizePolicy` and user-defined
`ShardingCallback`s give the same data files, key by key and slice by slice,
as in TensorFlow, through `write`, `save` and `CheckpointManager.save`,
eagerly and in graph mode; tensors split across files restore in both
libraries. In graph mode, values a callback returns as Python values
(bytes, numpy arrays and their sub-slices) stand for the live variables:
our later saves write the variables' new values. A callback that drops a
key fails our save. (tests/distributed/cluster_layout_test.py applies the
policies over ps tasks.)

Covers: tf_objckpt.engine.sharding, tf_objckpt.engine.multi_device_saver,
tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl


def _values_to_save():
  return {
      "matrix": np.arange(600, dtype=np.float32).reshape(20, 30),
      "vector": np.arange(50, dtype=np.int64),
      "scalar": np.float64(3.5),
      # Strings are not split: sliced strings cannot be read back by
      # TensorFlow's reader ("Dtype string not supported").
      "text": np.array([b"d" * 90]),
      "word": b"hello",
  }


def _variables(zeros=False):
  return {
      name: tf.Variable(np.zeros_like(value) if zeros else value)
      for name, value in _values_to_save().items()
  }


class OneKeyPerShard(tf.train.experimental.ShardingCallback):
  """A user policy: each key in a file of its own, in reverse order."""

  @property
  def description(self):
    return "One key per shard, last key first."

  def __call__(self, shardable_tensors):
    return [{
        tensor.checkpoint_key: {
            tensor.slice_spec: tensor.tensor
        }
    } for tensor in reversed(shardable_tensors)]


class SplitsTheMatrix(tf.train.experimental.ShardingCallback):
  """A user policy slicing one tensor by hand, halves in separate files."""

  description = "Rows of the matrix in two files, the rest in a third."

  def __call__(self, shardable_tensors):
    rest, halves = {}, []
    for tensor in shardable_tensors:
      if tensor.checkpoint_key.startswith("matrix/"):
        for start in (0, 10):
          spec = tf.Variable.SaveSliceInfo(full_name=tensor.checkpoint_key,
                                           full_shape=[20, 30],
                                           var_offset=[start, 0],
                                           var_shape=[10, 30]).spec
          with tf.device(tensor.device):
            half = tensor.tensor[start:start + 10]
          halves.append({tensor.checkpoint_key: {spec: half}})
      else:
        rest.setdefault(tensor.checkpoint_key,
                        {})[tensor.slice_spec] = (tensor.tensor)
    return halves + [rest]


_POLICIES = {
    "by_task": tf.train.experimental.ShardByTaskPolicy,
    "max_size_1k": lambda: tf.train.experimental.MaxShardSizePolicy(1000),
    # About a row of the matrix. (Much smaller sizes make TensorFlow's
    # policy loop forever.)
    "max_size_small": lambda: tf.train.experimental.MaxShardSizePolicy(130),
    "one_key_per_shard": OneKeyPerShard,
    "splits_the_matrix": SplitsTheMatrix,
}


def _options(policy):
  return tf.train.CheckpointOptions(experimental_sharding_callback=policy)


def _check_restores(path):
  """Both libraries restore `path`'s values, eagerly."""
  for impl, lib in tl.IMPLS.items():
    variables = _variables(zeros=True)
    lib.Checkpoint(**variables).read(path).assert_existing_objects_matched()
    for name, value in _values_to_save().items():
      np.testing.assert_array_equal(variables[name].numpy(),
                                    value,
                                    err_msg=f"{name} read by {impl}")


def _assert_same_layout(paths):
  assert tl.file_layout(paths["ours"]) == tl.file_layout(paths["tf"])


@pytest.mark.parametrize("policy", _POLICIES)
def test_write_matches_tensorflow(tmp_path, policy):
  paths = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(**_variables())
    paths[impl] = checkpoint.write(str(tmp_path / impl / "ckpt"),
                                   options=_options(_POLICIES[policy]()))
  _assert_same_layout(paths)
  assert tl.signature(paths["ours"]) == tl.signature(paths["tf"])
  assert tl.object_graph(paths["ours"]) == tl.object_graph(paths["tf"])
  if policy != "by_task":
    assert tl.file_layout(paths["ours"])["num_shards"] >= 3
  for path in paths.values():
    _check_restores(path)


@pytest.mark.parametrize("policy", ["max_size_1k", "one_key_per_shard"])
def test_save_and_manager_save_match_tensorflow(tmp_path, policy):
  """save() and CheckpointManager.save(options=) apply the policy."""
  paths = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(**_variables())
    saved = checkpoint.save(str(tmp_path / impl / "ckpt"),
                            options=_options(_POLICIES[policy]()))
    manager = lib.CheckpointManager(checkpoint,
                                    str(tmp_path / impl / "mgr"),
                                    max_to_keep=1)
    managed = manager.save(options=_options(_POLICIES[policy]()))
    assert manager.latest_checkpoint == managed
    paths[impl] = (saved, managed)
  for kind in range(2):
    _assert_same_layout({impl: both[kind] for impl, both in paths.items()})
    _check_restores(paths["ours"][kind])
  for impl in tl.IMPLS:  # State files differ in their timestamps.
    os.remove(tmp_path / impl / "mgr" / "checkpoint")
  tl.assert_same_files(tmp_path)


@pytest.mark.parametrize("policy", ["max_size_1k", "one_key_per_shard"])
def test_graph_mode_matches_tensorflow(tmp_path, policy):
  """CheckpointV1 in a session; later saves reuse the save op.

  TensorFlow 2.16's `MaxShardSizePolicy` sizes string tensors in graph mode
  by running the default session, and fails without one (later versions
  read them otherwise); ours calls the same policy and fails alike.
  """
  tensorflow_fails = (policy == "max_size_1k" and
                      tf.__version__.startswith("2.16."))
  paths = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      variables = {
          name: program.variable(name, value)
          for name, value in _values_to_save().items()
      }
      program.initialize()
      checkpoint = program.lib.CheckpointV1(**variables)
      options = _options(_POLICIES[policy]())
      prefix = str(tmp_path / impl / "ckpt")
      saved = tl.outcome(checkpoint.save,
                         prefix,
                         session=program.session,
                         options=options)
      assert saved.name == ("AttributeError" if tensorflow_fails else "ok")
      if tensorflow_fails:
        continue
      paths[impl] = saved.result
      if impl == "ours":
        ops_before = len(program.graph.get_operations())
        checkpoint.save(prefix,
                        session=program.session,
                        options=_options(_POLICIES[policy]()))
        assert len(program.graph.get_operations()) == ops_before
  if tensorflow_fails:
    return
  _assert_same_layout(paths)
  for path in paths.values():
    _check_restores(path)


@pytest.mark.parametrize("change", ["adds_a_key", "duplicates", "retypes"])
def test_callbacks_that_change_tensors_fail_our_saves(tmp_path, change):
  """TensorFlow writes what comes back; we raise RuntimeError, write nothing.

  (TensorFlow's merge of the shards fails on duplicates.)
  """

  class Changes(tf.train.experimental.ShardingCallback):
    description = f"A callback that {change}."

    def __call__(self, shardable_tensors):
      shard = {
          tensor.checkpoint_key: {
              tensor.slice_spec: tensor.tensor
          } for tensor in shardable_tensors
      }
      first = shardable_tensors[0]
      if change == "adds_a_key":
        shard["extra"] = {"": tf.constant(1.)}
      elif change == "retypes":
        shard[first.checkpoint_key] = {
            first.slice_spec: tf.cast(first.tensor, tf.float16)
        }
      shards = [shard]
      if change == "duplicates":
        shards.append({first.checkpoint_key: {first.slice_spec: first.tensor}})
      return shards

  outcomes = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(v=tf.Variable(1.), w=tf.Variable(2.))
    prefix = str(tmp_path / impl / "ckpt")
    outcomes[impl] = tl.outcome(checkpoint.write,
                                prefix,
                                options=_options(Changes()))
  if change == "duplicates":  # TensorFlow's merge of the shards fails.
    assert isinstance(outcomes["tf"].error, tf.errors.InvalidArgumentError)
  else:
    assert outcomes["tf"].error is None
  error = outcomes["ours"].error
  assert isinstance(error, RuntimeError), error
  assert "sharding callback" in str(error)
  assert f"A callback that {change}" in str(error)
  assert not os.listdir(tmp_path / "ours")


def _strings():
  return {
      "text": np.array([b"d" * 90, b"e" * 80, b"f" * 10]),
      "word": b"hello" * 30,
      "short": b"hi",
      "matrix": np.arange(60, dtype=np.float32).reshape(6, 10),
  }


def _new_strings():
  """Other values of the same shapes, to assign between saves."""
  return {
      "text": np.array([b"x" * 90, b"y" * 80, b"z" * 10]),
      "word": b"changed",
      "short": b"ho",
      "matrix": -np.arange(60, dtype=np.float32).reshape(6, 10) - 1,
  }


def _shards_of_100_bytes():
  """A policy splitting `_strings()` over several files."""
  return tf.train.experimental.MaxShardSizePolicy(100)


def _saves_in_a_default_session(tmp_path, impl, policy):
  """Saves `_strings()`, assigns `_new_strings()`, saves again.

  Returns:
    The outcome of the first save, and of the second (None if the first
    failed).
  """
  with tl.GraphProgram(impl) as program, program.session.as_default():
    variables = {
        name: program.variable(name, value)
        for name, value in _strings().items()
    }
    program.initialize()
    checkpoint = program.lib.CheckpointV1(**variables)
    first = tl.outcome(checkpoint.save,
                       str(tmp_path / impl / "ckpt"),
                       session=program.session,
                       options=_options(policy()))
    if first.error:
      return first, None
    program.run([
        variables[name].assign(value) for name, value in _new_strings().items()
    ])
    return first, tl.outcome(checkpoint.save,
                             str(tmp_path / "later" / impl / "ckpt"),
                             session=program.session,
                             options=_options(policy()))


def _assert_holds_the_new_values(path):
  """The checkpoint at `path` holds `_new_strings()` but the text's."""
  reader = tf.train.load_checkpoint(path)
  for name in ("word", "short", "matrix"):
    np.testing.assert_array_equal(
        reader.get_tensor(f"{name}/.ATTRIBUTES/VARIABLE_VALUE"),
        _new_strings()[name],
        err_msg=name)


def _assert_holds_the_new_text(path):
  """The checkpoint at `path` holds the new text, not the old.

  Sliced strings cannot be read back (by either library's reader), so the
  text's elements are looked for in the data files' bytes.
  """
  data = b"".join(
      open(data_file, "rb").read()
      for data_file in tf.io.gfile.glob(path + ".data-*"))
  for old, new in zip(_strings()["text"], _new_strings()["text"]):
    assert new in data and old not in data, (old[:1], new[:1])


class NumpySubSlices(tf.train.experimental.ShardingCallback):
  """Returns values run in the default session: the matrix in two halves.

  The matrix's halves are numpy sub-slices of the value it was given, the
  strings numpy values; the object graph and the save counter stay tensors.
  """

  description = "Numpy values; the matrix's rows in two files."

  def __call__(self, shardable_tensors):
    session = tf.compat.v1.get_default_session()
    halves, rest = [], {}
    for tensor in shardable_tensors:
      key = tensor.checkpoint_key
      if key.startswith("matrix/"):
        value = session.run(tensor.tensor)
        for start in (0, 3):
          spec = tf.Variable.SaveSliceInfo(full_name=key,
                                           full_shape=[6, 10],
                                           var_offset=[start, 0],
                                           var_shape=[3, 10]).spec
          halves.append({key: {spec: value[start:start + 3]}})
      elif tensor.dtype == tf.string and key != tl.OBJECT_GRAPH_KEY:
        rest.setdefault(key, {})[tensor.slice_spec] = session.run(tensor.tensor)
      else:
        rest.setdefault(key, {})[tensor.slice_spec] = tensor.tensor
    return halves + [rest]


class DropsTheWord(tf.train.experimental.ShardingCallback):
  """Returns every tensor but the word's, in one shard."""

  description = "A callback that drops the word."

  def __call__(self, shardable_tensors):
    return [{
        tensor.checkpoint_key: {
            tensor.slice_spec: tensor.tensor
        }
        for tensor in shardable_tensors
        if not tensor.checkpoint_key.startswith("word/")
    }]


def test_graph_mode_strings_in_a_default_session_match_tensorflow(tmp_path):
  """In a default session TensorFlow's policy measures strings by running them.

  Its shards then hold their values as bytes and arrays, not tensors; both
  libraries save the same files from them. A later save of ours writes the
  new values of the words and of the matrix, whose slices the policy takes
  of the variable (TensorFlow's, reusing its save op, the words' first
  values).
  """
  later = {}
  for impl in tl.IMPLS:
    first, later[impl] = _saves_in_a_default_session(tmp_path, impl,
                                                     _shards_of_100_bytes)
    assert first.error is None and later[impl].error is None, impl
  assert tl.file_layout(str(tmp_path / "ours" / "ckpt-1"))["num_shards"] >= 5
  tl.assert_same_files(tmp_path)
  _assert_holds_the_new_values(later["ours"].result)
  assert tf.train.load_checkpoint(later["tf"].result).get_tensor(
      "word/.ATTRIBUTES/VARIABLE_VALUE") == _strings()["word"]


def test_graph_mode_strings_sliced_by_the_policy_follow_the_variable(tmp_path):
  """A later save of ours writes the text's new value too, in slices."""
  _, later = _saves_in_a_default_session(tmp_path, "ours", _shards_of_100_bytes)
  text = repr(b"text/.ATTRIBUTES/VARIABLE_VALUE")
  assert tl.file_layout(later.result)[text][3] == 3  # Three slices.
  _assert_holds_the_new_text(later.result)


def test_graph_mode_numpy_sub_slices_are_read_at_each_save(tmp_path):
  """A callback's numpy values stand for slices of the live variables.

  Both write the same files from them; a later save of ours writes the new
  values, the matrix's halves too, where TensorFlow writes the numpy
  values its save op was built with.
  """
  later = {}
  for impl in tl.IMPLS:
    first, later[impl] = _saves_in_a_default_session(tmp_path, impl,
                                                     NumpySubSlices)
    assert first.error is None and later[impl].error is None, impl
  assert tl.file_layout(str(tmp_path / "ours" / "ckpt-1"))["num_shards"] == 3
  tl.assert_same_files(tmp_path)
  _assert_holds_the_new_values(later["ours"].result)
  _assert_holds_the_new_text(later["ours"].result)
  np.testing.assert_array_equal(
      tf.train.load_checkpoint(
          later["tf"].result).get_tensor("matrix/.ATTRIBUTES/VARIABLE_VALUE"),
      _strings()["matrix"])


def test_graph_mode_callback_that_drops_a_key_fails_our_save(tmp_path):
  """TensorFlow writes the checkpoint without the key; we write nothing."""
  first = {
      impl: _saves_in_a_default_session(tmp_path, impl, DropsTheWord)[0]
      for impl in tl.IMPLS
  }
  assert first["tf"].error is None
  assert "word/.ATTRIBUTES/VARIABLE_VALUE" not in tl.keys(first["tf"].result)
  error = first["ours"].error
  assert isinstance(error, RuntimeError), error
  assert "not found in the checkpoint shards" in str(error)
  assert "A callback that drops the word." in str(error)
  assert "missing: word/.ATTRIBUTES/VARIABLE_VALUE" in str(error)
  assert not tl.files_under(tmp_path / "ours")


class RunsEveryValue(tf.train.experimental.ShardingCallback):
  """Returns the value of every tensor, run in the default session."""

  description = "A callback that runs every value."

  def __call__(self, shardable_tensors):
    session = tf.compat.v1.get_default_session()
    return [{
        tensor.checkpoint_key: {
            tensor.slice_spec: session.run(tensor.tensor)
        } for tensor in shardable_tensors
    }]


def test_graph_mode_callback_may_run_the_new_save_counter(tmp_path):
  """The first save's counter is initialized before the callback runs.

  Both libraries save the same values, counting the save as the first.
  TensorFlow's object graph, fed to its save op only when the save runs,
  is the placeholder's empty default when the callback runs it, so its
  checkpoint holds an empty object graph; ours holds the object graph.
  """
  first = {
      impl: _saves_in_a_default_session(tmp_path, impl, RunsEveryValue)[0]
      for impl in tl.IMPLS
  }
  for impl, outcome in first.items():
    assert outcome.error is None, (impl, outcome.error)
  tl.assert_agree({
      impl: tl.values(outcome.result) for impl, outcome in first.items()
  })
  assert tl.values(
      first["ours"].result)["save_counter/.ATTRIBUTES/VARIABLE_VALUE"] == 1
  assert tf.train.load_checkpoint(first["tf"].result).get_tensor(
      tl.OBJECT_GRAPH_KEY) == b""
  assert tl.object_graph(first["ours"].result).nodes
