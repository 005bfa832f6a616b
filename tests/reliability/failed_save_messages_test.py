"""A save that fails says which checkpoint and why, in the user's terms.

The message starts `Cannot save checkpoint '<prefix>': <reason>.` and
TensorFlow's own message follows; the error keeps TensorFlow's type. The
failures are real: a directory the process may not write (a child process
that gives up root, who writes anywhere), a full disk (a small `tmpfs` in a
private mount namespace), a file size limit (`RLIMIT_FSIZE`), a regular file where a directory should be, and a
directory where the save writes its state file. Where TensorFlow has a clear
answer of its own (the v1 `Saver` into a missing directory), it stays.

Covers: tf_objckpt.engine.commit, tf_objckpt.api.save_transaction,
tf_objckpt.engine.save_errors.
"""

import json
import os
import tempfile
import textwrap

import pytest
import tensorflow as tf

import testlib as tl

# Each scenario saves into `<root>/<scenario>`; prints {scenario: error}.
_SCENARIOS = textwrap.dedent("""
    import concurrent.futures.thread  # Imported before giving up root.
    import json, os, resource, signal, sys
    import tensorflow as tf
    import testlib as tl

    impl, root, fault = sys.argv[1], sys.argv[2], sys.argv[3]
    lib = tl.IMPLS[impl]
    BIG = 1 << 18  # Floats: 1 MiB.

    def eager(directory, how):
      checkpoint = lib.Checkpoint(v=tf.Variable(tf.ones([BIG])))
      if how == "checkpoint_write":
        checkpoint.write(os.path.join(directory, "ckpt"))
      elif how == "checkpoint_save":
        checkpoint.save(os.path.join(directory, "ckpt"))
      elif how == "manager_save":
        lib.CheckpointManager(checkpoint, directory, max_to_keep=1).save()
      else:
        checkpoint.save(os.path.join(directory, "ckpt"), options=(
            tf.train.CheckpointOptions(
                experimental_enable_async_checkpoint=True)))
        checkpoint.sync()

    def graph(directory, how):
      with tf.Graph().as_default():
        v = tf.compat.v1.get_variable("v", initializer=tf.ones([BIG]))
        with tf.compat.v1.Session() as session:
          session.run(v.initializer)
          if how == "saver":
            lib.Saver([v]).save(session, os.path.join(directory, "model"))
          else:
            lib.CheckpointV1(v=v).save(os.path.join(directory, "ckpt"),
                                       session=session)

    scenarios = {name: eager for name in (
        "checkpoint_write", "checkpoint_save", "manager_save", "async_save")}
    scenarios.update(saver=graph, graph_checkpoint_v1_save=graph)
    for name in scenarios:
      os.makedirs(os.path.join(root, name), exist_ok=True)
    if fault == "file_size":
      signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
      resource.setrlimit(resource.RLIMIT_FSIZE, (BIG, BIG))
    if fault == "read_only":
      for name in scenarios:
        os.chmod(os.path.join(root, name), 0o555)
      if os.geteuid() == 0:
        os.setgid(65534)
        os.setuid(65534)
    found = {}
    for name, scenario in scenarios.items():
      error = tl.outcome(scenario, os.path.join(root, name), name).error
      found[name] = error and {"type": type(error).__name__,
                               "message": error.message}
    print("RESULTS", json.dumps(found))
""")

# The prefix each scenario writes, in its directory.
_PREFIXES = {
    "checkpoint_write": "ckpt",
    "checkpoint_save": "ckpt-1",
    "manager_save": "ckpt-1",
    "async_save": "ckpt-1",
    "saver": "model",
    "graph_checkpoint_v1_save": "ckpt-1"
}
_DISK_BYTES = 64 << 10


def _run_scenarios(impl, root, fault):
  """Runs every scenario of `fault` in a child; returns their errors."""
  wrapper = ()
  if fault == "disk_full":
    mounts = " && ".join(
        f"mkdir -p {root}/{name} && "
        f"mount -t tmpfs -o size={_DISK_BYTES} tmpfs {root}/{name}"
        for name in _PREFIXES)
    wrapper = [
        "unshare", "--mount", "--map-root-user", "sh", "-c",
        f'{mounts} && exec "$0" "$@"'
    ]
  result = tl.run_python(_SCENARIOS, impl, root, fault, wrapper=wrapper)
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [
      line for line in result.stdout.splitlines() if line.startswith("RESULTS ")
  ]
  return json.loads(line.split(" ", 1)[1])


