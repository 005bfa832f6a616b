"""Checkpoint's TF 2.21 call surface: paths, `options=`, `root=` variants.

Each test does the same thing with `tf.train.Checkpoint` and
`tf_objckpt.Checkpoint` and compares what they return, write or raise.

Covers: tf_objckpt.checkpoint, tf_objckpt.api.trackable_saver,
tf_objckpt.api.object_checkpoints.
"""

import os
import pathlib
import weakref

import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt

# A device no process has: I/O placed there fails.
_UNKNOWN_DEVICE = "/job:nowhere/replica:0/task:0/device:CPU:0"


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_write_accepts_a_path_like_prefix(tmp_path, impl):
  checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(1.0))
  path = checkpoint.write(tmp_path / "ckpt")
  assert path == os.fspath(tmp_path / "ckpt")
  assert isinstance(path, str)
  assert tl.keys(path) == [
      "_CHECKPOINTABLE_OBJECT_GRAPH", "v/.ATTRIBUTES/VARIABLE_VALUE"
  ]


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_save_read_and_restore_accept_path_like_paths(tmp_path, impl):
  cls = tl.IMPLS[impl].Checkpoint
  saved = cls(v=tf.Variable(1.0)).save(tmp_path / "ckpt")
  assert saved == os.fspath(tmp_path / "ckpt-1")
  written = cls(v=tf.Variable(2.0)).write(os.fspath(tmp_path / "written"))
  restored = cls(v=tf.Variable(0.0))
  restored.restore(pathlib.Path(saved)).assert_consumed()
  assert float(restored.v.numpy()) == 1.0
  read = cls(v=tf.Variable(0.0))
  read.read(pathlib.Path(written)).assert_consumed()
  assert float(read.v.numpy()) == 2.0


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_methods_accept_checkpoint_options(tmp_path, impl):
  """Each method uses the options it is given.

  Writes run the options' write callbacks with the path written; every
  method reads or writes on the options' I/O device, so an unknown one
  fails each, writing and assigning nothing.
  """
  cls = tl.IMPLS[impl].Checkpoint
  called = []
  options = tf.train.CheckpointOptions(experimental_write_callbacks=[
      lambda path: called.append(os.path.basename(path))
  ])
  checkpoint = cls(v=tf.Variable(1.0))
  written = checkpoint.write(os.fspath(tmp_path / "w"), options=options)
  saved = checkpoint.save(os.fspath(tmp_path / "s"), options=options)
  assert os.path.basename(written) == "w"
  assert os.path.basename(saved) == "s-1"
  assert called == ["w", "s-1"]
  fresh = cls(v=tf.Variable(0.0))
  fresh.read(written, options=options).assert_consumed()
  assert float(fresh.v.numpy()) == 1.0
  fresh = cls(v=tf.Variable(0.0))
  fresh.restore(saved, options=options).assert_consumed()
  assert float(fresh.v.numpy()) == 1.0

  nowhere = tf.train.CheckpointOptions(experimental_io_device=_UNKNOWN_DEVICE)
  failed = tl.outcome(checkpoint.write,
                      os.fspath(tmp_path / "x"),
                      options=nowhere)
  assert failed.name == "InvalidArgumentError", failed.error
  failed = tl.outcome(checkpoint.save,
                      os.fspath(tmp_path / "y"),
                      options=nowhere)
  assert failed.name == "InvalidArgumentError", failed.error
  assert not [
      name for name in os.listdir(tmp_path) if name.startswith(("x", "y"))
  ]
  for method, path in (("read", written), ("restore", saved)):
    fresh = cls(v=tf.Variable(0.0))
    failed = tl.outcome(getattr(fresh, method), path, options=nowhere)
    assert failed.name == "InvalidArgumentError", (method, failed.error)
    assert float(fresh.v.numpy()) == 0.0, method


def _manager_run(manager_cls, checkpoint, directory):
  manager = manager_cls(checkpoint, os.fspath(directory), max_to_keep=2)
  saved = [os.path.basename(manager.save()) for _ in range(3)]
  return {
      "saved":
          saved,
      "checkpoints": [os.path.basename(p) for p in manager.checkpoints],
      "files":
          sorted(os.listdir(directory)),
      "latest":
          os.path.basename(tf.train.latest_checkpoint(os.fspath(directory)))
  }


def test_tensorflows_manager_manages_our_checkpoint(tmp_path):
  """tf.train.CheckpointManager calls `checkpoint._write(prefix, options=)`."""
  expected = _manager_run(tf.train.CheckpointManager,
                          tf.train.Checkpoint(v=tf.Variable(1.0)),
                          tmp_path / "tf")
  ours = tf_objckpt.Checkpoint(v=tf.Variable(1.0))
  actual = _manager_run(tf.train.CheckpointManager, ours, tmp_path / "ours")
  assert actual == expected
  assert expected["files"] == [
      "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
      "ckpt-3.data-00000-of-00001", "ckpt-3.index"
  ]
  fresh = tf_objckpt.Checkpoint(v=tf.Variable(0.0))
  tf.train.CheckpointManager(fresh, os.fspath(tmp_path / "ours"),
                             max_to_keep=2).restore_or_initialize()
  assert int(fresh.save_counter.numpy()) == 3


