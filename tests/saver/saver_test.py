"""Differential tests of tf_objckpt.saver against tf.compat.v1.train.Saver.

Most tests build the same graph twice, once per implementation (or write
with one and read with the other), run real sessions on real files, and
compare what they observe: values, checkpoint contents, SaverDefs, files on
disk and checkpoint state protos, and the error types raised.

Covers: tf_objckpt.saver, tf_objckpt.v1.saver_builders,
tf_objckpt.v1.meta_graphs, tf_objckpt.v1.object_based_names,
tf_objckpt.saveable_object, tf_objckpt.engine.saveable_objects,
tf_objckpt.restoring.restore_plan, tf_objckpt.engine.read_plan,
tf_objckpt.v1.name_based_saver, tf_objckpt.v1.saver_retention,
tf_objckpt.v1.saver_restores, tf_objckpt.restoring.named_saveables,
tf_objckpt.engine.variable_saveables.
"""

import os
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.framework import errors
from tensorflow.python.ops import variables as tf_variables

import testlib as tl
from tf_objckpt.engine import reads
from tf_objckpt.restoring import restore_plan
from tf_objckpt import saver as saver_lib
from tf_objckpt.v1 import saver_builders


def _const(value):
  return tf.compat.v1.constant_initializer(value)


def _make_variables(offset=0.0):
  """Resource, reference and partitioned variables in the default graph.

  Their initial values are `_full_value(name, offset)` (see `_fill`).
  """
  variables = {
      "a":
          tf.compat.v1.get_variable("a", [2, 3]),
      "b":
          tf.compat.v1.get_variable("scope/b", [4], use_resource=False),
      "p":
          tf.compat.v1.get_variable(
              "p", [6, 2], partitioner=tf.compat.v1.fixed_size_partitioner(3)),
      "q":
          tf.compat.v1.get_variable(
              "q", [4, 3],
              use_resource=False,
              partitioner=tf.compat.v1.fixed_size_partitioner(2)),
  }
  for name, var in variables.items():
    tf.compat.v1.add_to_collection("fill_ops", _fill_op(name, var, offset))
  return variables


def _full_value(name, shape, offset):
  scale = {"a": 1., "b": 2., "p": 3., "q": 4.}[name]
  return np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * scale + (
      offset)


def _fill_op(name, var, offset):
  """An op giving `var` (partitioned or not) a distinctive value."""
  if not isinstance(var, tf_variables.PartitionedVariable):
    return var.assign(_full_value(name, var.shape.as_list(), offset)).op
  full = _full_value(name, var.get_shape().as_list(), offset)
  assigns = []
  for part in var:
    info = part._get_save_slice_info()  # pylint: disable=protected-access
    index = tuple(
        slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))
    assigns.append(part.assign(full[index]).op)
  return tf.group(*assigns)


def _initialize(sess):
  sess.run(tf.compat.v1.global_variables_initializer())
  sess.run(tf.compat.v1.get_collection("fill_ops"))


def _var_list(style, variables):
  if style == "all":
    return None
  if style == "list":
    return [variables["a"], variables["b"], variables["p"], variables["q"]]
  if style == "dict":
    return {
        "A": variables["a"],
        "B/b": variables["b"],
        "P": variables["p"],
        "Q": variables["q"]
    }
  if style == "slices":  # The partitions of p as a list of slices.
    return list(variables["p"]) + [variables["a"]]
  raise ValueError(style)


def _session_values(sess, variables):
  return {
      k:
          sess.run(
              tf.convert_to_tensor(v) if isinstance(
                  v, tf_variables.PartitionedVariable) else v)
      for k, v in variables.items()
  }


def _save_variables(impl, directory, style, offset=1.0, **saver_kwargs):
  """Saves `_make_variables(offset)` with `impl`; returns path and values."""
  with tf.Graph().as_default():
    variables = _make_variables(offset)
    saver = tl.IMPLS[impl].Saver(_var_list(style, variables), **saver_kwargs)
    with tf.compat.v1.Session() as sess:
      _initialize(sess)
      path = saver.save(sess, os.path.join(directory, "model"))
      return path, _session_values(sess, variables)


def _restore_variables(impl, path, style, **saver_kwargs):
  """Restores fresh `_make_variables()` from `path`; returns their values."""
  with tf.Graph().as_default():
    variables = _make_variables(offset=-100.)
    saver = tl.IMPLS[impl].Saver(_var_list(style, variables), **saver_kwargs)
    with tf.compat.v1.Session() as sess:
      _initialize(sess)
      saver.restore(sess, path)
      return _session_values(sess, variables)


# ----------------------------------------------------------------------------
# SaverDef and graph structure.
# ----------------------------------------------------------------------------


def _build_saver_def(impl, **kwargs):
  with tf.Graph().as_default() as graph:
    with tf.device("/cpu:0"):
      tf.compat.v1.get_variable("a", [2, 3])
    with tf.device("/cpu:1"):
      tf.compat.v1.get_variable("b", [3], use_resource=False)
    tf.compat.v1.get_variable(
        "q", [4, 2],
        use_resource=False,
        partitioner=tf.compat.v1.fixed_size_partitioner(2))
    with tf.device("/cpu:1"):
      tf.compat.v1.get_variable(
          "r", [4, 2], partitioner=tf.compat.v1.fixed_size_partitioner(2))
    first = tl.IMPLS[impl].Saver(**kwargs).as_saver_def()
    second = tl.IMPLS[impl].Saver(**kwargs).as_saver_def()
    ops = sorted((op.name, op.type, op.device, tuple(t.name
                                                     for t in op.inputs))
                 for op in graph.get_operations())
    return first, second, ops


