"""Graph-mode checkpoints of many variables, against TensorFlow.

With 16 or more plain resource variables on a CPU, graph-mode saves read
variables through `_VarHandlesOp` + `_ReadVariablesOp`, and restores read
and assign them through calls of a function added to the graph's library
(`variable_batches.restore_variables`). These
tests check, against `tf.compat.v1.train.Checkpoint`, that such graphs
behave as TensorFlow's: across two CPUs, with optimizer slots restored
before and after the optimizer exists, when the graph is exported as a meta
graph and imported (into a fresh graph, or into a graph whose library
already holds functions), and when several checkpoints are restored in turn.
"""

import contextlib
import os
import re
import socket
import sys
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.python.trackable import autotrackable as tf_autotrackable

import compat_util as cu
import tf_objckpt

IMPLS = {
    "tf": (tf_autotrackable.AutoTrackable, tf.compat.v1.train.Checkpoint),
    "ours": (tf_objckpt.AutoTrackable, tf_objckpt.CheckpointV1),
}
_COUNT = 40


def _assert_all_equal(expected, actual):
  assert len(expected) == len(actual)
  for want, got in zip(expected, actual):
    np.testing.assert_array_equal(np.asarray(want), np.asarray(got))


class _Program:
  """`_COUNT` variables tracked by a checkpoint, in a graph of their own."""

  def __init__(self, impl, scale, make_variable=None, config=None,
               target=""):
    autotrackable_cls, checkpoint_cls = IMPLS[impl]
    make_variable = make_variable or (
        lambda i: tf.compat.v1.get_variable(
            f"v{i}", initializer=float(i * scale), use_resource=True))
    self.graph = tf.Graph()
    with self.graph.as_default():
      self.variables = [make_variable(i) for i in range(_COUNT)]
      self.root = autotrackable_cls()
      self.root.variables = self.variables
      self.checkpoint = checkpoint_cls(root=self.root)
      self.session = tf.compat.v1.Session(target, config=config)
      self.session.run(tf.compat.v1.global_variables_initializer())

  def values(self):
    return self.session.run(self.variables)

  def save(self, prefix):
    """Saves a numbered checkpoint at `prefix`; returns its path."""
    with self.graph.as_default():
      return self.checkpoint.save(prefix, session=self.session)


def _int64_meta_graph(directory):
  """A meta graph exported after our batched restore of int64 variables."""
  program = _Program(
      "ours", 1, make_variable=lambda i: tf.compat.v1.get_variable(
          f"other{i}", initializer=tf.constant(i, tf.int64),
          use_resource=True))
  with program.graph.as_default():
    path = program.save(os.path.join(directory, "ckpt"))
    program.checkpoint.restore(path).run_restore_ops(program.session)
    meta_graph = tf.compat.v1.train.export_meta_graph()
  names = cu.function_library_names(program.graph)
  assert len(names) == 1, names
  return meta_graph, names[0]


def _renamed(meta_graph, old, new):
  """`meta_graph` with its function `old` renamed `new` (and calls to it)."""
  renamed = meta_graph_pb2.MetaGraphDef()
  renamed.CopyFrom(meta_graph)
  for function in renamed.graph_def.library.function:
    if function.signature.name == old:
      function.signature.name = new
  for node in renamed.graph_def.node:
    if "f" in node.attr and node.attr["f"].func.name == old:
      node.attr["f"].func.name = new
  return renamed


def _restored_float_program(impl, directory):
  """A `_Program` after one save and one restore; returns it."""
  program = _Program(impl, 1)
  with program.graph.as_default():
    path = program.save(os.path.join(directory, "ckpt"))
    program.session.run([v.assign(-1.) for v in program.variables])
    program.checkpoint.restore(path).run_restore_ops(program.session)
  return program


