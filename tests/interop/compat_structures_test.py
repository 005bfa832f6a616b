"""tf_objckpt against tf.train.Checkpoint on modules, containers and dtypes.

For each structure the same objects are written by both; the checkpoints
must have the same keys, shapes, dtypes, values and object graph. A
checkpoint from either must restore into fresh objects through the other
with `assert_consumed()` passing and the values of the originals.

Covers: tf_objckpt.checkpoint, tf_objckpt.graph_view, tf_objckpt.restore,
tf_objckpt.saveable_object_util, tf_objckpt.engine.state_file,
tf_objckpt.api.object_checkpoints, tf_objckpt.objects.graph_walk,
tf_objckpt.objects.graph_serialization, tf_objckpt.restoring.restore_walk,
tf_objckpt.restoring.node_binding.
"""

import functools
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
import tf_keras

import testlib as tl
import tf_objckpt


def _var(value, offset, dtype=tf.float32, name=None):
  return tf.Variable(np.asarray(value) + offset, dtype=dtype, name=name)


def build_nested(offset=0.0):
  """Nested tf.Modules and AutoTrackables with containers and sharing.

  Args:
    offset: Added to every initial value, so fresh copies start different.

  Returns:
    (root, the variables of the structure in a fixed order).
  """
  root = tf.Module(name="root")
  root.auto = tf_objckpt.AutoTrackable()
  root.auto.v = _var(1.0, offset)
  root.auto.vectors = [_var([2.0, 3.0], offset), _var([[4.0]], offset)]
  root.auto.table = {
      "b": _var(5.0, offset),
      "a": [_var(6.0, offset), {
          "deep": _var(7.0, offset)
      }]
  }
  root.auto.pair = (_var(8.0, offset), tf_objckpt.AutoTrackable())
  root.auto.pair[1].w = _var(9.0, offset)
  inner = tf.Module(name="inner")
  inner.k = _var(np.arange(6.0).reshape(2, 3), offset)
  inner.auto = tf_objckpt.AutoTrackable()
  inner.auto.z = _var(11.0, offset, dtype=tf.float64)
  inner.auto.module = tf.Module()
  inner.auto.module.deepest = _var([12.0], offset)
  root.auto.inner = inner
  # One AutoTrackable and one variable each reached by two paths.
  shared = tf_objckpt.AutoTrackable()
  shared.s = _var(13.0, offset)
  root.auto.shared = shared
  root.modules = [tf.Module(), shared]
  root.modules[0].m = _var(14.0, offset)
  shared_variable = _var(15.0, offset)
  root.auto.sv = shared_variable
  root.modules[0].sv_again = shared_variable
  root.by_name = {
      "shared": shared,
      "count": _var(16, int(offset), dtype=tf.int64)
  }
  leaves = [
      root.auto.v, *root.auto.vectors, root.auto.table["b"],
      root.auto.table["a"][0], root.auto.table["a"][1]["deep"],
      root.auto.pair[0], root.auto.pair[1].w, inner.k, inner.auto.z,
      inner.auto.module.deepest, shared.s, root.modules[0].m, shared_variable,
      root.by_name["count"]
  ]
  return root, leaves


_DTYPES = [
    tf.float16, tf.float32, tf.float64, tf.bfloat16, tf.int8, tf.int16,
    tf.int32, tf.int64, tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool,
    tf.complex64, tf.complex128, tf.string
]


def _dtype_value(dtype, offset):
  """A (2, 3) value of `dtype` that differs for different offsets."""
  if dtype == tf.string:
    return tf.constant([[b"", b"a", "\u00e9t\u00e9".encode()],
                        [b"\x00\xff", b"x" * 100,
                         str(offset).encode()]])
  if dtype == tf.bool:
    value = np.array([[True, False, True], [False, True, False]])
    return tf.constant(value if offset == 0 else ~value)
  base = np.arange(6).reshape(2, 3) + 1 + offset
  if dtype.is_complex:
    return tf.constant(base + 0.5j * base, dtype=dtype)
  return tf.cast(tf.constant(base, dtype=tf.float64), dtype)


