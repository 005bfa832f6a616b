"""Ops added by running restore ops, and the frozen saver's API, against TF.

TensorFlow's `restore()` builds the restore ops; running them
(`run_restore_ops`, `initialize_or_restore`, `streaming_restore`) adds no op
to the graph. No step of ours may add more ops than the same step adds with
`tf.compat.v1.train.Checkpoint`.

Covers: tf_objckpt.api.load_status, tf_objckpt.api.trackable_saver,
tf_objckpt.checkpoint, tf_objckpt.api.object_checkpoints.
"""

import os

import pytest
import tensorflow as tf

import testlib as tl


def _growth_of_running(impl, directory, run):
  """Ops added by `run(lib, status, session)` after restore() built ops.

  Two checkpoints hold `a` = 1 and 2; before each restore `a` is set to -1,
  and the restores go to the first, the second, then the first again, so
  restore ops that run nothing, or read the path of an earlier restore,
  leave `a` wrong.

  Returns:
    The ops each run added, and the value of `a` after each.
  """
  with tl.GraphProgram(impl) as program:
    root = program.lib.AutoTrackable()
    root.a = tf.compat.v1.get_variable("a", initializer=1.)
    checkpoint = program.lib.CheckpointV1(root=root)
    checkpoint.restore(None).initialize_or_restore(program.session)
    paths = []
    for value in (1., 2.):
      program.run(root.a.assign(value))
      paths.append(
          checkpoint.save(os.path.join(directory, impl, "ckpt"),
                          session=program.session))
    forget = root.a.assign(-1.)
    growth, restored = [], []
    for path in (paths[0], paths[1], paths[0]):
      program.run(forget)
      status = checkpoint.restore(path)
      before = program.num_ops()
      run(program.lib, status, program.session)
      growth.append(program.num_ops() - before)
      restored.append(float(program.run(root.a)))
    return growth, restored


_RUNS = {
    "run_restore_ops":
        lambda _, status, session: status.run_restore_ops(session),
    "initialize_or_restore":
        (lambda _, status, session: status.initialize_or_restore(session)),
    "streaming_restore": (lambda lib, status, session: lib.checkpoint.
                          streaming_restore(status, session)),
}


@pytest.mark.parametrize("run", sorted(_RUNS))
def test_running_restore_ops_adds_no_ops(tmp_path, run):
  """Running restores each checkpoint's values, and adds no op."""
  theirs, restored = _growth_of_running("tf", tmp_path, _RUNS[run])
  assert theirs == [0, 0, 0]
  assert restored == [1., 2., 1.]
  ours, restored = _growth_of_running("ours", tmp_path, _RUNS[run])
  assert ours == [0, 0, 0]
  assert restored == [1., 2., 1.]


def test_running_deferred_restores_adds_no_ops(tmp_path):
  """Restore ops created after restore() run without adding ops either."""
  growth = {}
  for impl in tl.IMPLS:
    path = tl.write_in_graph(impl, os.path.join(tmp_path, impl, "ckpt"), a=5.)
    with tl.GraphProgram(impl) as program:
      root = program.lib.AutoTrackable()
      status = program.lib.CheckpointV1(root=root).restore(path)
      growth[impl] = []
      for step in ("nothing to restore yet", "restore `a`"):
        if step == "restore `a`":
          root.a = tf.compat.v1.get_variable("a", initializer=1.)
        before = program.num_ops()
        status.run_restore_ops(program.session)
        growth[impl].append(program.num_ops() - before)
      assert program.run(root.a) == 5.
  assert growth["tf"] == [0, 0]
  assert growth["ours"] == growth["tf"]


def test_frozen_saver_api_matches_tensorflows(tmp_path):
  """save()/restore() take `options`; save() gives an op, as TF's does."""
  observed = {}
  for impl in tl.IMPLS:
    with tl.GraphProgram(impl) as program:
      root = program.lib.AutoTrackable()
      root.v = tf.compat.v1.get_variable("v", initializer=1.)
      program.run(root.v.initializer)
      saver = program.lib.checkpoint.frozen_saver(
          program.lib.CheckpointV1(root=root))
      prefix = os.path.join(tmp_path, impl)
      options = tf.train.CheckpointOptions()
      save = saver.save(prefix, options=options)
      result = program.run(save)
      restored = saver.restore(prefix, options=options)
      observed[impl] = (type(save).__name__, result, sorted(restored))
  assert observed["tf"][:2] == ("Operation", None)
  assert observed["ours"] == observed["tf"]
