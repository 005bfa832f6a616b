"""Graph-mode checkpoints of many variables, against TensorFlow.

With 16 or more plain resource variables on a CPU, graph-mode saves read
variables through `_VarHandlesOp` + `_ReadVariablesOp`, and restores read
and assign batches of them through calls of a function added to the
graph's library (`engine.graph_restores.restore_variables`). These tests check,
against `tf.compat.v1.train.Checkpoint`, that such checkpoints have
TensorFlow's keys and values, restore both ways and fail as TensorFlow's,
and that such graphs behave as TensorFlow's: across two CPUs and on a
parameter server, with optimizer slots restored before and after the
optimizer exists, when the graph is exported as a meta graph or a
SavedModel and imported (into a fresh graph, or into a graph whose library
already holds functions), and when several checkpoints are restored in turn.

Covers: tf_objckpt.engine.graph_restores, tf_objckpt.engine.variable_batches,
tf_objckpt.engine.variable_values, tf_objckpt.engine.multi_device_saver,
tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints.
"""

import contextlib
import os
import re
import sys
import tempfile

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.python.ops import resource_variable_ops

import testlib as tl
from tf_objckpt.engine import tuning

_COUNT = 40


def _floats(scale, device=lambda i: None):
  """`_COUNT` resource variables `v{i}` of value `i * scale`, on `device(i)`."""
  made = []
  for i in range(_COUNT):
    with tf.device(device(i)):
      made.append(
          tf.compat.v1.get_variable(f"v{i}",
                                    initializer=float(i * scale),
                                    use_resource=True))
  return made


def _mixed(scale):
  """`tl.MANY` variables of several dtypes and shapes, some reference ones."""
  return [
      tf.compat.v1.get_variable(f"v{i}",
                                initializer=tl.mixed_value(i, scale),
                                use_resource=bool(i % 11))
      for i in range(tl.MANY)
  ]


def _save_mixed(impl, prefix, scale=1):
  """Saves `_mixed(scale)` twice; the second save adds no op.

  Returns:
    The variables' values, and the path of the first checkpoint.
  """
  with tl.GraphProgram(impl) as program:
    program.track(_mixed(scale))
    path = program.save(prefix)
    ops_after_first = program.num_ops()
    program.save(prefix)
    assert program.num_ops() == ops_after_first
    return program.values(), path


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_mixed_variables_round_trip(tmp_path, writer):
  expected, path = _save_mixed(writer, str(tmp_path / writer / "ckpt"))
  _, other_path = _save_mixed(tl.other(writer),
                              str(tmp_path / "other" / "ckpt"))
  tl.assert_same_checkpoint(*((path,
                               other_path) if writer == "tf" else (other_path,
                                                                   path)))
  with tl.GraphProgram(tl.other(writer)) as reader:
    reader.track(_mixed(3))
    reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
        reader.session)
    before = reader.num_ops()
    reader.checkpoint.restore(path).run_restore_ops(reader.session)
    assert reader.num_ops() == before
    tl.assert_variables_equal(expected, reader.values())


def test_restore_ops_read_the_fed_checkpoint(tmp_path):
  """Cached batched restore ops restore whichever checkpoint is restored."""
  first, second = (_save_mixed("ours", str(tmp_path / name / "ckpt"), scale)
                   for name, scale in (("a", 1), ("b", 2)))
  with tl.GraphProgram("ours") as reader:
    reader.track(_mixed(3))
    for expected, path in (first, second, first):
      reader.checkpoint.restore(path).run_restore_ops(reader.session)
      tl.assert_variables_equal(expected, reader.values())


@pytest.mark.parametrize("batch_bytes", [64, 1 << 20])
def test_restore_in_batches_of_bytes(tmp_path, monkeypatch, batch_bytes):
  """Each restore batch restores its own variables, of any dtypes.

  Batches hold consecutive variables up to a number of bytes (at least one
  variable each); each is one call of a function of its own, which finds
  its variables by name. 64 bytes make several batches, 1 MiB one.
  """
  monkeypatch.setattr(tuning.TUNING, "graph_restore_batch_bytes", batch_bytes)
  expected, path = _save_mixed("tf", str(tmp_path / "ckpt"))
  with tl.GraphProgram("ours") as reader:
    reader.track(_mixed(3))
    reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
        reader.session)
    tl.assert_variables_equal(expected, reader.values())
    resource_variables = [
        v for v in reader.variables
        if resource_variable_ops.is_resource_variable(v)
    ]
    functions = tl.function_library_names(reader.graph)
  if batch_bytes > 1000:
    assert len(functions) == 1
  else:
    assert 1 < len(functions) < len(resource_variables)


