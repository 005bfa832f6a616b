"""Differential tests of tf_objckpt.checkpoint_management against TensorFlow.

Each scenario runs once with TensorFlow's module and once with ours, each in
its own directory under a frozen clock, and the observations (return values,
manager properties, files on disk, state file text) must be equal.

Covers: tf_objckpt.checkpoint_management, tf_objckpt.engine.state_file,
tf_objckpt.api.checkpoint_manager, tf_objckpt.api.retention,
tf_objckpt.api.manager_protocol.
"""

import inspect
import os
import pathlib
import re
import threading
import time
import types

import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saver_pb2
from tensorflow.python.checkpoint import checkpoint_management as tf_cm
from tensorflow.python.lib.io import file_io

import testlib as tl
from tf_objckpt import checkpoint_management as ours

START = 1_700_000_000.0
HOUR = 3600.


@pytest.fixture
def clock(monkeypatch):
  """Freezes time.time(); tests move it by setting `clock.now`."""
  c = types.SimpleNamespace(now=START)
  monkeypatch.setattr(time, "time", lambda: c.now)
  return c


def _normalize(value, directory):
  if isinstance(value, bytes):
    value = value.decode()
  if isinstance(value, str):
    return value.replace(directory, "<dir>")
  if isinstance(value, (list, tuple)):
    return [_normalize(v, directory) for v in value]
  if isinstance(value, dict):
    return {k: _normalize(v, directory) for k, v in value.items()}
  return value


def _snapshot(directory):
  """Files under `directory` and the state file's text."""
  files = tl.files_under(directory)
  state = os.path.join(directory, "checkpoint")
  text = open(state).read() if os.path.exists(state) else None
  return {"files": files, "state": text}


def _observe(mod, manager, directory, result):
  return {
      "result": result,
      "checkpoints": manager.checkpoints,
      "latest": manager.latest_checkpoint,
      "module_latest": mod.latest_checkpoint(directory),
      **_snapshot(directory)
  }


def _run_both_modules(tmp_path, clock, scenario, relative=False):
  """Runs `scenario(mod, directory)` for both modules; returns observations.

  Both must observe the same.
  """
  results = _observations_by_module(tmp_path, clock, scenario, relative)
  assert results["tf"] == results["ours"]
  return results["ours"]


def _observations_by_module(tmp_path, clock, scenario, relative=False):
  """`{impl: observations}` of `scenario(mod, directory)` for both modules."""
  results = {}
  for name, lib in tl.IMPLS.items():
    mod = lib.checkpoint_management
    clock.now = START
    base = tmp_path / name
    base.mkdir()
    if relative:
      old = os.getcwd()
      os.chdir(base)
      try:
        results[name] = _normalize(scenario(mod, os.path.join("rel", "ck")),
                                   str(base))
      finally:
        os.chdir(old)
    else:
      directory = str(base / "ck")
      results[name] = _normalize(scenario(mod, directory), directory)
  return results


def _new_checkpoint(value=1.):
  return tf.train.Checkpoint(v=tf.Variable(value))


def _save_n(mod, manager, directory, clock, n, step=10., **kwargs):
  out = []
  for _ in range(n):
    clock.now += step
    out.append(_observe(mod, manager, directory, manager.save(**kwargs)))
  return out


def test_max_to_keep_deletes_oldest(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=3)
    return _save_n(mod, m, d, clock, 6)

  obs = _run_both_modules(tmp_path, clock, scenario)
  last = obs[-1]
  assert last["checkpoints"] == ["<dir>/ckpt-4", "<dir>/ckpt-5", "<dir>/ckpt-6"]
  assert "ckpt-1.index" not in last["files"]
  assert 'model_checkpoint_path: "ckpt-6"' in last["state"]


def test_max_to_keep_none_keeps_everything(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=None)
    return _save_n(mod, m, d, clock, 5)

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert len(obs[-1]["checkpoints"]) == 5


def test_keep_checkpoint_every_n_hours(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=2,
                              keep_checkpoint_every_n_hours=1)
    out = _save_n(mod, m, d, clock, 10, step=HOUR / 3)
    # A new manager resumes the bookkeeping from the state file.
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=2,
                              keep_checkpoint_every_n_hours=1)
    out.append(_observe(mod, m, d, None))
    return out + _save_n(mod, m, d, clock, 5, step=HOUR / 2)

  obs = _run_both_modules(tmp_path, clock, scenario)
  kept = [f for f in obs[-1]["files"] if f.endswith(".index")]
  assert len(kept) > 2  # Some were preserved beyond max_to_keep.
  assert len(obs[-1]["checkpoints"]) == 2