def build_dtypes(offset=0):
  """An AutoTrackable with a (2, 3) and a scalar variable of every dtype."""
  root = tf_objckpt.AutoTrackable()
  leaves = []
  for dtype in _DTYPES:
    matrix = tf.Variable(_dtype_value(dtype, offset))
    scalar = tf.Variable(_dtype_value(dtype, offset)[1, 2])
    setattr(root, dtype.name, matrix)
    setattr(root, dtype.name + "_scalar", scalar)
    leaves += [matrix, scalar]
  return root, leaves


STRUCTURES = {"nested": build_nested, "dtypes": build_dtypes}


def test_dtype_structure_covers_every_dtype(tmp_path):
  root, _ = build_dtypes()
  path = tl.write("ours", tmp_path / "ckpt", tree=root)
  saved = {dtype for _, dtype in tl.signature(path).values()}
  assert saved == {dtype.name for dtype in _DTYPES}


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_write_gives_tensorflows_checkpoint(tmp_path, structure):
  root, _ = STRUCTURES[structure]()
  paths = tl.write_both(tmp_path, tree=root)
  assert paths["ours"] == os.fspath(tmp_path / "ours" / "ckpt")
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  # The structure really holds what it claims: shared objects once.
  graph = tl.object_graph(paths["ours"])
  values = tl.values(paths["ours"])
  if structure == "nested":
    assert len(values) == 15
    assert "tree/auto/sv/.ATTRIBUTES/VARIABLE_VALUE" in values
    assert not any("sv_again" in key for key in values)
    assert len(graph.nodes) > 20


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_save_gives_tensorflows_checkpoint_and_state_file(tmp_path, structure):
  root, _ = STRUCTURES[structure]()
  checkpoints = {
      impl: lib.Checkpoint(tree=root) for impl, lib in tl.IMPLS.items()
  }
  paths = {impl: [] for impl in tl.IMPLS}
  for _ in range(2):
    for impl, checkpoint in checkpoints.items():
      paths[impl].append(checkpoint.save(os.fspath(tmp_path / impl / "ckpt")))
  for impl in tl.IMPLS:
    assert paths[impl] == [
        os.fspath(tmp_path / impl / f"ckpt-{n}") for n in (1, 2)
    ]
  for tf_path, our_path in zip(paths["tf"], paths["ours"]):
    tl.assert_same_checkpoint(tf_path, our_path)
  assert int(
      tl.values(
          paths["ours"][1])["save_counter/.ATTRIBUTES/VARIABLE_VALUE"]) == 2
  # The `checkpoint` state files say the same, relative paths included.
  states = {}
  for impl in tl.IMPLS:
    directory = tmp_path / impl
    with open(directory / "checkpoint") as f:
      states[impl] = f.read()
    assert tf.train.latest_checkpoint(os.fspath(directory)) == paths[impl][1]
    assert tf_objckpt.latest_checkpoint(os.fspath(directory)) == paths[impl][1]
  assert states["ours"] == states["tf"]
  assert 'model_checkpoint_path: "ckpt-2"' in states["ours"]


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
@pytest.mark.parametrize("writer", tl.IMPLS)
@pytest.mark.parametrize("method", ["write_read", "save_restore"])
def test_cross_restore(tmp_path, structure, writer, method):
  build = STRUCTURES[structure]
  source, source_leaves = build()
  saver = tl.IMPLS[writer].Checkpoint(tree=source)
  if method == "write_read":
    path = saver.write(os.fspath(tmp_path / "ckpt"))
  else:
    path = saver.save(os.fspath(tmp_path / "ckpt"))
  expected = tl.variable_values(source_leaves)
  fresh, fresh_leaves = build(100)
  for before, after in zip(expected, tl.variable_values(fresh_leaves)):
    assert not np.array_equal(before, after)
  reader = tl.IMPLS[tl.other(writer)].Checkpoint(tree=fresh)
  if method == "write_read":
    status = reader.read(path)
  else:
    status = reader.restore(path)
    assert int(reader.save_counter.numpy()) == 1
  status.assert_consumed()
  status.assert_existing_objects_matched()
  status.assert_nontrivial_match()
  tl.assert_variables_equal(expected, fresh_leaves)
  for before, after in zip(source_leaves, fresh_leaves):
    assert after.dtype == before.dtype and after.shape == before.shape