@pytest.mark.parametrize("kwargs", [
    {},
    {
        "sharded": True
    },
    {
        "name": "my_saver"
    },
    {
        "reshape": True
    },
    {
        "max_to_keep": None,
        "keep_checkpoint_every_n_hours": 2.5
    },
    {
        "write_version": saver_pb2.SaverDef.V1
    },
    {
        "write_version": saver_pb2.SaverDef.V1,
        "sharded": True
    },
    {
        "builder": "base"
    },
    {
        "restore_sequentially": True
    },
])
def test_saver_def_and_graph_ops_match_tensorflow(kwargs):
  results = {}
  for impl in tl.IMPLS:
    kw = dict(kwargs)
    if kw.get("builder") == "base":
      kw["builder"] = tl.IMPLS[impl].saver.BaseSaverBuilder()
    results[impl] = _build_saver_def(impl, **kw)
  assert results["ours"][0] == results["tf"][0]
  assert results["ours"][1] == results["tf"][1]

  # Same save/restore ops, with the same names and types, in the graph.
  # (Identity and grouping NoOps are compared by the test below.)
  def main_ops(ops):
    return [op for op in ops if op[1] not in ("Identity", "NoOp")]

  assert main_ops(results["ours"][2]) == main_ops(results["tf"][2])


@pytest.mark.parametrize("sharded", [False, True])
def test_graph_ops_identical_to_tensorflow(sharded):
  assert (_build_saver_def("ours", sharded=sharded)[2] == _build_saver_def(
      "tf", sharded=sharded)[2])


def test_saver_def_conventional_names():
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", [1])
    saver_def = saver_lib.Saver().as_saver_def()
    assert saver_def.filename_tensor_name == "save/Const:0"
    assert saver_def.save_tensor_name == "save/control_dependency:0"
    assert saver_def.restore_op_name == "save/restore_all"
    sharded = saver_lib.Saver(sharded=True).as_saver_def()
    assert sharded.filename_tensor_name == "save_1/Const:0"
    assert sharded.save_tensor_name == "save_1/Identity:0"
    assert sharded.restore_op_name == "save_1/restore_all"
    assert sharded.sharded and sharded.version == saver_pb2.SaverDef.V2


def test_builder_build_returns_saver_def():
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [1])
    ours = saver_lib.BulkSaverBuilder().build([v], filename="f")
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [1])
    theirs = tf.compat.v1.train.Saver([v], defer_build=False,
                                      filename="f").as_saver_def()
  assert ours == theirs


def test_group_by_devices():
  with tf.Graph().as_default():
    with tf.device("/cpu:1"):
      b = tf.compat.v1.get_variable("b", [1])
    with tf.device("/cpu:0"):
      a = tf.compat.v1.get_variable("a", [1])
      c = tf.compat.v1.get_variable("c", [1], use_resource=False)
    saveables = saver_builders.saveables_from_var_list([a, b, c])
    groups = saver_lib.BaseSaverBuilder()._GroupByDevices(saveables)
    assert [d for d, _ in groups] == ["/device:CPU:0", "/device:CPU:1"]
    assert [[s.name for s in g] for _, g in groups] == [["a", "c"], ["b"]]

    class TwoDevices(saver_lib.BaseSaverBuilder.SaveableObject):

      def __init__(self):
        spec = saver_lib.BaseSaverBuilder.SaveSpec
        specs = [
            spec(a.value(), "", "x", device="/cpu:0"),
            spec(b.value(), "", "y", device="/cpu:1")
        ]
        super().__init__(a, specs, "two")

    with pytest.raises(ValueError, match="same device"):
      saver_lib.BaseSaverBuilder()._GroupByDevices([TwoDevices()])


@pytest.mark.parametrize("only", ["build_save", "build_restore"])
def test_build_needs_save_and_restore_together_in_graph_mode(only):
  """Either alone is a ValueError saying so, before any op is built."""
  for impl, lib in tl.IMPLS.items():
    with tf.Graph().as_default() as graph:
      v = tf.compat.v1.get_variable("v", [1])
      ops_before = len(graph.get_operations())
      error = tl.outcome(lib.saver.BulkSaverBuilder()._build_internal, [v], **{
          only: False
      }).error
      assert isinstance(error, ValueError), (impl, error)
      assert "save and restore operations need to be built together" in (
          str(error)), impl
      assert "when eager execution is not enabled" in str(error), impl
      assert len(graph.get_operations()) == ops_before, impl
      saver_def = lib.saver.BulkSaverBuilder()._build_internal([v])
      assert saver_def.save_tensor_name and saver_def.restore_op_name, impl


# ----------------------------------------------------------------------------
# Checkpoints written by one restore through the other.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["all", "list", "dict", "slices"])
@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_round_trip_between_implementations(tmp_path, writer, reader, style):
  path, saved = _save_variables(writer, str(tmp_path), style)
  restored = _restore_variables(reader, path, style)
  if style == "slices":  # Only `a` and `p` are in the var_list.
    saved = {k: saved[k] for k in ("a", "p")}
    restored = {k: restored[k] for k in ("a", "p")}
  tl.assert_values_equal(saved, restored)