def test_recovery_with_new_settings(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=5)
    out = _save_n(mod, m, d, clock, 4)
    clock.now += 5.
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=2)
    out.append(_observe(mod, m, d, None))
    return out + _save_n(mod, m, d, clock, 2)

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert len(obs[4]["checkpoints"]) == 4
  assert obs[-1]["checkpoints"] == ["<dir>/ckpt-1", "<dir>/ckpt-2"]


def test_recovery_when_clock_went_backwards(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=2,
                              keep_checkpoint_every_n_hours=0.001)
    out = _save_n(mod, m, d, clock, 4)
    clock.now = START - 1000.
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=2,
                              keep_checkpoint_every_n_hours=0.001)
    out.append(_observe(mod, m, d, None))
    return out + _save_n(mod, m, d, clock, 3)

  obs = _run_both_modules(tmp_path, clock, scenario)
  # The new checkpoint object numbers from 1 again, over the old files.
  assert obs[-1]["checkpoints"] == ["<dir>/ckpt-2", "<dir>/ckpt-3"]
  assert "ckpt-4.index" in obs[-1]["files"]


def test_recovery_from_state_without_timestamps(tmp_path, clock):

  def scenario(mod, d):
    ckpt = _new_checkpoint()
    paths = [ckpt.write(os.path.join(d, "old-%d" % i)) for i in range(3)]
    mod.update_checkpoint_state(d, paths[-1], all_model_checkpoint_paths=paths)
    m = mod.CheckpointManager(ckpt, d, max_to_keep=1)
    out = [_observe(mod, m, d, None)]
    return out + _save_n(mod, m, d, clock, 2)

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert obs[-1]["checkpoints"] == ["<dir>/ckpt-2"]
  assert "ckpt-1.index" not in obs[-1]["files"]
  assert "old-2.index" in obs[-1]["files"]


def test_checkpoint_numbers(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=3)
    step = tf.Variable(7, dtype=tf.int64)
    out = []
    for number in (100, step, tf.constant(5), 100, 3):
      clock.now += 1.
      out.append(_observe(mod, m, d, m.save(checkpoint_number=number)))
    out.append(int(m.checkpoint.save_counter.numpy()))
    out.append(int(step.numpy()))
    return out

  obs = _run_both_modules(tmp_path, clock, scenario)
  # Rewriting ckpt-100 moved it to the end of the queue.
  assert obs[4]["checkpoints"] == [
      "<dir>/ckpt-5", "<dir>/ckpt-100", "<dir>/ckpt-3"
  ]
  assert obs[-2:] == [5, 7]


def test_checkpoint_interval(tmp_path, clock):

  def scenario(mod, d):
    step = tf.Variable(0, dtype=tf.int64)
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=None,
                              step_counter=step,
                              checkpoint_interval=3)
    out = [m.checkpoint_interval]
    for s, check in [(0, True), (0, True), (1, True), (2, False), (2, False),
                     (4, True), (5, True), (7, True), (8, True)]:
      step.assign(s)
      clock.now += 1.
      out.append(_observe(mod, m, d, m.save(check_interval=check)))
    return out

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert [o["result"] for o in obs[1:]] == [
      "<dir>/ckpt-1", None, None, "<dir>/ckpt-2", None, None, "<dir>/ckpt-3",
      None, "<dir>/ckpt-4"
  ]


def test_last_checkpoint_step(tmp_path, clock):

  def scenario(mod, d):
    step = tf.Variable(4, dtype=tf.int64)
    m = mod.CheckpointManager(_new_checkpoint(),
                              d,
                              max_to_keep=2,
                              step_counter=step,
                              checkpoint_interval=5,
                              last_checkpoint_step=2)
    out = [m.save()]
    step.assign(7)
    return out + [m.save()]

  if "last_checkpoint_step" in inspect.signature(
      tf_cm.CheckpointManager).parameters:
    observed = _run_both_modules(tmp_path, clock, scenario)
    assert observed == [None, "<dir>/ckpt-1"]
  else:  # Older TensorFlows lack the argument; ours has it on every version.
    assert tl.outcome(scenario, tf_cm, str(tmp_path / "tf")).name == "TypeError"
    directory = str(tmp_path / "ours")
    assert _normalize(scenario(ours, directory),
                      directory) == [None, "<dir>/ckpt-1"]