def test_meta_graph_import_after_many_variable_restore(tmp_path):
  """Importing a meta graph another run exported works as with TensorFlow.

  Another run of a program (other dtypes) exports a meta graph holding the
  function its batched restore added. If function names depend on the
  process's history (two identical graphs of this process get different
  names), that run may have given its function the very name ours got
  here: that is simulated by renaming the exported function. TensorFlow's
  restore adds no function, so the import works; ours must too.
  """
  meta_graph, exported_name = _int64_meta_graph(str(tmp_path / "other"))
  results = {}
  for impl in IMPLS:
    program = _restored_float_program(impl, str(tmp_path / impl))
    names = cu.function_library_names(program.graph)
    to_import = meta_graph
    if names:
      twin = _restored_float_program(impl, str(tmp_path / (impl + "twin")))
      if cu.function_library_names(twin.graph) != names:  # Names follow a counter.
        to_import = _renamed(meta_graph, exported_name, names[0])
    with program.graph.as_default():
      try:
        tf.compat.v1.train.import_meta_graph(to_import, import_scope="imp")
        results[impl] = ("ok", program.values())
      except ValueError as e:
        results[impl] = ("error", str(e))
  assert results["tf"][0] == "ok"
  assert results["ours"][0] == "ok", results["ours"][1]
  _assert_all_equal(results["tf"][1], results["ours"][1])


def test_variables_on_two_cpus_round_trip_like_tensorflow(tmp_path):
  """Variables split over /cpu:0 and /cpu:1 save and restore as in TF."""
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})

  def program(impl, scale):
    def make_variable(i):
      with tf.device(f"/cpu:{i % 2}"):
        return tf.compat.v1.get_variable(
            f"v{i}", initializer=float(i * scale), use_resource=True)
    return _Program(impl, scale, make_variable, config)

  restored = {}
  for impl in IMPLS:
    writer = program(impl, 1)
    path = writer.save(str(tmp_path / impl / "ckpt"))
    reader = program("ours" if impl == "tf" else "tf", 3)
    with reader.graph.as_default():
      reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
          reader.session)
    restored[impl] = reader.values()
    _assert_all_equal(writer.values(), restored[impl])
  assert (sorted(tf.train.list_variables(str(tmp_path / "tf" / "ckpt-1"))) ==
          sorted(tf.train.list_variables(str(tmp_path / "ours" / "ckpt-1"))))


def test_imported_meta_graph_restores_with_both_savers(tmp_path):
  """A meta graph holding our batched ops imports and restores like TF's."""
  results = {}
  for impl in IMPLS:
    program = _Program(impl, 1)
    path = program.save(str(tmp_path / impl / "ckpt"))
    with program.graph.as_default():
      program.checkpoint.restore(path).run_restore_ops(program.session)
      meta_path = str(tmp_path / impl / "graph.meta")
      tf.compat.v1.train.export_meta_graph(meta_path)
    graph = tf.Graph()
    with graph.as_default():
      tf.compat.v1.train.import_meta_graph(meta_path)
      variables = sorted(
          (v for v in tf.compat.v1.global_variables()
           if v.name.startswith("v")), key=lambda v: int(v.name[1:-2]))
      session = tf.compat.v1.Session()
      session.run(tf.compat.v1.global_variables_initializer())
      session.run([v.assign(-1.) for v in variables])
      autotrackable_cls, checkpoint_cls = IMPLS[impl]
      root = autotrackable_cls()
      root.variables = variables
      checkpoint = checkpoint_cls(root=root)
      checkpoint.restore(path).assert_existing_objects_matched(
      ).run_restore_ops(session)
      by_object = session.run(variables)
      session.run([v.assign(-1.) for v in variables])
      tf.compat.v1.train.Saver(
          {f"root/variables/{i}/.ATTRIBUTES/VARIABLE_VALUE": v
           for i, v in enumerate(variables)}).restore(session, path)
      results[impl] = (by_object, session.run(variables))
  _assert_all_equal(results["tf"][0], results["ours"][0])
  _assert_all_equal(results["tf"][1], results["ours"][1])
  _assert_all_equal(results["ours"][0], [float(i) for i in range(_COUNT)])