_FAULTS = {
    "read_only": ("PermissionDeniedError", "directory {directory!r} is not "
                  "writable", "Permission denied"),
    "disk_full": ("ResourceExhaustedError", "no space is left on the device "
                  "holding directory {directory!r}", "No space left on device"),
    "file_size": ("OutOfRangeError", "a file in directory {directory!r} would "
                  "outgrow this process's file size limit", "File too large"),
}


@pytest.mark.parametrize("fault", sorted(_FAULTS))
def test_a_failed_save_names_the_checkpoint_and_the_reason(fault):
  error_type, reason, raw = _FAULTS[fault]
  found = {}
  for impl in tl.IMPLS:
    # Not pytest's private directory: the child may give up root.
    with tempfile.TemporaryDirectory() as root:
      os.chmod(root, 0o755)
      found[impl] = (root, _run_scenarios(impl, root, fault))
  root, ours = found["ours"]
  for scenario, prefix in _PREFIXES.items():
    directory = os.path.join(root, scenario)
    lead = (f"Cannot save checkpoint {os.path.join(directory, prefix)!r}: "
            f"{reason.format(directory=directory)}.")
    assert ours[scenario]["type"] == error_type, scenario
    first, tensorflows = ours[scenario]["message"].split("\n", 1)
    assert first == lead, scenario
    assert raw in tensorflows, scenario
    theirs = found["tf"][1][scenario]
    if scenario != "async_save":  # TensorFlow's sync() raises nothing.
      assert theirs["type"] == error_type, scenario
      assert raw in theirs["message"] and "Cannot" not in theirs["message"]


def _errors(save):
  """`{impl: error}` of `save(lib)` for each library."""
  return {impl: tl.outcome(save, lib).error for impl, lib in tl.IMPLS.items()}


def _assert_explained(errors, prefix, reason):
  assert type(errors["ours"]) is type(errors["tf"]), errors
  lead = f"Cannot save checkpoint {prefix!r}: {reason}.\n"
  assert errors["ours"].message == lead + errors["tf"].message


def test_a_file_where_the_directory_should_be(tmp_path):
  blocking = tmp_path / "file"
  blocking.write_text("")
  prefix = str(blocking / "sub" / "ckpt")
  reason = f"{str(blocking)!r} is a file, not a directory"
  _assert_explained(
      _errors(lambda lib: lib.Checkpoint(v=tf.Variable(1.)).write(prefix)),
      prefix, reason)
  _assert_explained(
      _errors(lambda lib: lib.Checkpoint(v=tf.Variable(1.)).save(prefix)),
      prefix + "-1", reason)
  manager_error = _errors(lambda lib: lib.CheckpointManager(
      lib.Checkpoint(v=tf.Variable(1.)), os.path.dirname(prefix), max_to_keep=1)
                          .save())
  _assert_explained(manager_error, prefix, reason)


def test_a_directory_where_the_state_file_goes(tmp_path):
  errors = {}
  for impl, lib in tl.IMPLS.items():
    (tmp_path / impl / "checkpoint").mkdir(parents=True)
    errors[impl] = tl.outcome(
        lib.Checkpoint(v=tf.Variable(1.)).save,
        str(tmp_path / impl / "ckpt")).error
  state_file = str(tmp_path / "ours" / "checkpoint")
  assert type(errors["ours"]) is type(errors["tf"])
  assert errors["ours"].message.startswith(
      f"Cannot save checkpoint {str(tmp_path / 'ours' / 'ckpt-1')!r}: "
      f"{state_file!r} is a directory, where the save writes a file.\n"
      f"{state_file}.tmp")


def test_the_v1_saver_into_a_missing_directory_fails_as_in_tensorflow(tmp_path):
  prefix = str(tmp_path / "missing" / "names" / "model")

  def save(lib):
    with tf.Graph().as_default():
      v = tf.compat.v1.get_variable("v", initializer=1.)
      with tf.compat.v1.Session() as session:
        session.run(v.initializer)
        lib.Saver([v]).save(session, prefix)

  errors = _errors(save)
  assert type(errors["ours"]) is type(errors["tf"]) is ValueError
  assert str(errors["ours"]) == str(errors["tf"])