@pytest.mark.parametrize("style", ["all", "list", "dict"])
def test_checkpoint_contents_match_tensorflow(tmp_path, style):
  paths = {
      impl: _save_variables(impl, str(tmp_path / impl), style)[0]
      for impl in tl.IMPLS
  }
  tl.assert_values_equal(tl.values(paths["tf"]), tl.values(paths["ours"]),
                         tl.TENSORFLOWS_AND_OURS)
  assert tl.files_under(str(tmp_path / "ours")) == tl.files_under(
      str(tmp_path / "tf"))


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_v1_format_round_trip(tmp_path, writer, reader):
  path, saved = _save_variables(writer,
                                str(tmp_path),
                                "list",
                                write_version=saver_pb2.SaverDef.V1)
  assert os.path.exists(path) and not os.path.exists(path + ".index")
  tl.assert_values_equal(saved, _restore_variables(reader, path, "list"))


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
def test_reshape(tmp_path, writer, reader):
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2, 3],
                                  initializer=_const(
                                      np.arange(6).reshape(2, 3)))
    saver = tl.IMPLS[writer].Saver([v])
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      path = saver.save(sess, str(tmp_path / "m"))
  saver_cls = tl.IMPLS[reader].Saver
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [3, 2], use_resource=False)
    with tf.compat.v1.Session() as sess:
      with pytest.raises(errors.InvalidArgumentError):
        saver_cls([v]).restore(sess, path)
      saver_cls([v], reshape=True).restore(sess, path)
      np.testing.assert_array_equal(sess.run(v), np.arange(6).reshape(3, 2))
      w = tf.compat.v1.get_variable("w", [4], use_resource=False)
      message = "cannot reshape" if reader == "ours" else "Reshape"
      with pytest.raises(errors.InvalidArgumentError, match=message):
        saver_cls({"v": w}, reshape=True).restore(sess, path)


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_base_builder_and_sequential_restore(tmp_path, impl):
  path, saved = _save_variables(tl.other(impl), str(tmp_path), "all")
  builder = (saver_lib.BaseSaverBuilder() if impl == "ours" else None)
  restored = _restore_variables(impl,
                                path,
                                "all",
                                builder=builder,
                                restore_sequentially=True)
  tl.assert_values_equal(saved, restored)


def test_custom_saveable_object(tmp_path):
  """A SaveableObject in the var_list saves and restores its specs."""

  class Doubled(saver_lib.BaseSaverBuilder.SaveableObject):
    """Stores twice the variable's value and halves it back."""

    def __init__(self, var):
      self.var = var
      spec = saver_lib.BaseSaverBuilder.SaveSpec(var.value() * 2., "", "dbl")
      super().__init__(var, [spec], "dbl")

    def restore(self, restored_tensors, restored_shapes):
      return self.var.assign(restored_tensors[0] / 2.)

  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2], initializer=_const([1., 2.]))
    saver = saver_lib.Saver([Doubled(v)])
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      path = saver.save(sess, str(tmp_path / "m"))
      assert set(tl.values(path)) == {"dbl"}
      np.testing.assert_array_equal(tl.values(path)["dbl"], [2., 4.])
      sess.run(v.assign([0., 0.]))
      saver.restore(sess, path)
      np.testing.assert_array_equal(sess.run(v), [1., 2.])


# ----------------------------------------------------------------------------
# Meta graphs.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
@pytest.mark.parametrize("import_scope", [None, "imported"])
def test_meta_graph_round_trip(tmp_path, writer, reader, import_scope):
  with tf.Graph().as_default():
    variables = _make_variables(offset=5.)
    x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
    tf.identity(x * variables["a"], name="y")
    tf.compat.v1.add_to_collection("outputs", variables["a"])
    saver = tl.IMPLS[writer].Saver()
    with tf.compat.v1.Session() as sess:
      _initialize(sess)
      path = saver.save(sess, str(tmp_path / "model"))
      saved = _session_values(sess, variables)
  assert os.path.exists(path + ".meta")

  with tf.Graph().as_default() as graph:
    # Pre-existing ops must not confuse scope detection.
    tf.constant(0., name="imported")
    new_saver = tl.IMPLS[reader].import_meta_graph(path + ".meta",
                                                   import_scope=import_scope)
    assert type(new_saver) is tl.IMPLS[reader].Saver  # pylint: disable=unidiomatic-typecheck
    scope = "" if import_scope is None else import_scope + "_1/"
    assert (new_saver.as_saver_def().restore_op_name == scope +
            "save/restore_all")
    with tf.compat.v1.Session() as sess:
      new_saver.restore(sess, path)
      by_name = {v.name: v for v in tf.compat.v1.global_variables()}
      np.testing.assert_array_equal(sess.run(by_name[scope + "a:0"]),
                                    saved["a"])
      np.testing.assert_array_equal(sess.run(by_name[scope + "scope/b:0"]),
                                    saved["b"])
      y = sess.run(scope + "y:0", {scope + "x:0": np.ones([2, 3])})
      np.testing.assert_array_equal(y, saved["a"])
      # As TensorFlow does, the collection keeps its name; its items are
      # the imported ones.
      assert [v.name for v in graph.get_collection("outputs")
             ] == [scope + "a:0"]


