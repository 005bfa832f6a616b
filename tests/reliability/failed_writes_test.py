"""Saves that fail half-way leave the directory as it was before them.

The fault is real: a child process limits the size of the files it may
write (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored), so a write past the limit
fails with `EFBIG`, which TensorFlow reports as `OutOfRangeError`. In each
scenario a small save succeeds, then a larger one fails: in a data file,
in the index (many long names, tiny values), or in the state file (a
manager listing many long names). Both libraries raise the same error and
keep the first checkpoint. We also leave the directory and the state file
byte for byte as they were; TensorFlow leaves what is pinned below.
"""

import json
import os
import re
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_LIMIT = 100_000  # Bytes a file of the child may hold.

_SCRIPT = textwrap.dedent("""
    import json, os, resource, signal, sys
    import tensorflow as tf
    import testlib as tl

    impl, root, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lib = tl.IMPLS[impl]
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    SMALL, BIG = 1000, limit  # Floats: 4 KB, then four times the limit.

    def snapshot(directory):
      state = os.path.join(directory, "checkpoint")
      return {"files": sorted(os.listdir(directory)),
              "state": open(state).read() if os.path.exists(state) else None}

    def eager(directory, how):
      checkpoint = lib.Checkpoint(v=tf.Variable(tf.ones([SMALL])))
      manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=1)
      def save(number):
        if how == "save":
          checkpoint.save(os.path.join(directory, "ckpt"))
        elif how == "write":
          checkpoint.write(os.path.join(directory, f"ckpt-{number}"))
        else:
          manager.save()
      save(1)
      checkpoint.big = tf.Variable(tf.ones([BIG]))
      return lambda: save(2)

    def manager_state(directory):
      # Long names make the state file larger than the checkpoints; with a
      # limit just above its size, the next save fails at the state file,
      # after its checkpoint is complete.
      checkpoint = lib.Checkpoint(v=tf.Variable(1.))
      manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=None,
                                      checkpoint_name="c" * 200)
      for _ in range(3):
        manager.save()
      def save():
        size = os.path.getsize(os.path.join(directory, "checkpoint"))
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, limit))
        manager.save()
      return save

    def saver(directory, sharded=False, index=False):
      config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
      def save(step, big):
        with tf.Graph().as_default():
          if index:  # Many long names: a small data file, a large index.
            for i in range(2000 if big else 10):
              tf.compat.v1.get_variable("%05d_%s" % (i, "x" * 150),
                                        initializer=1.)
          else:
            with tf.device("/cpu:0"):
              tf.compat.v1.get_variable("a", initializer=tf.ones([SMALL]))
              if big:
                tf.compat.v1.get_variable("c", initializer=tf.ones([BIG]))
            with tf.device("/cpu:1"):
              tf.compat.v1.get_variable("b", initializer=tf.ones([SMALL]))
          saver = lib.Saver(sharded=sharded, max_to_keep=1)
          if big:
            saver.set_last_checkpoints_with_time(
                [(os.path.join(directory, "model-1"), 0.)])
          with tf.compat.v1.Session(config=config) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(directory, "model"),
                       global_step=step)
      save(1, big=False)
      return lambda: save(2, big=True)

    scenarios = {
        "checkpoint_save": lambda d: eager(d, "save"),
        "checkpoint_write": lambda d: eager(d, "write"),
        "manager_save": lambda d: eager(d, "manager"),
        "manager_state_file": manager_state,
        "saver": saver,
        "saver_sharded": lambda d: saver(d, sharded=True),
        "saver_index": lambda d: saver(d, index=True),
    }
    results = {}
    for name, scenario in scenarios.items():
      directory = os.path.join(root, name)
      os.makedirs(directory)
      failing_save = scenario(directory)
      before = snapshot(directory)
      try:
        failing_save()
        error = None
      except Exception as e:
        error = type(e).__name__
      resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
      results[name] = {"error": error, "before": before,
                       "after": snapshot(directory)}
    print("RESULTS", json.dumps(results))
""")

# What TensorFlow leaves after the failed save, beside what was there.
_TF_LEFTOVERS = {
    "checkpoint_save": ["ckpt-2_temp"],
    "checkpoint_write": ["ckpt-2_temp"],
    "manager_save": ["ckpt-2_temp"],
    # A complete checkpoint the state file does not list, and the state
    # file's temporary copy.
    "manager_state_file": ["<name>.data-00000-of-00001", "<name>.index",
                           "checkpoint.tmp<hex>"],
    "saver": [],  # SaveV2 removes its temporary file.
    "saver_sharded": ["model-2_temp"],
    "saver_index": ["model-2.data-00000-of-00001"],  # Without its index.
}