def test_restore_or_initialize(tmp_path, clock):

  def scenario(mod, d):
    calls = []
    ckpt = _new_checkpoint(1.)
    step = tf.Variable(3, dtype=tf.int64)
    kwargs = dict(max_to_keep=2,
                  step_counter=step,
                  checkpoint_interval=2,
                  init_fn=lambda: calls.append(1))
    m = mod.CheckpointManager(ckpt, d, **kwargs)
    out = [m.restore_or_initialize(), list(calls)]
    out.append(m.save())
    ckpt.v.assign(42.)
    step.assign(9)
    out.append(m.save(check_interval=False))
    ckpt.v.assign(-1.)
    m = mod.CheckpointManager(ckpt, d, **kwargs)
    out += [m.restore_or_initialize(), float(ckpt.v.numpy()), list(calls)]
    step.assign(10)
    out.append(m.save())  # Within the interval of the restored step 9.
    m = mod.CheckpointManager(ckpt, os.path.join(d, "empty"), max_to_keep=1)
    out.append(m.restore_or_initialize())  # No init_fn: nothing happens.
    return out

  assert _run_both_modules(tmp_path, clock, scenario) == [
      None, [1], "<dir>/ckpt-1", "<dir>/ckpt-2", "<dir>/ckpt-2", 42., [1], None,
      None
  ]


def test_relative_directory(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=2)
    out = [m.directory] + _save_n(mod, m, d, clock, 3)
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=2)
    out.append(_observe(mod, m, d, None))
    state = mod.get_checkpoint_state(d)
    out.append(
        [state.model_checkpoint_path,
         list(state.all_model_checkpoint_paths)])
    return out

  obs = _run_both_modules(tmp_path, clock, scenario, relative=True)
  assert obs[-1] == ["rel/ck/ckpt-3", ["rel/ck/ckpt-2", "rel/ck/ckpt-3"]]
  assert 'all_model_checkpoint_paths: "ckpt-2"' in obs[-2]["state"]


def test_pathlike_directory_and_checkpoint_name(tmp_path, clock):

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(),
                              pathlib.Path(d),
                              max_to_keep=1,
                              checkpoint_name="model")
    out = [m.directory, m._prefix] + _save_n(mod, m, d, clock, 2)
    state = mod.get_checkpoint_state(pathlib.Path(d))
    return out + [state.model_checkpoint_path]

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert obs[:2] == ["<dir>", "<dir>/model"]


def test_save_options_and_async_sync(tmp_path, clock):

  def scenario(mod, d):
    seen = []
    ckpt = _new_checkpoint()
    m = mod.CheckpointManager(ckpt, d, max_to_keep=2)
    opts = tf.train.CheckpointOptions(
        experimental_write_callbacks=[lambda path: seen.append(path)])
    out = _save_n(mod, m, d, clock, 1, options=opts)
    opts = tf.train.CheckpointOptions(experimental_enable_async_checkpoint=True)
    for _ in range(3):
      clock.now += 1.
      out.append(m.save(options=opts))
    m.sync()
    out.append(_observe(mod, m, d, None))
    return out + [seen]

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert obs[-1] == ["<dir>/ckpt-1"]
  assert obs[-2]["checkpoints"] == ["<dir>/ckpt-3", "<dir>/ckpt-4"]


class _DuckCheckpoint(object):
  """A checkpoint object with only `save_counter`, `write` and `restore`."""

  def __init__(self):
    self._inner = _new_checkpoint()
    self.writes = []

  @property
  def save_counter(self):
    return self._inner.save_counter

  def write(self, file_prefix):
    self.writes.append(file_prefix)
    return self._inner.write(file_prefix)

  def restore(self, save_path):
    return self._inner.restore(save_path)


class _DuckWithOptions(_DuckCheckpoint):
  """Takes `options` in `write` but never runs their callbacks."""

  def write(self, file_prefix, options=None):
    self.writes.append(options)
    return self._inner.write(file_prefix)


@pytest.mark.parametrize("duck", [_DuckCheckpoint, _DuckWithOptions])
def test_any_checkpoint_object(tmp_path, clock, duck):

  def scenario(mod, d):
    if mod is ours:
      m = ours.CheckpointManager(duck(), d, max_to_keep=2)
    else:
      m = tf_cm.CheckpointManager(_new_checkpoint(), d, max_to_keep=2)
    out = _save_n(mod, m, d, clock, 3)
    m.sync()
    return out + [m.restore_or_initialize()]

  _run_both_modules(tmp_path, clock, scenario)
  if duck is _DuckCheckpoint:
    obj = duck()
    m = ours.CheckpointManager(obj, str(tmp_path / "duck"), max_to_keep=1)
    m.save()
    assert obj.writes == [str(tmp_path / "duck" / "ckpt-1")]
    with pytest.raises(TypeError):
      m.save(options=tf.train.CheckpointOptions())