@pytest.mark.parametrize("writer", tl.IMPLS)
def test_meta_graph_saver_collection_export(tmp_path, writer):
  """Savers kept in the SAVERS collection export and re-import."""
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", [1])
    saver = tl.IMPLS[writer].Saver()
    tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver)
    meta = saver.export_meta_graph(str(tmp_path / "m.meta"))
    assert tf.compat.v1.GraphKeys.SAVERS in meta.collection_def
  for reader in tl.IMPLS:
    with tf.Graph().as_default() as graph:
      tl.IMPLS[reader].import_meta_graph(str(tmp_path / "m.meta"))
      savers = graph.get_collection(tf.compat.v1.GraphKeys.SAVERS)
      assert [type(s) for s in savers] == [tl.IMPLS[reader].Saver]
      assert savers[0].as_saver_def() == saver.as_saver_def()
      # Our import and TensorFlow's produce the same meta graph again.
      meta_again = saver_lib.export_meta_graph()
      assert meta_again.collection_def == meta.collection_def


def test_export_meta_graph_matches_tensorflow():
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope("outer"):
      tf.compat.v1.get_variable("v", [2])
    tf.compat.v1.get_variable("w", [2])
    ours = saver_lib.Saver()
    kwargs = dict(export_scope="outer",
                  clear_devices=True,
                  strip_default_attrs=True)
    mine = ours.export_meta_graph(**kwargs)
    # TensorFlow's method only reads `saver_def` from the saver.
    theirs = tf.compat.v1.train.Saver.export_meta_graph(ours, **kwargs)
    assert mine == theirs
    assert mine.saver_def.restore_op_name == "save/restore_all"
    mine = saver_lib.export_meta_graph(saver_def=ours.as_saver_def(),
                                       collection_list=["variables"])
    theirs = tf.compat.v1.train.export_meta_graph(saver_def=ours.as_saver_def(),
                                                  collection_list=["variables"])
    assert mine == theirs


def test_import_meta_graph_without_saver_def(tmp_path):
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2], initializer=_const([3., 4.]))
    meta = tf.compat.v1.train.export_meta_graph()
    assert not meta.HasField("saver_def")
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "m"))
  with tf.Graph().as_default():
    saver = saver_lib.import_meta_graph(meta)
    assert isinstance(saver, saver_lib.Saver)
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, path)
      np.testing.assert_array_equal(
          sess.run(tf.compat.v1.global_variables()[0]), [3., 4.])
  with tf.Graph().as_default():
    tf.constant(1.)
    assert saver_lib.import_meta_graph(saver_lib.export_meta_graph()) is None


def test_to_proto_and_from_proto_with_scopes():
  with tf.Graph().as_default():
    with tf.compat.v1.name_scope("outer"):
      v = tf.compat.v1.get_variable("v", [1])
      saver = saver_lib.Saver([v], name="s")
    proto = saver.to_proto(export_scope="outer")
    assert proto.restore_op_name == "s/restore_all"
    assert saver.to_proto(export_scope="elsewhere") is None
    assert saver.to_proto() is saver.as_saver_def()
    again = saver_lib.Saver.from_proto(proto, import_scope="outer")
    assert isinstance(again, saver_lib.Saver)
    assert again.as_saver_def() == saver.as_saver_def()


# ----------------------------------------------------------------------------
# Files left on disk and checkpoint state.
# ----------------------------------------------------------------------------


def _state(directory, latest_filename="checkpoint"):
  state = tf.train.get_checkpoint_state(directory, latest_filename)
  if state is None:
    return None
  return str(state).replace(directory, "<dir>")


SCENARIOS = {
    "max_to_keep":
        dict(saver={"max_to_keep": 2}, steps=[1, 2, 3, 4, 5]),
    "keep_all":
        dict(saver={"max_to_keep": None}, steps=[1, 2, 3]),
    "keep_zero":
        dict(saver={"max_to_keep": 0}, steps=[1, 2, 3]),
    "pad_step_number":
        dict(saver={
            "pad_step_number": True,
            "max_to_keep": 2
        },
             steps=[7, 8, 123]),
    "latest_filename":
        dict(saver={"max_to_keep": 2},
             steps=[1, 2, 3],
             save={"latest_filename": "my_state"}),
    "relative_paths":
        dict(saver={
            "save_relative_paths": True,
            "max_to_keep": 2
        },
             steps=[1, 2, 3]),
    "no_state":
        dict(saver={"max_to_keep": 1},
             steps=[1, 2, 3],
             save={"write_state": False}),
    "no_meta_graph":
        dict(saver={"max_to_keep": 2},
             steps=[1, 2, 3],
             save={"write_meta_graph": False}),
    "meta_suffix":
        dict(saver={"max_to_keep": 1},
             steps=[1, 2],
             save={"meta_graph_suffix": "mg"}),
    "no_step":
        dict(saver={}, steps=[None, None]),
    "repeated_step":
        dict(saver={"max_to_keep": 2}, steps=[1, 2, 1, 3]),
    "sharded":
        dict(saver={
            "sharded": True,
            "max_to_keep": 1
        }, steps=[1, 2]),
    "tensor_step":
        dict(saver={"max_to_keep": 2}, steps=["tensor"] * 3),
}