def test_momentum_slots_restore_before_and_after_the_optimizer(tmp_path):
  """Slots of many variables (some reference ones) restore as in TF."""

  def make_variable(i):
    return tf.compat.v1.get_variable(
        f"v{i}", initializer=float(i), use_resource=bool(i % 3))

  def with_optimizer(program, build):
    with program.graph.as_default():
      program.optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
      program.root.optimizer = program.optimizer
      if build:
        build_train_op(program)

  def build_train_op(program):
    with program.graph.as_default():
      program.train_op = program.optimizer.minimize(
          tf.add_n([tf.square(v) for v in program.variables]))
      program.session.run(
          tf.compat.v1.variables_initializer(program.optimizer.variables()))

  def slots(program):
    with program.graph.as_default():
      return program.session.run(
          [program.optimizer.get_slot(v, "momentum")
           for v in program.variables])

  results = {}
  for impl in IMPLS:
    writer = _Program(impl, 1, make_variable)
    with_optimizer(writer, build=True)
    with writer.graph.as_default():
      for _ in range(2):
        writer.session.run(writer.train_op)
      checkpoint = IMPLS[impl][1](root=writer.root)
      path = checkpoint.save(str(tmp_path / impl / "ckpt"),
                             session=writer.session)
    outcome = []
    for build_first in (True, False):
      reader = _Program(impl, 5, make_variable)
      with_optimizer(reader, build=build_first)
      with reader.graph.as_default():
        checkpoint = IMPLS[impl][1](root=reader.root)
        status = checkpoint.restore(path)
        status.run_restore_ops(reader.session)
        if not build_first:
          build_train_op(reader)
          status.run_restore_ops(reader.session)
        status.assert_consumed()
        outcome.append((reader.values(), slots(reader)))
    _assert_all_equal(writer.values(), outcome[0][0])
    _assert_all_equal(slots(writer), outcome[1][1])
    results[impl] = outcome
  for (tf_values, tf_slots), (our_values, our_slots) in zip(
      results["tf"], results["ours"]):
    _assert_all_equal(tf_values, our_values)
    _assert_all_equal(tf_slots, our_slots)


def test_restoring_a_then_b_then_a_follows_the_checkpoints(tmp_path):
  """Mixed dtypes, reference and partitioned variables: A, B, A again."""
  makers = (
      lambda i, s: tf.constant(float(i * s)),
      lambda i, s: tf.constant(i * s, tf.int64),
      lambda i, s: tf.constant(f"s{i * s}"),
      lambda i, s: tf.constant(bool((i * s) % 2)),
      lambda i, s: tf.constant([i * s, 1], tf.int32),
  )

  def program(impl, scale):
    made = _Program(
        impl, scale, lambda i: tf.compat.v1.get_variable(
            f"v{i}", initializer=makers[i % len(makers)](i, scale),
            use_resource=bool(i % 7)))
    with made.graph.as_default():
      made.root.parts = list(tf.compat.v1.get_variable(
          "p", [36, 2], initializer=tf.compat.v1.constant_initializer(scale),
          partitioner=tf.compat.v1.fixed_size_partitioner(18)))
      made.variables = made.variables + list(made.root.parts)
      made.session.run(tf.compat.v1.variables_initializer(made.root.parts))
    return made

  results = {}
  for impl in IMPLS:
    paths, expected = [], []
    for scale in (1, 2):
      writer = program(impl, scale)
      paths.append(writer.save(str(tmp_path / f"{impl}{scale}" / "ckpt")))
      expected.append(writer.values())
    reader = program(impl, 3)
    seen = []
    with reader.graph.as_default():
      for index in (0, 1, 0):
        reader.checkpoint.restore(paths[index]).run_restore_ops(
            reader.session)
        seen.append(reader.values())
        _assert_all_equal(expected[index], seen[-1])
        ops_after = len(reader.graph.get_operations())
      reader.checkpoint.restore(paths[1]).run_restore_ops(reader.session)
      assert len(reader.graph.get_operations()) == ops_after
    results[impl] = seen
  for tf_values, our_values in zip(results["tf"], results["ours"]):
    _assert_all_equal(tf_values, our_values)