def test_shared_variable_stays_shared_after_restore(tmp_path):
  source, _ = build_nested()
  path = tl.write("tf", tmp_path / "ckpt", tree=source)
  fresh, _ = build_nested(100)
  tf_objckpt.Checkpoint(tree=fresh).read(path).assert_consumed()
  assert fresh.auto.sv is fresh.modules[0].sv_again
  assert fresh.auto.shared is fresh.modules[1] is fresh.by_name["shared"]
  fresh.auto.shared.s.assign(-1.0)
  assert float(fresh.modules[1].s.numpy()) == -1.0


def _attach_ours(container, offset):
  """Assigns a tf_objckpt.AutoTrackable with variables to `container`."""
  ours = tf_objckpt.AutoTrackable()
  ours.v = tf.Variable([1.0 + offset, 2.0 + offset])
  ours.nested = [tf_objckpt.AutoTrackable()]
  ours.nested[0].w = tf.Variable(3 + int(offset), dtype=tf.int32)
  container.ours = ours
  return [ours.v, ours.nested[0].w]


def _dense_layer(keras_module, offset, attach=True):
  layer = keras_module.layers.Dense(2)
  layer.build((None, 3))
  layer.kernel.assign(np.full((3, 2), 1.0 + offset))
  leaves = [layer.kernel, layer.bias]
  return layer, leaves + (_attach_ours(layer, offset) if attach else [])


def _module(offset, attach=True):
  module = tf.Module()
  module.own = tf.Variable(offset)
  leaves = [module.own]
  return module, leaves + (_attach_ours(module, offset) if attach else [])


CONTAINERS = {
    "keras3_layer": functools.partial(_dense_layer, keras),
    "tf_keras_layer": functools.partial(_dense_layer, tf_keras),
    "tf_module": _module
}


@pytest.mark.parametrize("container", sorted(CONTAINERS))
def test_tensorflow_saves_and_restores_ours_held_by_its_objects(
    tmp_path, container):
  build = CONTAINERS[container]
  source, source_leaves = build(0.0)
  path = tf.train.Checkpoint(obj=source).write(os.fspath(tmp_path / "ckpt"))
  keys = set(tl.signature(path))
  assert "obj/ours/v/.ATTRIBUTES/VARIABLE_VALUE" in keys
  assert "obj/ours/nested/0/w/.ATTRIBUTES/VARIABLE_VALUE" in keys
  # Ours writes the same checkpoint for the same objects.
  ours_path = tl.write("ours", tmp_path / "ours", obj=source)
  tl.assert_same_checkpoint(path, ours_path)
  expected = tl.variable_values(source_leaves)
  # TensorFlow restores into existing objects...
  fresh, fresh_leaves = build(10.0)
  tf.train.Checkpoint(obj=fresh).read(path).assert_consumed()
  tl.assert_variables_equal(expected, fresh_leaves)
  # ... and on creation, when ours is attached after the restore.
  fresh, fresh_leaves = build(20.0, attach=False)
  status = tf.train.Checkpoint(obj=fresh).read(path)
  with pytest.raises(AssertionError):
    status.assert_consumed()
  fresh_leaves += _attach_ours(fresh, 30.0)
  status.assert_consumed()
  tl.assert_variables_equal(expected, fresh_leaves)


