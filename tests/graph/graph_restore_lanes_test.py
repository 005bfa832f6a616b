"""Graph-mode restore functions read on every read thread, all or nothing.

A batch of plain variables is restored by one function call
(`engine.graph_restores`). Its reads, when they add up to
`parallel_read_min_bytes`, are split into one `RestoreV2` per read thread
(`read_lanes.lanes`), which the session runs at once, as eager reads are;
no value is assigned before every one of them has read. Checked against
TensorFlow's `CheckpointV1`: the values restored, and a damaged value in
the first or the last lane, which fails both restores with one error type
and assigns nothing.

Covers: tf_objckpt.engine.graph_restores, tf_objckpt.engine.read_lanes.
"""

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
from tf_objckpt.engine import tuning

_COUNT = 24  # Variables of 1 KiB: more than `graph_batch_min`, batched.
_THREADS = 2


@pytest.fixture(autouse=True)
def _small_parallel_reads(monkeypatch):
  monkeypatch.setattr(tuning.TUNING, "parallel_read_min_bytes", 1 << 10)
  monkeypatch.setattr(tuning.TUNING, "read_threads", _THREADS)


def _module(scale):
  module = tf.Module()
  module.weights = [
      tf.Variable(np.full([256], scale * (index + 1), np.float32))
      for index in range(_COUNT)
  ]
  return module


def _key(index):
  return f"module/weights/{index}/.ATTRIBUTES/VARIABLE_VALUE"


@pytest.fixture(name="path")
def _path(tmp_path):
  return tl.IMPLS["tf"].Checkpoint(module=_module(2.)).write(
      str(tmp_path / "ckpt"))


def _restore(impl, path):
  """Restores `path` into variables of -1s: (their values, error, graph)."""
  with tf.Graph().as_default() as graph, tf.compat.v1.Session() as session:
    module = _module(-1.)
    session.run([weight.initializer for weight in module.weights])
    restored = tl.outcome(
        tl.IMPLS[impl].CheckpointV1(
            module=module).restore(path).run_restore_ops, session)
    return session.run(module.weights), restored.error, graph


def _restore_functions(graph):
  return [
      function for function in graph.as_graph_def().library.function
      if function.signature.name.startswith("tf_objckpt_restore_variables")
  ]


def test_a_restore_function_reads_on_each_read_thread(path):
  expected = _module(2.)
  for impl in tl.IMPLS:
    values, error, graph = _restore(impl, path)
    assert error is None, error
    np.testing.assert_equal(values, [w.numpy() for w in expected.weights])
  function, = _restore_functions(graph)
  reads = [node for node in function.node_def if node.op == "RestoreV2"]
  assert len(reads) == _THREADS
  assert sum(len(node.attr["dtypes"].list.type) for node in reads) == _COUNT


@pytest.mark.parametrize("damaged", [0, _COUNT - 1])
def test_a_damaged_value_in_any_lane_assigns_nothing(path, damaged):
  tl.damage(path, "flipped", _key(damaged))
  outcomes = {impl: _restore(impl, path) for impl in tl.IMPLS}
  tl.assert_same_error_type(
      {
          impl: error for impl, (_, error, _) in outcomes.items()
      }, tf.errors.DataLossError)
  for impl, (values, _, _) in outcomes.items():
    untouched = [w.numpy() for w in _module(-1.).weights]
    np.testing.assert_equal(values, untouched, err_msg=impl)
