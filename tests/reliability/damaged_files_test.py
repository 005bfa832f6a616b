"""Damaged files are named: the index file, or the data file and the key.

TensorFlow's messages for a damaged checkpoint name the prefix at best (a
checksum mismatch says "shard 0"); graph-mode reads say neither the key nor
the file. Ours name the damaged file, and for a damaged value its key, in
every way a checkpoint is read: eagerly, by graph-mode restore ops, and by
the v1 `Saver`, sharded or not. The error types stay TensorFlow's.

Finding the file of a key takes the checkpoint's `.index` table, which
`tf_objckpt.engine.bundle_index` parses; it is checked here against TensorFlow's
reader on TensorFlow-written checkpoints.

Covers: tf_objckpt.engine.bundle_index, tf_objckpt.engine.reads,
tf_objckpt.engine.checkpoint_opening, tf_objckpt.engine.graph_restores,
tf_objckpt.engine.multi_device_saver, tf_objckpt.v1.saver_builders.
"""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import bundle_index

_CONFIG = tf.compat.v1.ConfigProto(device_count={"CPU": 2})


def _graph_variables():
  """Variables `a` on /cpu:0 and `b` on /cpu:1, each of distinct values."""
  with tf.device("/cpu:0"):
    a = tf.compat.v1.get_variable("a",
                                  initializer=np.arange(64, dtype=np.float32))
  with tf.device("/cpu:1"):
    b = tf.compat.v1.get_variable("b",
                                  initializer=np.arange(100,
                                                        132,
                                                        dtype=np.float32))
  return a, b


def _write_with_saver(prefix, sharded):
  with tf.Graph().as_default():
    _graph_variables()
    saver = tf.compat.v1.train.Saver(sharded=sharded)
    with tf.compat.v1.Session(config=_CONFIG) as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, prefix, write_meta_graph=False)


def _write_object_based(prefix):
  module = tf.Module()
  module.a = tf.Variable(np.arange(64, dtype=np.float32))
  module.b = tf.Variable(np.arange(100, 132, dtype=np.float32))
  return tf.train.Checkpoint(module=module).write(prefix)