def _build_stateful(offset=0):
  """Trackables that save through `_serialize_to_tensors` and Python state.

  The iterator runs no background prefetching, whose buffered elements,
  and so the shape of the saved state, would depend on timing.
  """
  options = tf.data.Options()
  options.autotune.enabled = False
  options.experimental_optimization.inject_prefetch = False
  dataset = tf.data.Dataset.range(100).with_options(options)
  iterator = iter(dataset)
  table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, -1)
  if offset == 0:
    for _ in range(3):
      next(iterator)
    table.insert(tf.constant(["a", "b"]), tf.constant([1, 2], tf.int64))
  objects = {
      "iterator": iterator,
      "table": table,
      "counter": tl.Counter(7 if offset == 0 else 0),
      "v": tf.Variable(1.0 + offset)
  }

  def state():
    return (int(next(iterator).numpy()),
            table.lookup(tf.constant(["a", "b", "c"])).numpy().tolist(),
            objects["counter"].count, float(objects["v"].numpy()))

  return objects, state


def test_iterators_tables_and_python_state(tmp_path):
  objects, state = _build_stateful()
  paths = tl.write_both(tmp_path, **objects)
  # Values of iterators are opaque variants: compare keys and graphs only.
  tl.assert_same_checkpoint(paths["tf"], paths["ours"], compare_values=False)
  assert "iterator/.ATTRIBUTES/ITERATOR_STATE" in tl.signature(paths["ours"])
  expected = state()
  assert expected == (3, [1, 2, -1], 7, 1.0)
  for writer in tl.IMPLS:
    for reader in tl.IMPLS:
      fresh, fresh_state = _build_stateful(offset=10)
      status = tl.IMPLS[reader].Checkpoint(**fresh).read(paths[writer])
      status.assert_consumed()
      assert fresh_state() == expected, (writer, reader)
      # And on creation.
      later, later_state = _build_stateful(offset=10)
      checkpoint = tl.IMPLS[reader].Checkpoint()
      status = checkpoint.read(paths[writer])
      for name, value in later.items():
        setattr(checkpoint, name, value)
      status.assert_consumed()
      assert later_state() == expected, (writer, reader)


def _v1_optimizer_setup(offset=0.0):
  module = tf.Module()
  module.w = tf.Variable([1.0 + offset, 2.0])
  module.b = tf.Variable(3.0 + offset)
  return module, tf.compat.v1.train.AdamOptimizer(0.1)


def test_v1_optimizer_slot_variables(tmp_path):
  """tf.compat.v1.train optimizers keep slots and non-slot variables."""
  module, optimizer = _v1_optimizer_setup()
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(module.w * module.w) + module.b
  variables = [module.w, module.b]
  optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
  paths = tl.write_both(tmp_path, module=module, optimizer=optimizer)
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  assert any(".OPTIMIZER_SLOT" in key for key in tl.signature(paths["ours"]))
  expected = tl.values(paths["tf"])
  for writer in tl.IMPLS:
    for reader in tl.IMPLS:
      fresh, fresh_optimizer = _v1_optimizer_setup(10.0)
      status = tl.IMPLS[reader].Checkpoint(module=fresh,
                                           optimizer=fresh_optimizer).read(
                                               paths[writer])
      # The slots were created from the checkpoint when the variables were
      # bound; the beta powers wait for the optimizer to create them.
      assert fresh_optimizer.get_slot(fresh.w, "m") is not None
      # pylint: disable=protected-access
      fresh_optimizer._create_slots([fresh.w, fresh.b])
      fresh_optimizer._prepare()
      fresh_optimizer._create_non_slot_variable(initial_value=0.9,
                                                name="beta1_power",
                                                colocate_with=fresh.w)
      fresh_optimizer._create_non_slot_variable(initial_value=0.999,
                                                name="beta2_power",
                                                colocate_with=fresh.w)
      # pylint: enable=protected-access
      status.assert_consumed()
      tl.assert_values_equal(
          expected,
          tl.snapshot(tmp_path, module=fresh, optimizer=fresh_optimizer))