def _normalized(names, before):
  """The names not in `before`, with numbers and hex digits that vary out."""
  new = sorted(set(names) - set(before))
  return [re.sub(r"c{200}-\d+", "<name>",
                 re.sub(r"\.tmp[0-9a-f]{32}$", ".tmp<hex>", name))
          for name in new]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
  """What each library's failed saves did, by library and scenario."""
  found = {}
  for impl in tl.IMPLS:
    root = tmp_path_factory.mktemp(impl)
    result = tl.run_python(_SCRIPT, impl, root, _LIMIT)
    assert result.returncode == 0, result.stderr[-3000:]
    line, = [line for line in result.stdout.splitlines()
             if line.startswith("RESULTS ")]
    found[impl] = (root, json.loads(line.split(" ", 1)[1]))
  return found


@pytest.mark.parametrize("scenario", sorted(_TF_LEFTOVERS))
def test_failed_save_leaves_the_directory_as_it_was(results, scenario):
  outcomes = {impl: results[impl][1][scenario] for impl in tl.IMPLS}
  assert outcomes["tf"]["error"] == outcomes["ours"]["error"] == (
      "OutOfRangeError")
  ours, theirs = outcomes["ours"], outcomes["tf"]
  assert ours["after"] == ours["before"]
  assert theirs["after"]["state"] == theirs["before"]["state"]
  assert _normalized(theirs["after"]["files"],
                     theirs["before"]["files"]) == _TF_LEFTOVERS[scenario]
  assert set(theirs["before"]["files"]) <= set(theirs["after"]["files"])
  for impl in tl.IMPLS:  # The previous checkpoint still restores.
    directory = os.path.join(results[impl][0], scenario)
    latest = (tf.train.latest_checkpoint(directory) or
              os.path.join(directory, "ckpt-1"))  # write() lists nothing.
    reader = tf.train.load_checkpoint(latest)
    for key in reader.get_variable_to_shape_map():
      value = reader.get_tensor(key)
      if key not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/"
                     ".ATTRIBUTES/VARIABLE_VALUE"):
        np.testing.assert_array_equal(value, np.ones_like(value))


def _save_with_blocked_state_file(impl, directory):
  """Saves where the state file's name is taken by a directory.

  Returns:
    `{how: (error type name, new files)}`; the v1 `Saver` also gives its
    list of kept checkpoints.
  """
  lib = tl.IMPLS[impl]
  found = {}
  for how in ("checkpoint_save", "manager_save", "saver"):
    subdirectory = os.path.join(directory, how)
    os.makedirs(os.path.join(subdirectory, "checkpoint"))
    before = set(os.listdir(subdirectory))
    extra = None
    if how == "saver":
      with tf.Graph().as_default():
        tf.compat.v1.get_variable("a", initializer=tf.ones([3]))
        saver = lib.Saver()
        with tf.compat.v1.Session() as sess:
          sess.run(tf.compat.v1.global_variables_initializer())
          error = tl.outcome(saver.save, sess,
                             os.path.join(subdirectory, "model"),
                             global_step=1).error
          extra = saver.last_checkpoints
    else:
      checkpoint = lib.Checkpoint(v=tf.Variable(1.))
      if how == "checkpoint_save":
        error = tl.outcome(checkpoint.save,
                           os.path.join(subdirectory, "ckpt")).error
      else:
        manager = lib.CheckpointManager(checkpoint, subdirectory,
                                        max_to_keep=1)
        error = tl.outcome(manager.save).error
        extra = manager.checkpoints
    found[how] = (type(error).__name__,
                  sorted(set(os.listdir(subdirectory)) - before), extra)
  return found


def test_state_file_that_cannot_be_replaced(tmp_path):
  found = {impl: _save_with_blocked_state_file(impl, str(tmp_path / impl))
           for impl in tl.IMPLS}
  for how in found["ours"]:
    assert found["ours"][how][0] == found["tf"][how][0] != "NoneType"
    assert found["ours"][how][1] == []  # Nothing new, and nothing listed.
    assert not found["ours"][how][2]
  # TensorFlow leaves a complete checkpoint no state file lists, and keeps
  # it in its lists.
  assert found["tf"]["checkpoint_save"][1] == [
      "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
  assert found["tf"]["manager_save"][1:] == (
      ["ckpt-1.data-00000-of-00001", "ckpt-1.index"],
      [os.path.join(str(tmp_path / "tf"), "manager_save", "ckpt-1")])
  assert found["tf"]["saver"][1:] == (
      ["model-1.data-00000-of-00001", "model-1.index"],
      [os.path.join(str(tmp_path / "tf"), "saver", "model-1")])
