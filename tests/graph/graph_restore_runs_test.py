"""Large graph-mode restores read in runs, a few at a time, and stay right.

Checks `engine.graph_restores.ReadChain`, the graph restores of
`functional_saver` (batched function calls and `RestoreV2` batches) and
the v1 `Saver`'s restore op (`v1.saver_builders`). A restore over its
memory limit reads its values in runs of about `graph_restore_batch_bytes`
(at most half the limit), each waiting for the run `read_threads` places
before it to be assigned, so a session holds a few runs of values, not a
second copy of the model (`tests/reliability/restore_memory_test.py`
measures that). Here the batch size is shrunk to 1 KiB and the limit to
2 KiB (the process's default, `default_max_restore_memory`, or
`CheckpointOptions(max_restore_memory=...)`): the runs and their order
are checked on the graph, and what they restore against TensorFlow, with
resource, reference and partitioned variables, sharded savers and
repeated restores that add no ops.

Covers: tf_objckpt.engine.graph_restores, tf_objckpt.engine.multi_device_saver,
tf_objckpt.v1.saver_builders, tf_objckpt.engine.tuning,
tf_objckpt.engine.restore_memory.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
import tf_objckpt
from tf_objckpt.engine import tuning

_BATCH_BYTES = 1 << 10
_COUNT = 24  # Variables of 1 KiB: more than `graph_batch_min`, batched.


@pytest.fixture(autouse=True)
def _small_runs(monkeypatch):
  monkeypatch.setattr(tuning.TUNING, "graph_restore_batch_bytes", _BATCH_BYTES)
  monkeypatch.setattr(tuning.TUNING, "read_threads", 2)
  monkeypatch.setattr(tuning.TUNING, "default_max_restore_memory",
                      2 * _BATCH_BYTES)


def _saver_variables(scale):
  """Resource, reference and partitioned variables, 1 KiB each."""
  variables = [
      tf.compat.v1.get_variable(f"v{index}",
                                initializer=np.full([256], scale * index,
                                                    np.float32),
                                use_resource=index % 3 != 0)
      for index in range(_COUNT)
  ]
  variables.append(
      tf.compat.v1.get_variable(
          "partitioned", [512, 2],
          initializer=tf.compat.v1.constant_initializer(scale),
          partitioner=tf.compat.v1.fixed_size_partitioner(4)))
  return variables


def _saver_values(session, variables):
  return [session.run(tf.convert_to_tensor(variable)) for variable in variables]


def _reads(graph, is_read):
  """The reads of `graph` (ops `is_read` accepts), and those that wait.

  A read waits through a control input of its own, or of an input made
  with it (TensorFlow gives the constants of its keys the control inputs).
  """
  reads = [op for op in graph.get_operations() if is_read(op)]
  return reads, [
      op for op in reads if op.control_inputs or any(tensor.op.control_inputs
                                                     for tensor in op.inputs)
  ]


def _restore_v2(op):
  return op.type == "RestoreV2"


def _restore_function_call(op):
  return op.type.startswith("tf_objckpt_restore_variables")


@pytest.mark.parametrize("sharded", [False, True])
def test_saver_restores_in_runs_what_tensorflow_restores(tmp_path, sharded):
  """Written by TensorFlow's `Saver`, restored by both; values compared."""
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variables = _saver_variables(3.)
    session.run(tf.compat.v1.global_variables_initializer())
    expected = _saver_values(session, variables)
    path = tf.compat.v1.train.Saver().save(session, str(tmp_path / "model"))
  restored = {}
  for impl in tl.IMPLS:
    with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
      variables = _saver_variables(-1.)
      saver = tl.IMPLS[impl].Saver(sharded=sharded)
      zero = [
          tf.compat.v1.assign(variable, tf.zeros_like(variable)).op
          for variable in variables[:3]
      ]
      session.run(tf.compat.v1.global_variables_initializer())
      saver.restore(session, path)
      op_count = len(graph.get_operations())
      session.run(zero)
      saver.restore(session, path)
      assert len(graph.get_operations()) == op_count
      if impl == "ours":
        reads, waiting = _reads(graph, _restore_v2)
        assert len(reads) == _COUNT + 4  # One run per KiB.
        assert len(waiting) == len(reads) - 2
      restored[impl] = _saver_values(session, variables)
  for impl in tl.IMPLS:
    np.testing.assert_equal(restored[impl], expected)