def _flip_value_of(prefix, key):
  """Flips bytes inside `key`'s stored value; returns its data file."""
  index = bundle_index.read_bundle_index(prefix)
  entry = index.entries[key]
  data_file = index.data_file_of(key)
  with open(data_file, "r+b") as f:
    f.seek(entry.offset + entry.size // 2)
    f.write(b"\xa5\xa5\xa5\xa5")
  return data_file


def test_index_matches_tensorflow_reader_across_blocks_and_shards(tmp_path):
  # Many long keys fill several table blocks; a sharded Saver makes shards.
  module = tf.Module()
  module.values = [
      tf.Variable(np.full([i % 7 + 1], i, np.float32)) for i in range(600)
  ]
  many = tf.train.Checkpoint(module=module).write(str(tmp_path / "many"))
  sharded = _write_with_saver(str(tmp_path / "sharded"), sharded=True)
  for prefix, shards in ((many, 1), (sharded, 2)):
    index = bundle_index.read_bundle_index(prefix)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    assert index.header.num_shards == shards
    assert set(index.entries) == set(shapes)
    for key, entry in index.entries.items():
      assert [d.size for d in entry.shape.dim] == shapes[key], key
      assert tf.as_dtype(entry.dtype) == dtypes[key], key
      assert (entry.offset + entry.size
              <= os.path.getsize(index.data_file_of(key))), key
    assert {entry.shard_id for entry in index.entries.values()
           } == set(range(shards))


def test_damaged_index_table_is_a_data_loss_error_naming_it(tmp_path):
  prefix = _write_object_based(str(tmp_path / "ckpt"))
  with open(prefix + ".index", "r+b") as f:
    f.truncate(os.path.getsize(prefix + ".index") - 3)
  with pytest.raises(tf.errors.DataLossError, match="ckpt.index"):
    bundle_index.read_bundle_index(prefix)


def _index_variants(index):
  """`(what, contents)`: each byte of `index` flipped, and each truncation."""
  for position, byte in enumerate(index):
    yield (f"byte {position} flipped",
           index[:position] + bytes([byte ^ 0xFF]) + index[position + 1:])
  for length in range(len(index)):
    yield f"cut to {length} bytes", index[:length]


def _small_module(a, b):
  module = tf.Module()
  module.a = tf.Variable(np.asarray(a, np.float32))
  module.b = tf.Variable(b, dtype=tf.int64)
  return module


def test_every_damaged_index_byte_is_data_loss_naming_it_or_harmless(tmp_path):
  """Each flipped byte and each truncation of a small checkpoint's `.index`
  restores exactly the saved values (padding, unused bits) or raises a
  `DataLossError` naming the index file and assigns nothing. TensorFlow's
  reader raises a bare `IndexError` for a footer pointing past the end."""
  saved = tf_objckpt.Checkpoint(module=_small_module([1.5, 2.5, 3.5], 7))
  prefix = saved.write(str(tmp_path / "saved"))
  data_file = bundle_index.data_file_name(prefix, 0, 1)
  with open(prefix + ".index", "rb") as f:
    index = f.read()
  outcomes = collections.Counter()
  for number, (what, contents) in enumerate(_index_variants(index)):
    damaged = str(tmp_path / f"damaged{number}")
    os.link(data_file, bundle_index.data_file_name(damaged, 0, 1))
    with open(damaged + ".index", "wb") as f:
      f.write(contents)
    module = _small_module([0., 0., 0.], 0)
    error = tl.outcome(tf_objckpt.Checkpoint(module=module).read, damaged).error
    restored = (list(module.a.numpy()), int(module.b.numpy()))
    if error is None:
      assert restored == ([1.5, 2.5, 3.5], 7), what
    else:
      assert isinstance(error, tf.errors.DataLossError), (what, error)
      assert repr(damaged + ".index") in str(error), (what, error)
      assert restored == ([0., 0., 0.], 0), what
    outcomes[error is None] += 1
  assert outcomes[True] and outcomes[False] > len(index), outcomes


def _run_object_based_restore(lib, prefix, session, **objects):
  lib.CheckpointV1(**objects).restore(prefix).run_restore_ops(session)


def _restore_errors(prefix, how):
  """What restoring damaged `prefix` raises, by implementation."""
  errors = {}
  for impl, lib in tl.IMPLS.items():
    if how == "eager":
      module = tf.Module()
      module.a = tf.Variable(np.zeros([64], np.float32))
      module.b = tf.Variable(np.zeros([32], np.float32))
      errors[impl] = tl.outcome(lib.Checkpoint(module=module).read,
                                prefix).error
      continue
    with tf.Graph().as_default():
      a, b = _graph_variables()
      with tf.compat.v1.Session(config=_CONFIG) as sess:
        if how == "graph":
          errors[impl] = tl.outcome(_run_object_based_restore,
                                    lib,
                                    prefix,
                                    sess,
                                    a=a,
                                    b=b).error
        else:
          errors[impl] = tl.outcome(
              lib.Saver(sharded=True).restore, sess, prefix).error
  return errors


def _write_for(how, prefix):
  if how == "eager":
    return _write_object_based(prefix)
  if how == "graph":
    with tf.Graph().as_default():
      a, b = _graph_variables()
      with tf.compat.v1.Session(config=_CONFIG) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        return tf.compat.v1.train.Checkpoint(a=a, b=b).write(prefix,
                                                             session=sess)
  return _write_with_saver(prefix, sharded=True)


_DAMAGED_KEY = {
    "eager": "module/b/.ATTRIBUTES/VARIABLE_VALUE",
    "graph": "b/.ATTRIBUTES/VARIABLE_VALUE",
    "saver": "b"
}


@pytest.mark.parametrize("how", sorted(_DAMAGED_KEY))
def test_damaged_value_names_its_key_and_data_file(tmp_path, how):
  prefix = _write_for(how, str(tmp_path / "ckpt"))
  key = _DAMAGED_KEY[how]
  data_file = _flip_value_of(prefix, key)
  errors = _restore_errors(prefix, how)
  assert type(errors["ours"]) is type(errors["tf"]) is tf.errors.DataLossError
  message = str(errors["ours"])
  assert repr(key) in message and repr(data_file) in message, message
  assert repr(key) not in str(errors["tf"])  # TensorFlow names neither.


@pytest.mark.parametrize("how", ["graph", "saver"])
def test_truncated_data_file_is_named(tmp_path, how):
  prefix = _write_for(how, str(tmp_path / "ckpt"))
  index = bundle_index.read_bundle_index(prefix)
  last_shard = index.header.num_shards - 1
  data_file = index.data_file(last_shard)
  with open(data_file, "r+b") as f:
    f.truncate(8)
  errors = _restore_errors(prefix, how)
  # TensorFlow raises OutOfRangeError (the Saver) or IndexError (reading the
  # object graph); damage is a DataLossError here, as eagerly (API.md).
  assert isinstance(errors["tf"],
                    (tf.errors.OutOfRangeError, IndexError)), (repr(
                        errors["tf"]))
  assert type(errors["ours"]) is tf.errors.DataLossError, repr(errors["ours"])
  assert repr(data_file) in str(errors["ours"]), str(errors["ours"])