def test_save_counter_is_restored_with_the_variables(tmp_path):
  """The save counter (on "/cpu:0") joins the variables placed by default.

  On a machine with only CPUs, both end up on the first CPU, so one call
  restores them all and the graph gains no other read.
  """
  paths, counters = {}, {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as writer:
      writer.track(_floats(1.))
      paths[impl] = writer.save(str(tmp_path / impl / "ckpt"))
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as reader:
      reader.track(_floats(0.))
      ops_before = set(reader.graph.get_operations())
      reader.checkpoint.restore(paths[impl]).assert_consumed().run_restore_ops(
          reader.session)
      tl.assert_variables_equal([float(i) for i in range(_COUNT)],
                                reader.values())
      counters[impl] = reader.run(reader.checkpoint.save_counter)
      new_types = [
          op.type
          for op in reader.graph.get_operations()
          if op not in ops_before
      ]
      if impl == "ours":
        assert "RestoreV2" not in new_types
        assert len(tl.function_library_names(reader.graph)) == 1
  assert counters == {"tf": 1, "ours": 1}


def test_restore_of_corrupt_data_fails_like_tensorflow(tmp_path):
  """A value failing its checksum fails the restore as in TensorFlow.

  The data file holds the save counter (8 bytes), the variables, then the
  object graph. The bytes overwritten here are variables'.
  """
  _, path = _save_mixed("ours", str(tmp_path / "ckpt"))
  data_file = path + ".data-00000-of-00001"
  with open(data_file, "r+b") as f:
    f.seek(16)
    f.write(b"\xff" * 32)
  outcomes = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as reader:
      reader.track(_mixed(3))
      status = reader.checkpoint.restore(path)
      outcomes[impl] = tl.outcome(status.run_restore_ops, reader.session).name
  assert outcomes == {"tf": "DataLossError", "ours": "DataLossError"}


def _int64_meta_graph(directory):
  """A meta graph exported after our batched restore of int64 variables."""
  with tl.GraphProgram("ours") as program:
    program.track(
        tf.compat.v1.get_variable(f"other{i}",
                                  initializer=tf.constant(i, tf.int64),
                                  use_resource=True) for i in range(_COUNT))
    path = program.save(os.path.join(directory, "ckpt"))
    program.checkpoint.restore(path).run_restore_ops(program.session)
    meta_graph = tf.compat.v1.train.export_meta_graph()
    names = tl.function_library_names(program.graph)
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


def _save_change_and_restore(program, directory):
  """Tracks `_floats(1)` in `program`, saves, changes and restores them."""
  program.track(_floats(1))
  path = program.save(os.path.join(directory, "ckpt"))
  program.run([v.assign(-1.) for v in program.variables])
  program.checkpoint.restore(path).run_restore_ops(program.session)
  return path


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
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      _save_change_and_restore(program, str(tmp_path / impl))
      names = tl.function_library_names(program.graph)
      to_import = meta_graph
      if names:
        with tl.GraphProgram(impl) as twin:
          _save_change_and_restore(twin, str(tmp_path / (impl + "twin")))
          twin_names = tl.function_library_names(twin.graph)
        if twin_names != names:  # Names follow a counter.
          to_import = _renamed(meta_graph, exported_name, names[0])
      imported = tl.outcome(tf.compat.v1.train.import_meta_graph,
                            to_import,
                            import_scope="imp")
      results[impl] = (imported.error, program.values())
  assert results["tf"][0] is None, results["tf"][0]
  assert results["ours"][0] is None, results["ours"][0]
  tl.assert_variables_equal(results["tf"][1], results["ours"][1])


def test_variables_on_two_cpus_round_trip_like_tensorflow(tmp_path):
  """Variables split over /cpu:0 and /cpu:1 save and restore as in TF."""
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  on_two_cpus = lambda i: f"/cpu:{i % 2}"
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl, config=config) as writer:
      writer.track(_floats(1, on_two_cpus))
      path = writer.save(str(tmp_path / impl / "ckpt"))
      expected = writer.values()
    with tl.GraphProgram(tl.other(impl), config=config) as reader:
      reader.track(_floats(3, on_two_cpus))
      reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
          reader.session)
      tl.assert_variables_equal(expected, reader.values())
  assert (sorted(tf.train.list_variables(str(
      tmp_path / "tf" / "ckpt-1"))) == sorted(
          tf.train.list_variables(str(tmp_path / "ours" / "ckpt-1"))))


