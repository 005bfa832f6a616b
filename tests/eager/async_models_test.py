"""Asynchronous saves of real models and states, graph mode, and exit.

Keras 3, tf_keras and `tf.Module` state saved asynchronously is what a
synchronous save at the same moment writes, whatever training does while
the write runs, and restores in TensorFlow and in tf_objckpt. TensorFlow's
own asynchronous save writes the same keys and values, but names its copies
of Keras 3 variables in the object graph. Python state and
`_serialize_to_tensors` values are taken at `save()` time too, where
TensorFlow's asynchronous save reads them when it writes. Building
a graph, both save synchronously (with a warning). A process that exits
right after `save()` waits for the write.

Covers: tf_objckpt.engine.async_checkpoint, tf_objckpt.checkpoint,
tf_objckpt.api.object_checkpoints.
"""

import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.trackable import data_structures as tf_data_structures

import testlib as tl
import tf_objckpt

_ASYNC = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)


def _variables(model, optimizer):
  return list(model.weights) + list(optimizer.variables(
  ) if callable(optimizer.variables) else optimizer.variables)


def _model_weights(model, optimizer):
  return tl.variable_values(_variables(model, optimizer))


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_keras_model_and_optimizer(tmp_path, flavor):
  model, optimizer = tl.trained(flavor, "functional")
  checkpoint = tf_objckpt.Checkpoint(model=model, optimizer=optimizer)
  synchronous = checkpoint.write(os.fspath(tmp_path / "sync"))
  at_save = _model_weights(model, optimizer)
  path = checkpoint.write(os.fspath(tmp_path / "async"), options=_ASYNC)
  for _ in range(3):
    tl.train_step(model, optimizer)
  checkpoint.sync()
  assert tl.signature(path) == tl.signature(synchronous)
  assert tl.object_graph(path) == tl.object_graph(synchronous)
  tl.assert_values_equal(tl.values(synchronous), tl.values(path))
  for impl, lib in tl.IMPLS.items():
    restored_model, restored_optimizer = tl.untrained(flavor, "functional")
    status = lib.Checkpoint(model=restored_model,
                            optimizer=restored_optimizer).read(path)
    status.assert_existing_objects_matched()
    tl.assert_variables_equal(
        at_save, _model_weights(restored_model, restored_optimizer)), impl


def _full_names(path):
  return sorted(attribute.full_name
                for node in tl.object_graph(path).nodes
                for attribute in node.attributes)


@pytest.mark.parametrize("flavor", tl.FLAVORS)
def test_tensorflows_async_save_of_keras_writes_the_same(tmp_path, flavor):
  model, optimizer = tl.trained(flavor, "functional")
  trained = _model_weights(model, optimizer)
  paths = {}
  for name, lib, options in (("tf", tf.train, _ASYNC),
                             ("tf_sync", tf.train, None), ("ours", tf_objckpt,
                                                           _ASYNC)):
    for variable, value in zip(_variables(model, optimizer), trained):
      variable.assign(value)
    checkpoint = lib.Checkpoint(model=model, optimizer=optimizer)
    paths[name] = checkpoint.save(os.fspath(tmp_path / name / "s"),
                                  options=options)
    tl.train_step(model, optimizer)
    checkpoint.sync()
  # Ours is what TensorFlow's synchronous save writes.
  tl.assert_same_checkpoint(paths["tf_sync"], paths["ours"])
  assert tl.signature(paths["tf"]) == tl.signature(paths["ours"])
  tl.assert_values_equal(tl.values(paths["tf"]), tl.values(paths["ours"]),
                         tl.TENSORFLOWS_AND_OURS)
  if flavor == "keras3":
    # TensorFlow's asynchronous save names its copies of Keras 3 variables
    # in the object graph, not the variables.
    assert set(_full_names(paths["tf"])) == {"Variable", "save_counter"}
    assert "Variable" not in _full_names(paths["ours"])
  else:
    tl.assert_same_checkpoint(paths["tf"], paths["ours"])


class _Hidden(tf.Module):
  """Saves an untracked variable and a numpy array its own way."""

  def __init__(self):
    super().__init__()
    self.hidden = tf_data_structures.NoDependency(tf.Variable([1.0, 2.0]))
    self.array = np.array([5, 6], np.int32)

  def _serialize_to_tensors(self):
    return {"hidden": self.hidden, "array": tf.constant(self.array)}

  def _restore_from_tensors(self, restored_tensors):
    self.hidden.assign(restored_tensors["hidden"])
    self.array = restored_tensors["array"].numpy()