def test_state_recorded_before_deleting(tmp_path, clock, monkeypatch):
  """If deleting old checkpoints fails, the new one is already recorded.

  Ours has already dropped the old one from the state file (so that a kill
  while deleting never leaves it listed without its files); TensorFlow's
  lists it until its second write of the state file.
  """

  def scenario(mod, d):
    m = mod.CheckpointManager(_new_checkpoint(), d, max_to_keep=1)
    out = _save_n(mod, m, d, clock, 1)

    def broken_delete(path):
      raise tf.errors.PermissionDeniedError(None, None, "read-only " + path)

    with monkeypatch.context() as patch:
      patch.setattr(file_io, "delete_file", broken_delete)
      out.append(tl.outcome(m.save).name)
    return out + [_observe(mod, m, d, None)]

  results = _observations_by_module(tmp_path, clock, scenario)
  for impl, listed in (("tf", ["ckpt-1", "ckpt-2"]), ("ours", ["ckpt-2"])):
    obs = results[impl]
    assert obs[1] == "PermissionDeniedError"
    assert 'model_checkpoint_path: "ckpt-2"' in obs[2]["state"]
    assert re.findall(r'all_model_checkpoint_paths: "(.*)"',
                      obs[2]["state"]) == listed
    assert "ckpt-1.index" in obs[2]["files"]  # Not deleted.
  for obs in results.values():
    del obs[2]["state"]
  assert results["tf"] == results["ours"]


def test_tf_objckpt_checkpoint_object(tmp_path, clock):

  def scenario(mod, d):
    if mod is ours:
      ckpt = tl.IMPLS["ours"].Checkpoint(v=tf.Variable(1.))
    else:
      ckpt = _new_checkpoint()
    m = mod.CheckpointManager(ckpt, d, max_to_keep=2)
    out = _save_n(mod, m, d, clock, 3)
    ckpt.v.assign(5.)
    return out + [m.restore_or_initialize(), float(ckpt.v.numpy())]

  assert _run_both_modules(tmp_path, clock, scenario)[-1] == 1.


def test_interleaving_with_tensorflow_manager(tmp_path, clock):
  """TF's and our managers take turns in one directory as TF alone would."""

  def scenario(mod, d):
    ckpt = _new_checkpoint()
    out = []
    for managers in (tf_cm, mod, tf_cm, mod):
      m = managers.CheckpointManager(ckpt,
                                     d,
                                     max_to_keep=3,
                                     keep_checkpoint_every_n_hours=1)
      out += _save_n(managers, m, d, clock, 2, step=HOUR / 3)
    return out

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert obs[-1]["checkpoints"] == [
      "<dir>/ckpt-6", "<dir>/ckpt-7", "<dir>/ckpt-8"
  ]
  assert "ckpt-3.index" in obs[-1]["files"]  # Kept: an hour had passed.


def _differential(tmp_path, body):
  results = {}
  for name, lib in tl.IMPLS.items():
    d = tmp_path / name
    d.mkdir()
    results[name] = _normalize(body(lib.checkpoint_management, str(d)), str(d))
  assert results["tf"] == results["ours"]
  return results["ours"]


def test_constructor_errors():
  for kwargs in (dict(max_to_keep=0), dict(max_to_keep=-3),
                 dict(max_to_keep=1, checkpoint_interval=2)):
    got = [
        tl.outcome(lib.CheckpointManager, _new_checkpoint(), "/nonexistent",
                   **kwargs).name for lib in tl.IMPLS.values()
    ]
    assert got == ["ValueError", "ValueError"]


def test_generate_checkpoint_state_proto(tmp_path):

  def body(mod, d):
    out = []
    for save_dir in (d, "rel/dir"):
      for paths in (None, [], ["rel/dir/a", "/abs/b"], ["x", "rel/dir/y"]):
        proto = mod.generate_checkpoint_state_proto(
            save_dir,
            "rel/dir/y",
            all_model_checkpoint_paths=paths,
            last_preserved_timestamp=3.5)
        out.append(str(proto))
    out.append(
        str(
            mod.generate_checkpoint_state_proto(
                d, "b", ["a", "b"], all_model_checkpoint_timestamps=[1., 2.])))
    out.append(
        tl.outcome(mod.generate_checkpoint_state_proto,
                   d,
                   "c", ["a", "b"],
                   all_model_checkpoint_timestamps=[1.]).name)
    return out

  assert _differential(tmp_path, body)[-1] == "ValueError"