def test_imported_meta_graph_restores_with_both_savers(tmp_path):
  """A meta graph holding our batched ops imports and restores like TF's."""
  results = {}
  for impl in tl.IMPLS:
    meta_path = str(tmp_path / impl / "graph.meta")
    with tl.GraphProgram(impl) as program:
      path = _save_change_and_restore(program, str(tmp_path / impl))
      tf.compat.v1.train.export_meta_graph(meta_path)
    with tl.GraphProgram(impl) as imported:
      tf.compat.v1.train.import_meta_graph(meta_path)
      imported.track(
          sorted((v for v in tf.compat.v1.global_variables()
                  if v.name.startswith("v")),
                 key=lambda v: int(v.name[1:-2])))
      variables = imported.variables
      imported.run([v.assign(-1.) for v in variables])
      imported.checkpoint.restore(
          path).assert_existing_objects_matched().run_restore_ops(
              imported.session)
      by_object = imported.values()
      imported.run([v.assign(-1.) for v in variables])
      tf.compat.v1.train.Saver({
          f"root/variables/{i}/.ATTRIBUTES/VARIABLE_VALUE": v
          for i, v in enumerate(variables)
      }).restore(imported.session, path)
      results[impl] = (by_object, imported.values())
  tl.assert_variables_equal(results["tf"][0], results["ours"][0])
  tl.assert_variables_equal(results["tf"][1], results["ours"][1])
  tl.assert_variables_equal([float(i) for i in range(_COUNT)],
                            results["ours"][0])


def test_momentum_slots_restore_before_and_after_the_optimizer(tmp_path):
  """Slots of many variables (some reference ones) restore as in TF."""

  def track_with_optimizer(program):
    """Tracks variables and a Momentum optimizer; returns the optimizer."""
    program.track(
        tf.compat.v1.get_variable(
            f"v{i}", initializer=float(i), use_resource=bool(i % 3))
        for i in range(_COUNT))
    program.root.optimizer = tf.compat.v1.train.MomentumOptimizer(0.1, 0.9)
    return program.root.optimizer

  def minimize(program, optimizer):
    """Builds the training op, creating and initializing the slots."""
    train_op = optimizer.minimize(
        tf.add_n([tf.square(v) for v in program.variables]))
    program.run(tf.compat.v1.variables_initializer(optimizer.variables()))
    return train_op

  def slots(program, optimizer):
    return program.run(
        [optimizer.get_slot(v, "momentum") for v in program.variables])

  results = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as writer:
      optimizer = track_with_optimizer(writer)
      train_op = minimize(writer, optimizer)
      for _ in range(2):
        writer.run(train_op)
      path = writer.save(str(tmp_path / impl / "ckpt"))
      expected = (writer.values(), slots(writer, optimizer))
    results[impl] = []
    for build_first in (True, False):
      with tl.GraphProgram(impl) as reader:
        optimizer = track_with_optimizer(reader)
        if build_first:
          minimize(reader, optimizer)
        status = reader.checkpoint.restore(path)
        status.run_restore_ops(reader.session)
        if not build_first:
          minimize(reader, optimizer)
          status.run_restore_ops(reader.session)
        status.assert_consumed()
        restored = (reader.values(), slots(reader, optimizer))
      for want, got in zip(expected, restored):
        tl.assert_variables_equal(want, got)
      results[impl].append(restored)
  for theirs, ours in zip(results["tf"], results["ours"]):
    for want, got in zip(theirs, ours):
      tl.assert_variables_equal(want, got)


