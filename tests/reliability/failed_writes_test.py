"""Saves that fail half-way leave the directory as it was before them.

The faults are real, made in child processes:
- a full disk: each scenario saves into a small `tmpfs` of its own,
  mounted in a private mount namespace (`unshare`), so a write fails with
  `ENOSPC`, which TensorFlow reports as `ResourceExhaustedError`;
- a file size limit (`RLIMIT_FSIZE`, with `SIGXFSZ` ignored), so a write
  fails with `EFBIG`, reported as `OutOfRangeError`;
- a process without root's rights saving into a directory it may no
  longer write: `PermissionDeniedError`.
In each scenario a small save succeeds, then a larger one fails: in a data
file, in the index (many long names, tiny values), in the v1 `Saver`'s meta
graph (a large constant, small values), or in the state file (a manager
listing many long names). Both libraries raise the same error and
keep the first checkpoint. We also leave the directory and the state file
byte for byte as they were; TensorFlow leaves what is pinned below.

Covers: tf_objckpt.engine.commit, tf_objckpt.engine.state_file,
tf_objckpt.saver, tf_objckpt.v1.name_based_saver,
tf_objckpt.engine.save_errors, tf_objckpt.engine.local_paths.
"""

import json
import os
import re
import tempfile
import textwrap

import pytest
import tensorflow as tf

import testlib as tl

_LIMIT = 100_000  # Bytes a file of the child may hold.

_SCRIPT = textwrap.dedent("""
    import json, os, resource, signal, sys
    import numpy as np
    import tensorflow as tf
    import testlib as tl

    impl, root, limit, fault = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        sys.argv[4]
    lib = tl.IMPLS[impl]

    def limit_file_size(size=limit):
      if fault == "file_size":
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, limit))

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit_file_size()
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
        limit_file_size(os.path.getsize(os.path.join(directory, "checkpoint"))
                        + 100)
        manager.save()
      return save

    def saver(directory, sharded=False, index=False, meta_graph=False):
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
              if big and meta_graph:  # Saved in the meta graph only.
                tf.constant(np.arange(BIG, dtype=np.float32))
              elif big:
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
        "saver_meta_graph": lambda d: saver(d, meta_graph=True),
    }
    if fault == "disk_full":  # A full disk cannot aim at the state file.
      del scenarios["manager_state_file"]

    def first_checkpoint_restores(directory):
      latest = (tf.train.latest_checkpoint(directory) or
                os.path.join(directory, "ckpt-1"))  # write() lists nothing.
      reader = tf.train.load_checkpoint(latest)
      return all((reader.get_tensor(key) == 1).all()
                 for key in reader.get_variable_to_shape_map()
                 if key not in ("_CHECKPOINTABLE_OBJECT_GRAPH",
                                "save_counter/.ATTRIBUTES/VARIABLE_VALUE"))

    results = {}
    for name, scenario in scenarios.items():
      directory = os.path.join(root, name)
      os.makedirs(directory, exist_ok=True)
      failing_save = scenario(directory)
      before = snapshot(directory)
      try:
        failing_save()
        error = None
      except Exception as e:
        error = type(e).__name__
      limit_file_size()
      results[name] = {"error": error, "before": before,
                       "after": snapshot(directory),
                       "restores": first_checkpoint_restores(directory)}
    print("RESULTS", json.dumps(results))
""")

# What TensorFlow leaves after the failed save, beside what was there.
_TF_LEFTOVERS = {
    "checkpoint_save": ["ckpt-2_temp"],
    "checkpoint_write": ["ckpt-2_temp"],
    "manager_save": ["ckpt-2_temp"],
    # A complete checkpoint the state file does not list, and the state
    # file's temporary copy.
    "manager_state_file": [
        "<name>.data-00000-of-00001", "<name>.index", "checkpoint.tmp<hex>"
    ],
    "saver": [],  # SaveV2 removes its temporary file.
    "saver_sharded": ["model-2_temp"],
    "saver_index": ["model-2.data-00000-of-00001"],  # Without its index.
    # A complete checkpoint, and its meta graph's temporary file.
    "saver_meta_graph": [
        "model-2.data-00000-of-00001", "model-2.index", "model-2.meta.tmp<hex>"
    ],
}
# Where TensorFlow fails after its state file lists the new checkpoint and
# the old one is deleted (it writes the meta graph last).
_TF_FAILS_AFTER_THE_STATE_FILE = {"saver_meta_graph"}


