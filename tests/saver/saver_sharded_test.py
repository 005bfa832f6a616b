"""Sharded name-based checkpoints over two CPU devices, against TensorFlow.

Graph-mode tests give their sessions two CPU devices through the session
config. The eager test needs two logical CPUs, which must be configured
before TensorFlow initializes its devices, so it runs in a subprocess.

Covers: tf_objckpt.saver, tf_objckpt.v1.saver_builders,
tf_objckpt.engine.variable_values, tf_objckpt.v1.name_based_saver.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saver_pb2

import testlib as tl


def _session():
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  return tf.compat.v1.Session(config=config)


def _variables(offset):
  """Variables on /cpu:0 and /cpu:1, with values depending on `offset`."""
  variables = {}
  with tf.device("/cpu:0"):
    variables["a"] = tf.compat.v1.get_variable(
        "a", initializer=np.arange(300, dtype=np.float32) + offset)
    variables["b"] = tf.compat.v1.get_variable(
        "b",
        initializer=np.arange(7, dtype=np.int64) + int(offset),
        use_resource=False)
  with tf.device("/cpu:1"):
    variables["c"] = tf.compat.v1.get_variable(
        "c", initializer=np.ones([20, 5], np.float64) * offset)
    variables["d"] = tf.compat.v1.get_variable(
        "d",
        initializer=np.arange(11, dtype=np.float32) - offset,
        use_resource=False)
  return variables


def _save_sharded(impl, directory, **kwargs):
  os.makedirs(directory, exist_ok=True)
  with tf.Graph().as_default():
    variables = _variables(3.)
    saver = tl.IMPLS[impl].Saver(sharded=True, **kwargs)
    with _session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      path = saver.save(sess, os.path.join(directory, "model"))
      return path, {k: sess.run(v) for k, v in variables.items()}


def _restore_sharded(impl, path, sharded):
  with tf.Graph().as_default():
    variables = _variables(-1.)
    saver = tl.IMPLS[impl].Saver(sharded=sharded)
    with _session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.restore(sess, path)
      return {k: sess.run(v) for k, v in variables.items()}


def test_sessions_have_two_cpus():
  with tf.Graph().as_default(), _session() as sess:
    names = [d.name for d in sess.list_devices() if d.device_type == "CPU"]
    assert len(names) == 2


@pytest.mark.parametrize("sharded_reader", [True, False])
@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_sharded_round_trip(tmp_path, writer, reader, sharded_reader):
  path, saved = _save_sharded(writer, str(tmp_path))
  assert path == str(tmp_path / "model")
  # One checkpoint: one index and one data file per device; no leftovers.
  assert tl.files_under(str(tmp_path)) == [
      "checkpoint", "model.data-00000-of-00002", "model.data-00001-of-00002",
      "model.index", "model.meta"
  ]
  tl.assert_values_equal(saved, _restore_sharded(reader, path, sharded_reader))


def test_sharded_files_identical_to_tensorflow(tmp_path):
  for impl in tl.IMPLS:
    _save_sharded(impl, str(tmp_path / impl))
  tl.assert_same_files(tmp_path)
  # Each device's variables went to their own data file.
  sizes = [
      os.path.getsize(str(tmp_path / "ours" / name))
      for name in ("model.data-00000-of-00002", "model.data-00001-of-00002")
  ]
  assert sizes == [300 * 4 + 7 * 8, 100 * 8 + 11 * 4]


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_sharded_v1_round_trip(tmp_path, writer, reader):
  path, saved = _save_sharded(writer,
                              str(tmp_path),
                              write_version=saver_pb2.SaverDef.V1)
  assert path == str(tmp_path / "model-?????-of-00002")
  assert "model-00000-of-00002" in tl.files_under(str(tmp_path))
  assert "model-00001-of-00002" in tl.files_under(str(tmp_path))
  tl.assert_values_equal(saved, _restore_sharded(reader, path, True))


def test_sharded_save_with_global_step_and_max_to_keep(tmp_path):
  results = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    os.makedirs(directory)
    with tf.Graph().as_default():
      _variables(0.)
      saver = tl.IMPLS[impl].Saver(sharded=True, max_to_keep=2)
      with _session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for step in range(4):
          saver.save(sess, os.path.join(directory, "m"), global_step=step)
    results[impl] = tl.files_under(directory)
  assert results["ours"] == results["tf"]
  assert "m-3.data-00001-of-00002" in results["ours"]
  assert "m-1.index" not in results["ours"]


_EAGER_SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import tensorflow as tf
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
    from tf_objckpt import saver as saver_lib

    directory = sys.argv[1]
    with tf.device("/cpu:0"):
      a = tf.Variable(np.arange(5.), name="a")
    with tf.device("/cpu:1"):
      b = tf.Variable(np.arange(3, dtype=np.int32), name="b")
    assert a.device.endswith("CPU:0") and b.device.endswith("CPU:1")
    path = saver_lib.Saver([a, b], sharded=True).save(
        None, os.path.join(directory, "model"))
    print("FILES", sorted(os.listdir(directory)))
    a.assign(np.zeros(5))
    b.assign(np.zeros(3, np.int32))
    tf.compat.v1.train.Saver([a, b]).restore(None, path)
    print("TF_RESTORED", a.numpy().tolist(), b.numpy().tolist())
    a.assign(np.zeros(5))
    b.assign(np.zeros(3, np.int32))
    saver_lib.Saver([a, b], sharded=True).restore(None, path)
    print("OURS_RESTORED", a.numpy().tolist(), b.numpy().tolist())
""")


def test_eager_sharded_with_two_logical_cpus(tmp_path):
  env = dict(os.environ,
             PYTHONPATH=tl.REPO_ROOT + os.pathsep +
             os.environ.get("PYTHONPATH", ""),
             TF_CPP_MIN_LOG_LEVEL="2")
  result = subprocess.run([sys.executable, "-c", _EAGER_SCRIPT,
                           str(tmp_path)],
                          capture_output=True,
                          text=True,
                          env=env,
                          timeout=300,
                          check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  lines = dict(
      line.split(" ", 1)
      for line in result.stdout.splitlines()
      if line.split(" ", 1)[0] in ("FILES", "TF_RESTORED", "OURS_RESTORED"))
  assert lines["FILES"] == str([
      "checkpoint", "model.data-00000-of-00002", "model.data-00001-of-00002",
      "model.index"
  ])
  assert lines["TF_RESTORED"] == "[0.0, 1.0, 2.0, 3.0, 4.0] [0, 1, 2]"
  assert lines["OURS_RESTORED"] == lines["TF_RESTORED"]