def _module_state(lib):
  module = tf.Module()
  module.dense = tf.Variable(tf.fill([64, 64], 1.0))
  module.counter = tl.Counter(3)
  module.custom = _Hidden()
  return module, lib.Checkpoint(module=module)


def _change(module):
  module.dense.assign_add(tf.ones([64, 64]))
  module.counter.count = 99
  module.custom.hidden.assign([7.0, 8.0])
  module.custom.array[:] = [0, 0]


def test_module_python_state_and_custom_tensors(tmp_path):
  module, checkpoint = _module_state(tf_objckpt)
  paths = {
      "ours":
          checkpoint.save(os.fspath(tmp_path / "ours" / "s"), options=_ASYNC)
  }
  _change(module)
  checkpoint.sync()
  module, checkpoint = _module_state(tf.train)
  paths["tf"] = checkpoint.save(os.fspath(tmp_path / "tf" / "s"))
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])
  saved = tl.values(paths["ours"])
  np.testing.assert_array_equal(
      saved["module/dense/.ATTRIBUTES/VARIABLE_VALUE"], np.ones([64, 64]))
  assert saved["module/counter/.ATTRIBUTES/py_state"] == b"3"
  np.testing.assert_array_equal(saved["module/custom/.ATTRIBUTES/hidden"],
                                [1.0, 2.0])
  np.testing.assert_array_equal(saved["module/custom/.ATTRIBUTES/array"],
                                [5, 6])
  for writer, reader in tl.PAIRS:
    module, checkpoint = _module_state(tl.IMPLS[reader])
    _change(module)
    checkpoint.restore(paths[writer]).assert_consumed()
    assert module.counter.count == 3
    np.testing.assert_array_equal(module.custom.array, [5, 6])
    np.testing.assert_array_equal(module.dense.numpy(), np.ones([64, 64]))


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_graph_mode_saves_synchronously_with_a_warning(tmp_path, impl):
  prefix = os.fspath(tmp_path / "s")
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variable = tf.compat.v1.Variable(4.0, use_resource=True)
    checkpoint = tl.IMPLS[impl].Checkpoint(v=variable)
    session.run(variable.initializer)
    with session.as_default(), tl.captured_logs() as logs:
      path = checkpoint.save(prefix, options=_ASYNC)
    # Complete and recorded on return: nothing runs in the background.
    assert tf.train.load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE") == 4.0
    assert tf.train.latest_checkpoint(tmp_path) == path
  assert any("graph" in message and "sync" in message for message in logs)


_EXIT_SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
import tf_objckpt

directory, mode = sys.argv[1:]
variable = tf.Variable(np.full([4096, 4096], 3.0, np.float32))  # 64 MiB
checkpoint = tf_objckpt.Checkpoint(v=variable)
if mode == "fail":  # A directory where the index must go.
  os.makedirs(os.path.join(directory, "s-1.index", "occupied"))
path = checkpoint.save(os.path.join(directory, "s"), options=
    tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True))
variable.assign(tf.zeros([4096, 4096]))
print("returned", path, flush=True)
"""


def test_exit_waits_for_the_pending_write(tmp_path):
  result = tl.run_python(_EXIT_SCRIPT, tmp_path, "ok")
  assert result.returncode == 0, result.stderr
  path = os.fspath(tmp_path / "s-1")
  assert result.stdout.split() == ["returned", path]
  assert tf.train.latest_checkpoint(tmp_path) == path
  np.testing.assert_array_equal(
      tf.train.load_variable(path, "v/.ATTRIBUTES/VARIABLE_VALUE"),
      np.full([4096, 4096], 3.0))


def test_error_of_a_write_pending_at_exit_is_logged(tmp_path):
  result = tl.run_python(_EXIT_SCRIPT, tmp_path, "fail")
  assert "returned" in result.stdout
  assert "asynchronous checkpoint write failed" in result.stderr
  assert os.fspath(tmp_path / "s-1") in result.stderr
  assert sorted(os.listdir(tmp_path)) == ["s-1.index"]