def _normalized(names, before):
  """The names not in `before`, with numbers and hex digits that vary out."""
  new = sorted(set(names) - set(before))
  return [
      re.sub(r"c{200}-\d+", "<name>",
             re.sub(r"\.tmp[0-9a-f]{32}$", ".tmp<hex>", name)) for name in new
  ]


# Each scenario of a full disk writes into a file system of its own, of
# this many bytes, mounted in a private mount namespace of the child.
_DISK_BYTES = 200 << 10


def _run_script(impl, root, fault):
  """Runs the failing saves of `fault`; returns their results by scenario."""
  if fault == "file_size":
    result = tl.run_python(_SCRIPT, impl, root, _LIMIT, fault)
  else:
    mounts = " && ".join(
        f"mkdir -p {root}/{name} && "
        f"mount -t tmpfs -o size={_DISK_BYTES} tmpfs {root}/{name}"
        for name in _TF_LEFTOVERS
        if name != "manager_state_file")
    result = tl.run_python(_SCRIPT,
                           impl,
                           root,
                           _DISK_BYTES,
                           fault,
                           wrapper=[
                               "unshare", "--mount", "--map-root-user", "sh",
                               "-c", f'{mounts} && exec "$0" "$@"'
                           ])
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [
      line for line in result.stdout.splitlines() if line.startswith("RESULTS ")
  ]
  return json.loads(line.split(" ", 1)[1])


_ERRORS = {
    "file_size": "OutOfRangeError",  # EFBIG
    "disk_full": "ResourceExhaustedError"
}  # ENOSPC


@pytest.fixture(scope="module", params=sorted(_ERRORS))
def results(request, tmp_path_factory):
  """What each library's failed saves did, by library and scenario."""
  return request.param, {
      impl: _run_script(impl, tmp_path_factory.mktemp(impl), request.param)
      for impl in tl.IMPLS
  }


@pytest.mark.parametrize("scenario", sorted(_TF_LEFTOVERS))
def test_failed_save_leaves_the_directory_as_it_was(results, scenario):
  fault, found = results
  if scenario not in found["ours"]:
    assert fault == "disk_full" and scenario == "manager_state_file"
    return
  ours, theirs = found["ours"][scenario], found["tf"][scenario]
  assert theirs["error"] == ours["error"] == _ERRORS[fault]
  assert ours["after"] == ours["before"]
  if fault == "file_size":  # Where a disk fills up varies more.
    assert _normalized(theirs["after"]["files"],
                       theirs["before"]["files"]) == _TF_LEFTOVERS[scenario]
  if scenario in _TF_FAILS_AFTER_THE_STATE_FILE:
    assert "model-2" in theirs["after"]["state"]
    assert "model-1.index" not in theirs["after"]["files"]
  else:
    assert theirs["after"]["state"] == theirs["before"]["state"]
    assert set(theirs["before"]["files"]) <= set(theirs["after"]["files"])
  assert ours["restores"] and theirs["restores"]


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
          error = tl.outcome(saver.save,
                             sess,
                             os.path.join(subdirectory, "model"),
                             global_step=1).error
          extra = saver.last_checkpoints
    else:
      checkpoint = lib.Checkpoint(v=tf.Variable(1.))
      if how == "checkpoint_save":
        error = tl.outcome(checkpoint.save, os.path.join(subdirectory,
                                                         "ckpt")).error
      else:
        manager = lib.CheckpointManager(checkpoint, subdirectory, max_to_keep=1)
        error = tl.outcome(manager.save).error
        extra = manager.checkpoints
    found[how] = (type(error).__name__,
                  sorted(set(os.listdir(subdirectory)) - before), extra)
  return found