def test_a_small_saver_keeps_tensorflows_ops():
  """Under two batches, the restore op is TensorFlow's: one `RestoreV2`."""
  with tf.Graph().as_default() as graph:
    tf.compat.v1.get_variable("small", [8])
    saver = tl.IMPLS["ours"].Saver()
    restores = [op for op in graph.get_operations() if op.type == "RestoreV2"]
  assert len(restores) == 1 and not restores[0].control_inputs
  assert saver.saver_def.restore_op_name == "save/restore_all"


def _module(scale, count):
  module = tf.Module()
  module.weights = [
      tf.Variable(np.full([256], scale * index, np.float32))
      for index in range(count)
  ]
  return module


@pytest.mark.parametrize("count", [8, _COUNT])
def test_checkpoint_v1_restores_in_runs(tmp_path, count):
  """8 variables read by `RestoreV2` batches, 24 by function calls."""
  path = tl.IMPLS["tf"].Checkpoint(module=_module(2., count)).write(
      str(tmp_path / "ckpt"))
  expected = [np.full([256], 2. * index, np.float32) for index in range(count)]
  for impl in tl.IMPLS:
    with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
      module = _module(-1., count)
      session.run([weight.initializer for weight in module.weights])
      checkpoint = tl.IMPLS[impl].CheckpointV1(module=module)
      zero = module.weights[0].assign(tf.zeros([256])).op
      checkpoint.restore(path).run_restore_ops(session)
      op_count = len(graph.get_operations())
      session.run(zero)
      checkpoint.restore(path).run_restore_ops(session)
      np.testing.assert_equal(session.run(module.weights), expected)
      if impl == "ours":
        assert len(graph.get_operations()) == op_count
        reads, waiting = _reads(
            graph, _restore_v2 if count < tuning.TUNING.graph_batch_min else
            _restore_function_call)
        assert len(reads) >= count
        assert len(waiting) == len(reads) - 2


def test_small_checkpoint_v1_restores_read_at_once(tmp_path, monkeypatch):
  """Restores under the limit add no dependencies."""
  monkeypatch.setattr(tuning.TUNING, "default_max_restore_memory", 8 << 10)
  path = tl.IMPLS["tf"].Checkpoint(module=_module(2., 8)).write(
      str(tmp_path / "ckpt"))
  with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
    module = _module(-1., 8)
    session.run([weight.initializer for weight in module.weights])
    tl.IMPLS["ours"].CheckpointV1(
        module=module).restore(path).run_restore_ops(session)
    assert session.run(module.weights[7])[0] == 14.
    assert not _reads(graph, _restore_v2)[1]


@pytest.mark.parametrize("limit", [None, 2 * _BATCH_BYTES])
def test_checkpoint_v1_honours_max_restore_memory(tmp_path, monkeypatch, limit):
  """The option, not the process's default, decides: chained or at once."""
  monkeypatch.setattr(tuning.TUNING, "default_max_restore_memory", None)
  path = tl.IMPLS["tf"].Checkpoint(module=_module(2., 8)).write(
      str(tmp_path / "ckpt"))
  with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
    module = _module(-1., 8)
    session.run([weight.initializer for weight in module.weights])
    tl.IMPLS["ours"].CheckpointV1(module=module).restore(
        path, options=tf_objckpt.CheckpointOptions(
            max_restore_memory=limit)).run_restore_ops(session)
    assert session.run(module.weights[7])[0] == 14.
    reads, waiting = _reads(graph, _restore_v2)
    assert len(reads) == 8  # Batches of 1 KiB either way.
    assert len(waiting) == (len(reads) - 2 if limit else 0)