def _run_scenario(impl, directory, scenario):
  os.makedirs(directory)
  with tf.Graph().as_default():
    _make_variables()
    step = tf.compat.v1.train.get_or_create_global_step()
    increment = step.assign_add(1)
    saver = tl.IMPLS[impl].Saver(**scenario["saver"])
    returned = []
    with tf.compat.v1.Session() as sess:
      _initialize(sess)
      for value in scenario["steps"]:
        sess.run(increment)
        global_step = step if value == "tensor" else value
        path = saver.save(sess,
                          os.path.join(directory, "model"),
                          global_step=global_step,
                          **scenario.get("save", {}))
        returned.append(path.replace(directory, "<dir>"))
    last = [p.replace(directory, "<dir>") for p in saver.last_checkpoints]
  latest = scenario.get("save", {}).get("latest_filename", "checkpoint")
  return {
      "files": tl.files_under(directory),
      "returned": returned,
      "last_checkpoints": last,
      "state": _state(directory, latest)
  }


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_files_and_state_match_tensorflow(tmp_path, name):
  results = {
      impl: _run_scenario(impl, str(tmp_path / impl), SCENARIOS[name])
      for impl in tl.IMPLS
  }
  assert results["ours"] == results["tf"]
  assert results["ours"]["files"]  # The scenario wrote something.


def test_keep_checkpoint_every_n_hours_matches_tensorflow(
    tmp_path, monkeypatch):
  clock = [1_700_000_000.0]
  monkeypatch.setattr(time, "time", lambda: clock[0])
  results = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    clock[0] = 1_700_000_000.0
    with tf.Graph().as_default():
      tf.compat.v1.get_variable("v", [1])
      saver = tl.IMPLS[impl].Saver(max_to_keep=2,
                                   keep_checkpoint_every_n_hours=1.0)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        for step in range(1, 9):
          clock[0] += 1500.  # 25 minutes per step.
          saver.save(sess,
                     os.path.join(directory, "m"),
                     global_step=step,
                     write_meta_graph=False)
    results[impl] = (tl.files_under(directory), _state(directory))
  assert results["ours"] == results["tf"]
  kept = {f.split(".")[0] for f in results["ours"][0] if f != "checkpoint"}
  assert len(kept) > 2  # Hourly checkpoints survived max_to_keep.


def test_last_checkpoint_bookkeeping_matches_tensorflow(tmp_path):
  results = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    with tf.Graph().as_default():
      tf.compat.v1.get_variable("v", [1])
      saver = tl.IMPLS[impl].Saver(max_to_keep=2)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        paths = [
            saver.save(sess, os.path.join(directory, "m"), global_step=i)
            for i in range(3)
        ]
        observed = [list(saver.last_checkpoints)]
        saver.set_last_checkpoints(paths[:1])
        observed.append(list(saver.last_checkpoints))
        saver.set_last_checkpoints_with_time([(paths[1], 5.0)])
        observed.append(list(saver._last_checkpoints))
        saver.recover_last_checkpoints(paths +
                                       [os.path.join(directory, "gone")])
        observed.append(list(saver.last_checkpoints))
        saver.save(sess, os.path.join(directory, "m"), global_step=10)
        with pytest.raises(AssertionError):
          saver.set_last_checkpoints("not a list")
    results[impl] = (str(observed).replace(directory, "<dir>"),
                     tl.files_under(directory), _state(directory))
  assert results["ours"] == results["tf"]


# ----------------------------------------------------------------------------
# Bad input.
# ----------------------------------------------------------------------------


@pytest.fixture(name="checkpoint")
def _checkpoint_fixture(tmp_path):
  """A checkpoint of variables a[2] (resource) and b[3] (reference)."""
  with tf.Graph().as_default():
    a = tf.compat.v1.get_variable("a", [2], initializer=_const([1., 2.]))
    b = tf.compat.v1.get_variable("b", [3],
                                  use_resource=False,
                                  initializer=_const([3., 4., 5.]))
    saver = tf.compat.v1.train.Saver([a, b])
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      return saver.save(sess, str(tmp_path / "ckpt" / "model"))


def _restore_into(impl,
                  path,
                  shapes,
                  use_resource=False,
                  var_list=None,
                  dtype=tf.float32,
                  **kwargs):
  """Restores into fresh zero variables; returns (error, values after)."""
  with tf.Graph().as_default():
    variables = {
        name:
            tf.compat.v1.get_variable(
                name,
                shape,
                dtype=dtype,
                use_resource=use_resource,
                initializer=tf.compat.v1.zeros_initializer())
        for name, shape in shapes.items()
    }
    saver = tl.IMPLS[impl].Saver(
        var_list(variables) if var_list else None, **kwargs)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      err = tl.outcome(saver.restore, sess, path).error
      return err, {k: sess.run(v) for k, v in variables.items()}


def test_missing_variable(checkpoint):
  shapes = {"a": [2], "b": [3], "c": [4], "d": [1]}
  errs = {impl: _restore_into(impl, checkpoint, shapes) for impl in tl.IMPLS}
  for impl in tl.IMPLS:
    assert isinstance(errs[impl][0], errors.NotFoundError), errs[impl]
  message = str(errs["ours"][0])
  assert "Restoring from checkpoint failed" in message
  assert "lacks (2): 'c', 'd'" in message  # The missing names...
  # ... and nothing was assigned.
  for value in errs["ours"][1].values():
    assert not value.any()