def _free_ports(count):
  """`count` distinct ports free now (all held open while they are picked)."""
  with contextlib.ExitStack() as stack:
    probes = [stack.enter_context(socket.socket()) for _ in range(count)]
    for probe in probes:
      probe.bind(("localhost", 0))
    return [probe.getsockname()[1] for probe in probes]


def test_variables_on_a_parameter_server_round_trip_like_tensorflow(tmp_path):
  """Variables of a ps task, in a worker's session, save and restore as TF.

  The batched restore runs its function on the parameter server, where
  the variables live.
  """
  ps_port, worker_port = _free_ports(2)
  cluster = tf.train.ClusterSpec({"ps": [f"localhost:{ps_port}"],
                                  "worker": [f"localhost:{worker_port}"]})
  servers = [tf.distribute.Server(cluster, job_name=job, task_index=0)
             for job in ("ps", "worker")]

  def program(impl, scale):
    def make_variable(i):
      with tf.device("/job:ps/task:0/device:CPU:0"):
        return tf.compat.v1.get_variable(
            f"v{i}", initializer=float(i * scale), use_resource=True)
    return _Program(impl, scale, make_variable, target=servers[1].target)

  for writer_impl in IMPLS:
    writer = program(writer_impl, 1)
    path = writer.save(str(tmp_path / writer_impl / "ckpt"))
    for reader_impl in IMPLS:
      reader = program(reader_impl, 3)
      with reader.graph.as_default():
        reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
            reader.session)
      _assert_all_equal(writer.values(), reader.values())


def _saved_model_after_restore(impl, directory):
  """A v1 SavedModel of a graph holding `impl`'s restore ops.

  Returns:
    Its path, and the log lines of running the restore that look like
    TensorFlow errors ("E" followed by the date).
  """
  program = _Program(impl, 1)
  with program.graph.as_default():
    inputs = tf.compat.v1.placeholder(tf.float32, [], name="inputs")
    outputs = tf.identity(tf.add_n(program.variables) * inputs, "outputs")
    path = program.save(os.path.join(directory, "ckpt"))
    program.session.run([v.assign(-1.) for v in program.variables])
    with _captured_stderr() as captured:
      program.checkpoint.restore(path).run_restore_ops(program.session)
    export_dir = os.path.join(directory, "saved_model")
    builder = tf.compat.v1.saved_model.Builder(export_dir)
    builder.add_meta_graph_and_variables(
        program.session, ["serve"], signature_def_map={
            "serving_default": tf.compat.v1.saved_model.predict_signature_def(
                {"inputs": inputs}, {"outputs": outputs})})
    builder.save()
  errors = [line for line in captured if re.match(r"E\d{4} ", line)]
  return export_dir, errors


@contextlib.contextmanager
def _captured_stderr():
  """Collects the lines written to file descriptor 2, C++ logs included."""
  lines = []
  with tempfile.TemporaryFile(mode="w+") as capture:
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(capture.fileno(), 2)
    try:
      yield lines
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      capture.seek(0)
      lines.extend(capture.read().splitlines())


def test_saved_model_of_a_restored_graph_loads_in_tf2_like_tensorflow(
    tmp_path):
  """A v1 SavedModel exported after a restore loads in TF2 and TF1.

  TensorFlow 2 turns every function of the graph's library into a Python
  function when loading; ours must allow that. Running the restore logs no
  errors (TensorFlow's MLIR passes complain about functions whose types
  depend on attributes).
  """
  expected = 2. * sum(float(i) for i in range(_COUNT))
  for impl in IMPLS:
    export_dir, errors = _saved_model_after_restore(impl, str(tmp_path / impl))
    assert not errors, errors
    loaded = tf.saved_model.load(export_dir, tags=["serve"])
    outputs = loaded.signatures["serving_default"](inputs=tf.constant(2.))
    assert float(outputs["outputs"]) == expected
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
      assert session.run("outputs:0", {"inputs:0": 2.}) == expected