def test_state_file_that_cannot_be_replaced(tmp_path):
  found = {
      impl: _save_with_blocked_state_file(impl, str(tmp_path / impl))
      for impl in tl.IMPLS
  }
  for how in found["ours"]:
    assert found["ours"][how][0] == found["tf"][how][0] != "NoneType"
    assert found["ours"][how][1] == []  # Nothing new, and nothing listed.
    assert not found["ours"][how][2]
  # TensorFlow leaves a complete checkpoint no state file lists, and keeps
  # it in its lists.
  assert found["tf"]["checkpoint_save"][1] == [
      "ckpt-1.data-00000-of-00001", "ckpt-1.index"
  ]
  assert found["tf"]["manager_save"][1:] == ([
      "ckpt-1.data-00000-of-00001", "ckpt-1.index"
  ], [os.path.join(str(tmp_path / "tf"), "manager_save", "ckpt-1")])
  assert found["tf"]["saver"][1:] == ([
      "model-1.data-00000-of-00001", "model-1.index"
  ], [os.path.join(str(tmp_path / "tf"), "saver", "model-1")])


_PERMISSIONS_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    import testlib as tl

    impl, root = sys.argv[1], sys.argv[2]
    lib = tl.IMPLS[impl]
    if os.geteuid() == 0:  # Root writes anywhere: become nobody.
      os.chown(root, 65534, 65534)
      os.setgid(65534)
      os.setuid(65534)

    def listing(directory):
      state = os.path.join(directory, "checkpoint")
      return {"files": sorted(os.listdir(directory)),
              "state": open(state).read() if os.path.exists(state) else None}

    results = {}
    for how in ("checkpoint_save", "manager_save", "saver"):
      directory = os.path.join(root, how)
      os.makedirs(directory)
      if how == "saver":
        with tf.Graph().as_default():
          tf.compat.v1.get_variable("a", initializer=tf.ones([10]))
          saver = lib.Saver(max_to_keep=2)
          sess = tf.compat.v1.Session()
          sess.run(tf.compat.v1.global_variables_initializer())
          save = lambda step: saver.save(
              sess, os.path.join(directory, "model"), global_step=step)
          save(1)
          os.chmod(directory, 0o555)
          before = listing(directory)
          error = tl.outcome(save, 2).error
          sess.close()
      else:
        checkpoint = lib.Checkpoint(v=tf.Variable(tf.ones([10])))
        if how == "manager_save":
          manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=2)
          save = manager.save
        else:
          save = lambda: checkpoint.save(os.path.join(directory, "ckpt"))
        save()
        os.chmod(directory, 0o555)
        before = listing(directory)
        error = tl.outcome(save).error
      results[how] = {"error": type(error).__name__, "before": before,
                      "after": listing(directory)}
      os.chmod(directory, 0o755)
    print("RESULTS", json.dumps(results))
""")


def test_save_into_a_directory_it_may_not_write():
  """A real permission failure: the directory turns read-only.

  The child process gives up root first (root may write anywhere), so its
  directory lives where an unprivileged user can reach it, not in pytest's
  private temporary directory.
  """
  found = {}
  for impl in tl.IMPLS:
    with tempfile.TemporaryDirectory() as root:
      result = tl.run_python(_PERMISSIONS_SCRIPT, impl, root)
    assert result.returncode == 0, result.stderr[-3000:]
    line, = [
        line for line in result.stdout.splitlines()
        if line.startswith("RESULTS ")
    ]
    found[impl] = json.loads(line.split(" ", 1)[1])
  for how, ours in found["ours"].items():
    theirs = found["tf"][how]
    assert ours["error"] == theirs["error"] == "PermissionDeniedError", how
    assert ours["after"] == ours["before"], how
    assert theirs["after"] == theirs["before"], how