def test_missing_and_unexpected_names_reported(checkpoint):
  err, values = _restore_into("ours", checkpoint, {"a": [2], "x": [3]})
  assert isinstance(err, errors.NotFoundError)
  assert "lacks (1): 'x'" in str(err)
  assert "not restored (1): 'b'" in str(err)
  assert not values["a"].any()


@pytest.mark.parametrize("use_resource", [False, True])
def test_shape_mismatch(checkpoint, use_resource):
  shapes = {"a": [2], "b": [4]}
  errs = {
      impl: _restore_into(impl, checkpoint, shapes, use_resource=use_resource)
      for impl in tl.IMPLS
  }
  err, values = errs["ours"]
  assert isinstance(err, errors.InvalidArgumentError)
  assert ("checkpoint key 'b': received incompatible tensor with shape (3,) "
          "when attempting to restore variable with shape (4,)") in str(err)
  # TensorFlow's restore assigns `a` before failing on `b`; ours assigns
  # nothing.
  assert not values["a"].any() and not values["b"].any()
  if use_resource:
    # TensorFlow silently reshapes a resource variable; we refuse.
    assert errs["tf"][0] is None
    assert errs["tf"][1]["b"].shape == (3,)
  else:
    assert isinstance(errs["tf"][0], errors.InvalidArgumentError)
    np.testing.assert_array_equal(errs["tf"][1]["a"], [1., 2.])
  # The Assign kernel's words, which TensorFlow's reference variables fail
  # with and code catching the error searches for, follow ours.
  assign_words = ("Assign requires shapes of both tensors to match. lhs "
                  "shape= [4] rhs shape= [3]")
  assert assign_words in str(err)
  assert (assign_words in str(errs["tf"][0])) is not use_resource


def test_reshape_restores_where_shapes_differ(tmp_path):
  """`Saver(reshape=True)` restores a value into a variable of its size."""
  prefix = str(tmp_path / "ckpt")
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("m", initializer=[[1., 2., 3.], [4., 5., 6.]])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, prefix)
  restored = {}
  for impl in tl.IMPLS:
    with tf.Graph().as_default():
      m = tf.compat.v1.get_variable("m", [3, 2], use_resource=False)
      saver = tl.IMPLS[impl].Saver(reshape=True)
      with tf.compat.v1.Session() as session:
        saver.restore(session, prefix)
        restored[impl] = session.run(m).tolist()
  assert restored["ours"] == restored["tf"] == [[1., 2.], [3., 4.], [5., 6.]]


def test_dtype_mismatch(checkpoint):
  errs = {
      impl:
          _restore_into(impl,
                        checkpoint, {
                            "a": [2],
                            "b": [3]
                        },
                        dtype=tf.float64) for impl in tl.IMPLS
  }
  for impl in tl.IMPLS:
    assert isinstance(errs[impl][0], errors.InvalidArgumentError), impl
  assert ("checkpoint key 'a': expected dtype double does not equal original "
          "dtype float; the checkpoint holds dtype float32 but float64 is "
          "expected") in str(errs["ours"][0])


def test_partitioned_shape_mismatch(tmp_path):
  path, _ = _save_variables("tf", str(tmp_path), "all")
  with tf.Graph().as_default():
    p = tf.compat.v1.get_variable(
        "p", [8, 2],
        partitioner=tf.compat.v1.fixed_size_partitioner(2),
        initializer=tf.compat.v1.zeros_initializer())
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      with pytest.raises(errors.InvalidArgumentError, match="full shape"):
        saver_lib.Saver([p]).restore(sess, path)
      with pytest.raises(errors.InvalidArgumentError):
        tf.compat.v1.train.Saver([p]).restore(sess, path)


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_bad_paths_and_arguments(tmp_path, impl, checkpoint):
  a_file = tmp_path / "a_file"
  a_file.write_text("not a directory")
  saver_cls = tl.IMPLS[impl].Saver
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [1])
    saver = saver_cls([v])
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      cases = {
          "restore None":
              lambda: saver.restore(sess, None),
          "restore missing":
              lambda: saver.restore(sess, str(tmp_path / "no" / "such")),
          "parent is a file":
              lambda: saver.save(sess, str(a_file / "m")),
          "missing parents":
              lambda: saver.save(sess, str(tmp_path / "no" / "such" / "m")),
          "latest with dir":
              lambda: saver.save(
                  sess, str(tmp_path / "m"), latest_filename="d/state"),
          "collision":
              lambda: saver.save(sess, str(tmp_path / "checkpoint")),
          "not a session":
              lambda: saver.save("sess", str(tmp_path / "m")),
      }
      observed = {name: tl.outcome(fn).name for name, fn in cases.items()}
    deferred = saver_cls(defer_build=True)
    cases = {
        "deferred save":
            lambda: deferred.save(None, str(tmp_path / "m")),
        "defer with var_list":
            lambda: saver_cls([v], defer_build=True),
        "bad var_list":
            lambda: saver_cls(3),
        "duplicate":
            lambda: saver_cls({
                "x": v,
                "y": v
            }),
        "bad saver_def":
            lambda: saver_cls(saver_def="nope"),
        "incomplete saver_def":
            lambda: saver_cls(saver_def=saver_pb2.SaverDef()),
    }
    observed.update((name, tl.outcome(fn).name) for name, fn in cases.items())
  with tf.Graph().as_default():
    observed["empty"] = tl.outcome(saver_cls).name
  expected = {
      "restore None": "ValueError",
      "restore missing": "ValueError",
      "parent is a file": "ValueError",
      "latest with dir": "ValueError",
      "missing parents": "ValueError",
      "collision": "ValueError",
      "not a session": "TypeError",
      "deferred save": "RuntimeError",
      "defer with var_list": "ValueError",
      "bad var_list": "TypeError",
      "duplicate": "ValueError",
      "bad saver_def": "ValueError",
      "incomplete saver_def": "ValueError",
      "empty": "ValueError",
  }
  assert observed == expected