def test_paths_list_argument_is_updated_in_place(tmp_path):
  """TensorFlow appends the latest path to (and relativizes) the caller's
  list, except when it writes relative paths."""

  def body(mod, d):
    out = []
    given = ["rel/dir/a"]
    mod.generate_checkpoint_state_proto("rel/dir", "rel/dir/b", given)
    out.append(list(given))
    given = [os.path.join(d, "a")]
    mod.update_checkpoint_state(d, os.path.join(d, "b"), given)
    out.append(list(given))
    given = [os.path.join(d, "a")]
    mod.update_checkpoint_state_internal(d,
                                         os.path.join(d, "c"),
                                         given,
                                         save_relative_paths=True)
    out.append(list(given))
    return out

  out = _differential(tmp_path, body)
  assert out[0] == ["a", "b"]
  assert out[1] == ["<dir>/a", "<dir>/b"]


def test_update_and_get_checkpoint_state(tmp_path):

  def body(mod, d):
    out = []
    m1, m2 = os.path.join(d, "m-1"), os.path.join(d, "m-2")
    mod.update_checkpoint_state(d, m2, [m1, m2])
    out.append(_snapshot(d))
    out.append(str(mod.get_checkpoint_state(d)))
    mod.update_checkpoint_state_internal(
        d,
        os.path.join(d, "m-3"), [os.path.join(d, "m-1"), "/abs/m-2"],
        latest_filename="other",
        save_relative_paths=True,
        all_model_checkpoint_timestamps=[1., 2., 3.],
        last_preserved_timestamp=0.5)
    out.append(_snapshot(d))
    out.append(str(mod.get_checkpoint_state(d, latest_filename="other")))
    for call in (
        lambda: mod.update_checkpoint_state(d, os.path.join(d, "checkpoint")),
        lambda: mod.update_checkpoint_state_internal(
            d, "checkpoint", [], save_relative_paths=True),
        lambda: mod.get_checkpoint_state(d, latest_filename="none")):
      result = tl.outcome(call)
      out.append([result.name, result.result])
    return out

  out = _differential(tmp_path, body)
  assert out[-3][0] == "RuntimeError"
  assert out[-2][0] == "ok"  # Only an exact path match conflicts.
  assert out[-1] == ["ok", None]


@pytest.mark.parametrize("content,expected", [
    ("this is { not a proto", ("ok", None)),
    ('all_model_checkpoint_paths: "a"\n', ("ValueError", None)),
    ("", ("ValueError", None)),
    ('model_checkpoint_path: "x"\nmodel_checkpoint_path: "y"\n',
     ("ok", 'model_checkpoint_path: "<dir>/y"\n')),
])
def test_get_checkpoint_state_bad_files(tmp_path, content, expected):

  def body(mod, d):
    with open(os.path.join(d, "checkpoint"), "w") as f:
      f.write(content)
    result = tl.outcome(mod.get_checkpoint_state, d)
    kind, value = result.name, result.result
    out = (kind, str(value) if kind == "ok" and value is not None else value)
    return [out, mod.latest_checkpoint(d) if kind == "ok" else None]

  assert tuple(_differential(tmp_path, body)[0]) == expected


def test_checkpoint_files_v1_v2(tmp_path):

  def body(mod, d):
    ckpt = _new_checkpoint()
    v2 = ckpt.write(os.path.join(d, "v2"))
    v1 = os.path.join(d, "v1")
    open(v1, "w").close()
    for prefix in (v1, v2):
      open(prefix + ".meta", "w").close()
    open(os.path.join(d, "shard.meta"), "w").close()
    out = [mod.latest_checkpoint(d)]
    for latest in (v1, v2, os.path.join(d, "gone")):
      mod.update_checkpoint_state(d, latest)
      out.append(mod.latest_checkpoint(d))
    out.append([mod.checkpoint_exists(p) for p in (v1, v2, d + "/gone")])
    out.append([mod.checkpoint_exists_internal(p) for p in (v1, v2)])
    out.append(len(mod.get_checkpoint_mtimes([v1, d + "/gone", v2])))
    mod.remove_checkpoint(v1, saver_pb2.SaverDef.V1)
    mod.remove_checkpoint(v2)
    mod.remove_checkpoint(os.path.join(d, "shard-00001-of-00002"),
                          meta_graph_suffix="meta")
    out.append(_snapshot(d))
    return out

  out = _differential(tmp_path, body)
  assert out[:4] == [None, "<dir>/v1", "<dir>/v2", None]
  assert out[-1]["files"] == ["checkpoint"]


