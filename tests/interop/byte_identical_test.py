"""The files tf_objckpt writes are byte for byte the files TensorFlow writes.

The same objects are checkpointed by TensorFlow and by tf_objckpt, each
into a directory of its own: object-based checkpoints eagerly
(`Checkpoint`) and in a graph (`CheckpointV1`), and name-based ones (the v1
`Saver`). Both directories must hold the same files, and each `.index`,
`.data-*` and `.meta` file the same bytes. The `checkpoint` state file is
compared too, with its directory replaced (it may name it). Sharded saves
over two devices: `saver/saver_sharded_test.py`.

Covers: tf_objckpt.engine.writes, tf_objckpt.engine.multi_device_saver,
tf_objckpt.engine.state_file, tf_objckpt.checkpoint, tf_objckpt.saver,
tf_objckpt.v1.meta_graphs, tf_objckpt.api.object_checkpoints,
tf_objckpt.v1.name_based_saver.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl


def _dtypes_module():
  """A tf.Module with variables of several dtypes and shapes."""
  module = tf.Module()
  module.matrix = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4))
  module.step = tf.Variable(7, dtype=tf.int64)
  module.text = tf.Variable([b"", b"a", "\u00e9t\u00e9".encode()])
  module.half = tf.Variable(np.full((2, 2), 0.5, np.float16))
  module.brain = tf.Variable([1.5, -2.0], dtype=tf.bfloat16)
  module.flags = tf.Variable([[True], [False]])
  module.complex = tf.Variable(np.arange(3) + 0.5j, dtype=tf.complex128)
  module.cube = tf.Variable(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
  module.empty = tf.Variable(np.zeros((0, 2), np.float64))
  return module


def _many_module():
  """`tl.MANY` variables of several dtypes: the batched paths."""
  module = tf.Module()
  module.variables_list = [
      tf.Variable(tl.mixed_value(i, 1)) for i in range(tl.MANY)
  ]
  return module


def _state_module():
  """Variables beside Python state and a table's own tensors."""
  module = tf.Module()
  module.weights = tf.Variable([1.0, 2.0])
  module.counter = tl.Counter(3)
  module.table = tf.lookup.experimental.MutableHashTable(tf.string,
                                                         tf.int64,
                                                         default_value=-1)
  module.table.insert(["a"], [1])
  return module


_MODULES = {
    "dtypes": _dtypes_module,
    "many": _many_module,
    "state": _state_module
}
_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)


@pytest.mark.parametrize("how", ["write", "save_twice", "async_save"])
@pytest.mark.parametrize("objects", sorted(_MODULES))
def test_eager_checkpoint(tmp_path, objects, how):
  module = _MODULES[objects]()
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(module=module)
    prefix = os.fspath(tmp_path / impl / "ckpt")
    if how == "write":
      checkpoint.write(prefix)
    elif how == "save_twice":
      checkpoint.save(prefix)
      checkpoint.save(prefix)
    else:
      checkpoint.save(prefix, options=_ASYNC)
      checkpoint.sync()
  tl.assert_same_files(tmp_path)


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_eager_keras_model_and_optimizer(tmp_path, flavor):
  model, optimizer = tl.trained(flavor, "functional")
  for impl, lib in tl.IMPLS.items():
    lib.Checkpoint(model=model, optimizer=optimizer).save(
        os.fspath(tmp_path / impl / "ckpt"))
  tl.assert_same_files(tmp_path)


@pytest.mark.parametrize("kind", tl.VARIABLE_KINDS)
def test_graph_model_and_optimizer(tmp_path, kind):
  for impl in tl.IMPLS:
    with tl.GraphModel(impl, kind) as model:
      model.initialize()
      model.train()
      model.save(os.fspath(tmp_path / impl / "ckpt"))
      model.checkpoint.write(os.fspath(tmp_path / impl / "written"),
                             session=model.session)
  tl.assert_same_files(tmp_path)


def test_graph_many_variables_on_two_cpus(tmp_path):
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl, config=config) as program:
      variables = []
      for i in range(tl.MANY):
        with tf.device(f"/cpu:{i % 2}"):
          variables.append(
              tf.compat.v1.get_variable(f"v{i}",
                                        initializer=tl.mixed_value(i, 1),
                                        use_resource=bool(i % 11)))
      program.track(variables)
      program.save(os.fspath(tmp_path / impl / "ckpt"))
  tl.assert_same_files(tmp_path)


def test_graph_python_state(tmp_path):
  """Python state beside variables, saved by `CheckpointV1` in a graph."""
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      program.track([program.variable("w", [1.0, 2.0])])
      program.root.counter = tl.Counter(3)
      program.save(os.fspath(tmp_path / impl / "ckpt"))
      program.root.counter.count = 4
      program.save(os.fspath(tmp_path / impl / "ckpt"))
  tl.assert_same_files(tmp_path)


def _saver_variables():
  """Resource, reference, partitioned and string variables of a graph."""
  constant = tf.compat.v1.constant_initializer
  return [
      tf.compat.v1.get_variable("a",
                                initializer=np.arange(6,
                                                      dtype=np.float32).reshape(
                                                          2, 3)),
      tf.compat.v1.get_variable("scope/b",
                                initializer=np.arange(4, dtype=np.int64),
                                use_resource=False),
      tf.compat.v1.get_variable(
          "p", [6, 2],
          initializer=constant(3.),
          partitioner=tf.compat.v1.fixed_size_partitioner(3)),
      tf.compat.v1.get_variable("s", initializer=tf.constant(["x", "yz"])),
  ]


@pytest.mark.parametrize("sharded", [False, True])
def test_v1_saver_in_a_graph(tmp_path, sharded):
  for impl, lib in tl.IMPLS.items():
    os.makedirs(tmp_path / impl)
    with tl.GraphProgram(impl) as program:
      _saver_variables()
      saver = lib.Saver(sharded=sharded, max_to_keep=2)
      program.initialize()
      for step in (1, 2, 3):
        saver.save(program.session,
                   os.fspath(tmp_path / impl / "model"),
                   global_step=step)
  tl.assert_same_files(tmp_path)


def test_v1_saver_eagerly(tmp_path):
  variables = [
      tf.Variable(np.arange(6, dtype=np.float32), name="a"),
      tf.Variable([[1, 2]], dtype=tf.int32, name="scope/b"),
      tf.Variable(["x", "yz"], name="s")
  ]
  for impl, lib in tl.IMPLS.items():
    os.makedirs(tmp_path / impl)
    saver = lib.Saver(variables, max_to_keep=2)
    for step in (1, 2, 3):
      saver.save(None, os.fspath(tmp_path / impl / "model"), global_step=step)
  tl.assert_same_files(tmp_path)