def test_allow_empty_and_defer_build(tmp_path):
  with tf.Graph().as_default():
    empty = saver_lib.Saver(allow_empty=True)
    with tf.compat.v1.Session() as sess:
      assert empty.save(sess, str(tmp_path / "e")) is None
      assert empty.restore(sess, str(tmp_path / "e")) is None
    v = tf.compat.v1.get_variable("v", [1], initializer=_const([7.]))
    deferred = saver_lib.Saver(defer_build=True)
    deferred.build()
    deferred.build()  # Building twice is a no-op.
    with tf.compat.v1.Session() as sess:
      sess.run(v.initializer)
      path = deferred.save(sess, str(tmp_path / "d"))
      sess.run(v.assign([0.]))
      deferred.restore(sess, path)
      assert sess.run(v) == 7.


def test_restore_fails_whole_for_imported_meta_graph(tmp_path):
  """The up-front check also covers savers imported from meta graphs."""
  with tf.Graph().as_default():
    zeros = tf.compat.v1.zeros_initializer()
    tf.compat.v1.get_variable("a", [2], use_resource=False, initializer=zeros)
    tf.compat.v1.get_variable("b", [5], use_resource=False, initializer=zeros)
    meta = tf.compat.v1.train.Saver().export_meta_graph()
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("a", [2], initializer=_const([1., 2.]))
    tf.compat.v1.get_variable("b", [3], initializer=_const([1., 2., 3.]))
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "m"))
  for impl in tl.IMPLS:
    with tf.Graph().as_default():
      saver = tl.IMPLS[impl].import_meta_graph(meta)
      with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(errors.InvalidArgumentError):
          saver.restore(sess, path)
        if impl == "ours":
          with pytest.raises(errors.InvalidArgumentError,
                             match="key 'b': received incompatible"):
            saver.restore(sess, path)
          assert not sess.run("a:0").any()
        else:  # TensorFlow assigned `a` before failing on `b`.
          np.testing.assert_array_equal(sess.run("a:0"), [1., 2.])


@pytest.mark.parametrize("kwargs", [{}, {
    "reshape": True
}, {
    "sharded": True
}, {
    "builder": "base"
}])
def test_restore_plan_read_from_graph_matches_built_plan(kwargs):
  """The plan of an imported saver (read from its ops) equals the plan the
  builder records from the saveables."""
  if kwargs.get("builder"):
    kwargs = {"builder": saver_lib.BaseSaverBuilder()}
  with tf.Graph().as_default() as graph:
    _make_variables()
    tf.compat.v1.get_variable("unknown_shape",
                              validate_shape=False,
                              initializer=tf.zeros([3]),
                              use_resource=False)
    saver = saver_lib.Saver(**kwargs)
    _, name, built = saver._restore_plans.cached
    assert name == saver.as_saver_def().restore_op_name
    read = restore_plan.plan_from_graph(graph, name)
    assert sorted(read.reads) == sorted(built.reads)
    assert len(built.reads) == 2 + 3 + 2 + 1
    assert reads.Read("unknown_shape", "", tf.float32, None,
                      reads.ShapeMatch.SAME_SHAPE) in built.reads


# ----------------------------------------------------------------------------
# Object-based checkpoints through the name-based Saver.
# ----------------------------------------------------------------------------


def _write_object_based(directory):
  """A tf.train.Checkpoint of a module; variables named "v" and "w/k"."""
  module = tf.Module()
  module.v = tf.Variable([1., 2.], name="v")
  module.inner = tf.Module()
  module.inner.k = tf.Variable([[3.]], name="w/k")
  return tf.train.Checkpoint(model=module).write(os.path.join(directory, "obj"))


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_object_based_checkpoint_restores_by_name(tmp_path, impl):
  path = _write_object_based(str(tmp_path))
  assert saver_lib.object_graph_key_mapping(path) == {
      "v": "model/v/.ATTRIBUTES/VARIABLE_VALUE",
      "w/k": "model/inner/k/.ATTRIBUTES/VARIABLE_VALUE"
  }
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2], use_resource=False)
    k = tf.compat.v1.get_variable("w/k", [1, 1])
    saver = tl.IMPLS[impl].Saver()
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      saver.restore(sess, path)
      saver.restore(sess, path)  # The second restore reuses the saver.
      np.testing.assert_array_equal(sess.run(v), [1., 2.])
      np.testing.assert_array_equal(sess.run(k), [[3.]])


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_object_based_checkpoint_missing_variable(tmp_path, impl):
  path = _write_object_based(str(tmp_path))
  with tf.Graph().as_default():
    tf.compat.v1.get_variable("v", [2])
    tf.compat.v1.get_variable("other", [2])
    saver = tl.IMPLS[impl].Saver()
    with tf.compat.v1.Session() as sess:
      with pytest.raises(errors.NotFoundError,
                         match="Existing variables not in the checkpoint: "
                         "other"):
        saver.restore(sess, path)