def test_get_checkpoint_mtimes_values(tmp_path):
  ckpt = _new_checkpoint()
  prefix = ckpt.write(str(tmp_path / "m"))
  expected = tf_cm.get_checkpoint_mtimes([prefix])
  assert ours.get_checkpoint_mtimes([prefix]) == expected
  assert abs(expected[0] - os.stat(prefix + ".index").st_mtime) < 1.01


@pytest.mark.parametrize("name", [
    "model.ckpt", "model.ckpt-123456-?????-of-00005",
    "model.ckpt-123456-00001-of-00002", "a-1-of-2-of-3", "x-of-2"
])
@pytest.mark.parametrize("suffix", ["meta", "txt"])
def test_meta_graph_filename(name, suffix):
  assert (ours.meta_graph_filename(name, suffix) == tf_cm.meta_graph_filename(
      name, suffix))


def test_state_file_write_is_atomic_on_failure(tmp_path, monkeypatch):
  """A write that dies half-way leaves the previous state file intact."""
  d = str(tmp_path)
  ours.update_checkpoint_state(d, os.path.join(d, "first"))
  before = _snapshot(d)
  real_write = file_io.FileIO.write

  def half_write(self, content):
    real_write(self, content[:len(content) // 2])
    raise tf.errors.UnavailableError(None, None, "disk went away")

  monkeypatch.setattr(file_io.FileIO, "write", half_write)
  with pytest.raises(tf.errors.UnavailableError):
    ours.update_checkpoint_state(d, os.path.join(d, "second"),
                                 [os.path.join(d, "first")])
  monkeypatch.undo()
  assert _snapshot(d) == before  # Same text, and no temporary file left.
  assert ours.latest_checkpoint(d) is None  # "first" has no files.
  assert ours.get_checkpoint_state(d).model_checkpoint_path.endswith("first")


def test_state_file_never_seen_partial(tmp_path):
  """A concurrent reader only ever sees complete state files."""
  d = str(tmp_path)
  paths = [os.path.join(d, "ckpt-%d" % i) for i in range(50)]
  ours.update_checkpoint_state(d, paths[0])
  stop = threading.Event()
  seen = []

  def reader():
    while not stop.is_set():
      seen.append(open(os.path.join(d, "checkpoint")).read())

  thread = threading.Thread(target=reader)
  thread.start()
  try:
    for _ in range(10):
      for i in range(1, len(paths)):
        ours.update_checkpoint_state(d, paths[i], paths[:i + 1])
  finally:
    stop.set()
    thread.join()
  assert len(seen) > 10
  for text in seen:
    assert text.startswith('model_checkpoint_path: "')
    assert text.endswith('"\n')
    assert text.count("all_model_checkpoint_paths") >= 1


def test_graph_mode_with_session(tmp_path, clock):

  def scenario(mod, d):
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
      v = tf.Variable(1.)
      step = tf.Variable(0, dtype=tf.int64)
      sess.run([v.initializer, step.initializer])
      ckpt = tf.compat.v1.train.Checkpoint(v=v)
      m = mod.CheckpointManager(ckpt,
                                d,
                                max_to_keep=2,
                                step_counter=step,
                                checkpoint_interval=1)
      out = []
      for i in range(3):
        sess.run(step.assign(i))
        clock.now += 1.
        out.append(_observe(mod, m, d, m.save()))
      out.append(_observe(mod, m, d, m.save(checkpoint_number=step)))
      step.load(5, sess)
      out.append(_observe(mod, m, d, m.save(checkpoint_number=step)))
      out.append(m.restore_or_initialize())
      return out + [int(sess.run(ckpt.save_counter))]

  obs = _run_both_modules(tmp_path, clock, scenario)
  assert [o["result"] for o in obs[:5]] == [
      "<dir>/ckpt-1", "<dir>/ckpt-2", "<dir>/ckpt-3", None, "<dir>/ckpt-5"
  ]
  assert obs[-2:] == ["<dir>/ckpt-5", 4]