def _save_twice_with_options(manager_cls, lib, directory):
  """Two saves by a manager keeping one, with a write callback of our own."""
  written = []
  options = tf.train.CheckpointOptions(experimental_write_callbacks=[
      lambda path: written.append(os.path.basename(path))
  ])
  variable = tf.Variable(0.0)
  manager = manager_cls(lib.Checkpoint(v=variable), directory, max_to_keep=1)
  saved = []
  for value in (1.0, 2.0):
    variable.assign(value)
    saved.append(os.path.basename(manager.save(options=options)))
  fresh = lib.Checkpoint(v=tf.Variable(0.0))
  fresh.restore(manager.latest_checkpoint).assert_consumed()
  return {
      "saved": saved,
      "written": written,
      "checkpoints": [os.path.basename(path) for path in manager.checkpoints],
      "latest": os.path.basename(tf.train.latest_checkpoint(directory)),
      "files": sorted(os.listdir(directory)),
      "restored": float(fresh.v.numpy()),
      "callbacks left": len(options.experimental_write_callbacks)
  }


@pytest.mark.parametrize("manager_impl", ["tf", "ours"])
def test_manager_save_with_options(tmp_path, manager_impl):
  """The options reach the write (its callbacks run); the rest is as usual."""
  manager_cls = tl.IMPLS[manager_impl].CheckpointManager
  for impl, lib in tl.IMPLS.items():
    if manager_impl == "tf" and impl == "ours":
      continue  # Covered by test_tensorflows_manager_manages_our_checkpoint.
    observed = _save_twice_with_options(manager_cls, lib,
                                        os.fspath(tmp_path / impl))
    assert observed == {
        "saved": ["ckpt-1", "ckpt-2"],
        "written": ["ckpt-1", "ckpt-2"],
        "checkpoints": ["ckpt-2"],
        "latest": "ckpt-2",
        "files": ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"],
        "restored": 2.0,
        "callbacks left": 1
    }, impl


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_root_may_be_a_weak_reference(tmp_path, impl):
  module = tf.Module()
  module.v = tf.Variable(1.0)
  path = tl.IMPLS[impl].Checkpoint(weakref.ref(module)).write(
      os.fspath(tmp_path / "ckpt"))
  assert tl.keys(path) == [
      "_CHECKPOINTABLE_OBJECT_GRAPH", "v/.ATTRIBUTES/VARIABLE_VALUE"
  ]
  fresh = tf.Module()
  fresh.v = tf.Variable(0.0)
  tl.IMPLS[impl].Checkpoint(weakref.ref(fresh)).read(path).assert_consumed()
  assert float(fresh.v.numpy()) == 1.0


@pytest.mark.parametrize("root", [[tf.Variable(1.0)], {
    "a": tf.Variable(1.0)
}, 5, "text"],
                         ids=["list", "dict", "int", "str"])
def test_non_trackable_root_is_a_value_error(root):
  errors = tl.errors_by_impl(lambda cls: cls(root=root))
  tl.assert_same_error_type(errors, ValueError)


def test_checkpoint_with_root_held_by_another_object(tmp_path):
  """TF's Checkpoint(root=obj) also depends on obj as "_root"."""
  module = tf.Module()
  module.v = tf.Variable(1.0)
  extra = tf.Variable(2.0)
  paths = {
      impl:
          lib.Checkpoint(inner=lib.Checkpoint(root=module, extra=extra)
                        ).write(os.fspath(tmp_path / impl / "ckpt"))
      for impl, lib in tl.IMPLS.items()
  }
  assert "inner/_root/v/.ATTRIBUTES/VARIABLE_VALUE" in tl.signature(paths["tf"])
  tl.assert_same_checkpoint(paths["tf"], paths["ours"])


def test_children_of_a_checkpoint_with_root():
  module = tf.Module()
  children = {
      impl:
          sorted(
              lib.Checkpoint(module, w=tf.Variable(1.0))._trackable_children()
          )  # pylint: disable=protected-access
      for impl, lib in tl.IMPLS.items()
  }
  assert children["ours"] == children["tf"] == ["_root", "root", "w"]


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_save_inside_a_function_is_not_implemented(tmp_path, impl):
  checkpoint = tl.IMPLS[impl].Checkpoint(v=tf.Variable(1.0))

  @tf.function
  def save():
    return checkpoint.save(os.fspath(tmp_path / "ckpt"))

  with pytest.raises(NotImplementedError):
    save()


def test_write_inside_a_function_writes_current_values(tmp_path):
  values = {}
  for impl, lib in tl.IMPLS.items():
    checkpoint = lib.Checkpoint(v=tf.Variable(1.0))
    prefix = os.fspath(tmp_path / impl / "ckpt")

    @tf.function
    def write(x, checkpoint=checkpoint, prefix=prefix):
      checkpoint.v.assign(x)
      return checkpoint.write(prefix)

    write(tf.constant(5.0))
    path = write(tf.constant(7.0))
    assert isinstance(path, tf.Tensor)
    values[impl] = tl.values(prefix)
  tl.assert_values_equal(values["tf"], values["ours"], tl.TENSORFLOWS_AND_OURS)
  assert float(values["ours"]["v/.ATTRIBUTES/VARIABLE_VALUE"]) == 7.0