def test_restoring_a_then_b_then_a_follows_the_checkpoints(tmp_path):
  """Mixed dtypes, reference and partitioned variables: A, B, A again."""
  makers = (
      lambda i, s: tf.constant(float(i * s)),
      lambda i, s: tf.constant(i * s, tf.int64),
      lambda i, s: tf.constant(f"s{i * s}"),
      lambda i, s: tf.constant(bool((i * s) % 2)),
      lambda i, s: tf.constant([i * s, 1], tf.int32),
  )

  def track(program, scale):
    """Tracks `_COUNT` variables, and a partitioned one as `root.parts`."""
    parts = list(
        tf.compat.v1.get_variable(
            "p", [36, 2],
            initializer=tf.compat.v1.constant_initializer(scale),
            partitioner=tf.compat.v1.fixed_size_partitioner(18)))
    program.track(
        tf.compat.v1.get_variable(f"v{i}",
                                  initializer=makers[i % len(makers)](i, scale),
                                  use_resource=bool(i % 7))
        for i in range(_COUNT))
    program.root.parts = parts
    program.variables = program.variables + parts

  results = {}
  for impl in tl.IMPLS:
    paths, expected = [], []
    for scale in (1, 2):
      with tl.GraphProgram(impl) as writer:
        track(writer, scale)
        paths.append(writer.save(str(tmp_path / f"{impl}{scale}" / "ckpt")))
        expected.append(writer.values())
    results[impl] = []
    with tl.GraphProgram(impl) as reader:
      track(reader, 3)
      for index in (0, 1, 0):
        reader.checkpoint.restore(paths[index]).run_restore_ops(reader.session)
        results[impl].append(reader.values())
        tl.assert_variables_equal(expected[index], results[impl][-1])
        ops_after = reader.num_ops()
      reader.checkpoint.restore(paths[1]).run_restore_ops(reader.session)
      assert reader.num_ops() == ops_after
  for theirs, ours in zip(results["tf"], results["ours"]):
    tl.assert_variables_equal(theirs, ours)


@pytest.mark.distributed
def test_variables_on_a_parameter_server_round_trip_like_tensorflow(tmp_path):
  """Variables of a ps task, in a worker's session, save and restore as TF.

  The batched restore runs its function on the parameter server, where
  the variables live.
  """
  ps_port, worker_port = tl.free_ports(2)
  cluster = tf.train.ClusterSpec({
      "ps": [f"localhost:{ps_port}"],
      "worker": [f"localhost:{worker_port}"]
  })
  servers = [
      tf.distribute.Server(cluster, job_name=job, task_index=0)
      for job in ("ps", "worker")
  ]
  target = servers[1].target
  on_ps = lambda i: "/job:ps/task:0/device:CPU:0"
  for writer_impl in tl.IMPLS:
    with tl.GraphProgram(writer_impl, target=target) as writer:
      writer.track(_floats(1, on_ps))
      path = writer.save(str(tmp_path / writer_impl / "ckpt"))
      expected = writer.values()
    for reader_impl in tl.IMPLS:
      with tl.GraphProgram(reader_impl, target=target) as reader:
        reader.track(_floats(3, on_ps))
        reader.checkpoint.restore(path).assert_consumed().run_restore_ops(
            reader.session)
        tl.assert_variables_equal(expected, reader.values())


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


def _saved_model_after_restore(impl, directory):
  """A v1 SavedModel of a graph holding `impl`'s restore ops.

  Returns:
    Its path, and the log lines of running the restore that look like
    TensorFlow errors ("E" followed by the date).
  """
  with tl.GraphProgram(impl) as program:
    program.track(_floats(1))
    inputs = tf.compat.v1.placeholder(tf.float32, [], name="inputs")
    outputs = tf.identity(tf.add_n(program.variables) * inputs, "outputs")
    path = program.save(os.path.join(directory, "ckpt"))
    program.run([v.assign(-1.) for v in program.variables])
    with _captured_stderr() as captured:
      program.checkpoint.restore(path).run_restore_ops(program.session)
    export_dir = os.path.join(directory, "saved_model")
    builder = tf.compat.v1.saved_model.Builder(export_dir)
    builder.add_meta_graph_and_variables(
        program.session, ["serve"],
        signature_def_map={
            "serving_default":
                tf.compat.v1.saved_model.predict_signature_def(
                    {"inputs": inputs}, {"outputs": outputs})
        })
    builder.save()
  errors = [line for line in captured if re.match(r"E\d{4} ", line)]
  return export_dir, errors


def test_saved_model_of_a_restored_graph_loads_in_tf2_like_tensorflow(tmp_path):
  """A v1 SavedModel exported after a restore loads in TF2 and TF1.

  TensorFlow 2 turns every function of the graph's library into a Python
  function when loading; ours must allow that. Running the restore logs no
  errors (TensorFlow's MLIR passes complain about functions whose types
  depend on attributes).
  """
  expected = 2. * sum(float(i) for i in range(_COUNT))
  for impl in tl.IMPLS:
    export_dir, errors = _saved_model_after_restore(impl, str(tmp_path / impl))
    assert not errors, errors
    loaded = tf.saved_model.load(export_dir, tags=["serve"])
    outputs = loaded.signatures["serving_default"](inputs=tf.constant(2.))
    assert float(outputs["outputs"]) == expected
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
      tf.compat.v1.saved_model.load(session, ["serve"], export_dir)
      assert session.run("outputs:0", {"inputs:0": 2.}) == expected