def test_saver_from_object_based_checkpoint(tmp_path):
  path = _write_object_based(str(tmp_path))
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2])
    saver = saver_lib.saver_from_object_based_checkpoint(path, [v])
    cached = saver_lib.saver_from_object_based_checkpoint(path, [v],
                                                          cached_saver=saver)
    assert cached is saver
    with tf.compat.v1.Session() as sess:
      saver.restore(sess, path)
      np.testing.assert_array_equal(sess.run(v), [1., 2.])
  name_based = _save_variables("tf", str(tmp_path / "names"), "list")[0]
  with tf.Graph().as_default():
    v = tf.compat.v1.get_variable("v", [2])
    with pytest.raises(ValueError, match="not an object-based"):
      saver_lib.saver_from_object_based_checkpoint(name_based, [v])
    with pytest.raises(errors.NotFoundError):
      saver_lib.object_graph_key_mapping(name_based)


# ----------------------------------------------------------------------------
# The SAVERS collection.
# ----------------------------------------------------------------------------


def test_get_saver_or_default():
  with tf.Graph().as_default() as graph:
    tf.compat.v1.get_variable("v", [1])
    saver = saver_lib._get_saver_or_default()
    assert isinstance(saver, saver_lib.Saver)
    assert saver.as_saver_def().sharded
    assert saver_lib._get_saver_or_default() is saver
    assert graph.get_collection(tf.compat.v1.GraphKeys.SAVERS) == [saver]
    graph.add_to_collection(tf.compat.v1.GraphKeys.SAVERS, saver_lib.Saver())
    with pytest.raises(RuntimeError, match="More than one item"):
      saver_lib._get_saver_or_default()


# ----------------------------------------------------------------------------
# Eager mode.
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("writer,reader", tl.PAIRS)
@pytest.mark.parametrize("sharded", [False, True])
def test_eager_round_trip(tmp_path, writer, reader, sharded):
  assert tf.executing_eagerly()
  v = tf.Variable([1., 2.], name="ev")
  w = tf.Variable([[3]], name="ew")
  saver = tl.IMPLS[writer].Saver([v, w], sharded=sharded, max_to_keep=1)
  if sharded and writer == "tf":
    # TensorFlow 2.21's eager sharded save asks for a tensor's op and fails
    # after writing its shard, before the merge (so no checkpoint and no
    # state file); ours is covered by the other parameters.
    with pytest.raises(AttributeError, match="Tensor.op"):
      saver.save(None, str(tmp_path / "m"), global_step=1)
    assert os.listdir(tmp_path) == ["m-1_temp"]
    return
  first = saver.save(None, str(tmp_path / "m"), global_step=1)
  path = saver.save(None, str(tmp_path / "m"), global_step=2)
  assert path == str(tmp_path / "m-2")
  assert not tf.compat.v1.train.checkpoint_exists(first)
  assert tf.train.latest_checkpoint(str(tmp_path)) == path
  v.assign([0., 0.])
  w.assign([[0]])
  tl.IMPLS[reader].Saver({"ev": v, "ew": w}).restore(None, path)
  np.testing.assert_array_equal(v.numpy(), [1., 2.])
  np.testing.assert_array_equal(w.numpy(), [[3]])


def test_eager_files_match_tensorflow(tmp_path):
  results = {}
  for impl in tl.IMPLS:
    v = tf.Variable([1., 2.], name="ev")
    saver = tl.IMPLS[impl].Saver([v], max_to_keep=2, pad_step_number=True)
    for step in range(3):
      saver.save(None, str(tmp_path / impl / "m"), global_step=step)
    results[impl] = (tl.files_under(str(tmp_path / impl)),
                     _state(str(tmp_path / impl)))
  assert results["ours"] == results["tf"]


def test_eager_errors(tmp_path):
  with pytest.raises(RuntimeError):
    saver_lib.Saver()
  v = tf.Variable([1., 2.], name="ev")
  saver = saver_lib.Saver([v])
  with pytest.raises(RuntimeError):
    saver.build()
  path = saver.save(None, str(tmp_path / "m"))
  # A shape mismatch is reported before anything is assigned.
  x = tf.Variable([9.], name="x")
  u = tf.Variable([5., 5., 5.], name="u")
  # Eagerly TensorFlow reports a variable's wrong shape as a ValueError.
  for lib in tl.IMPLS.values():
    with pytest.raises(ValueError, match="shape"):
      lib.Saver({"ev": u}).restore(None, path)
  u.assign([5., 5., 5.])
  with pytest.raises(ValueError, match="nothing was restored"):
    saver_lib.Saver({"ev": u}).restore(None, path)
  np.testing.assert_array_equal(u.numpy(), [5., 5., 5.])
  with pytest.raises(errors.NotFoundError, match="lacks"):
    saver_lib.Saver({"ev": v, "x": x}).restore(None, path)
  with pytest.raises(RuntimeError):
    saver_lib.import_meta_graph(str(tmp_path / "m.meta"))
  with pytest.raises(RuntimeError):
    saver_lib.export_meta_graph()


def test_eager_restores_object_based_checkpoint(tmp_path):
  path = _write_object_based(str(tmp_path))
  v = tf.Variable([0., 0.], name="v")
  saver_lib.Saver({"v": v}).restore(None, path)
  np.testing.assert_array_equal(v.numpy(), [1., 2.])
