"""A manager's save loop killed at random moments: the state file stays true.

A child process imports TensorFlow once, then forks, again and again, a
worker that restores the newest checkpoint of a directory with a
`CheckpointManager(max_to_keep=2)` and saves small checkpoints in a loop,
until it is killed with SIGKILL after a random delay. After each kill,
before the next worker starts, every checkpoint the state file names must
have its `.index` and data file: a manager writes the state file, without
the checkpoints it drops, before it deletes their files. (Writing it
before and after the deletion, as TensorFlow's manager does, left a
dropped checkpoint listed in about one kill of six.)

Covers: tf_objckpt.checkpoint_management, tf_objckpt.engine.state_file,
tf_objckpt.api.checkpoint_manager.
"""

import json
import os
import textwrap

import testlib as tl

_KILLS = 30

_SCRIPT = textwrap.dedent("""
    import json, os, re, sys
    import tensorflow as tf
    import testlib as tl
    import tf_objckpt

    directory, kills, seed = sys.argv[1:]

    def work():
      variables = [tf.Variable(tf.zeros([4])) for _ in range(4)]
      checkpoint = tf_objckpt.Checkpoint(variables=variables)
      manager = tf_objckpt.CheckpointManager(checkpoint, directory,
                                             max_to_keep=2)
      manager.restore_or_initialize()
      while True:
        for variable in variables:
          variable.assign_add(tf.ones([4]))
        manager.save()

    def missing_listed():
      # The names the state file lists whose files are not all there.
      try:
        with open(os.path.join(directory, "checkpoint")) as f:
          listed = set(re.findall(r'"([^"]+)"', f.read()))
      except FileNotFoundError:
        return []
      files = set(os.listdir(directory))
      return sorted(name for name in listed
                    if not {name + ".index",
                            name + ".data-00000-of-00001"} <= files)

    # The directory's time when the last worker was killed: it changes when
    # the next one saves (its first save may come late under load).
    last_change = [None]

    def saved():
      return (os.path.exists(directory) and
              os.stat(directory).st_mtime != last_change[0])

    def after_kill():
      last_change[0] = os.stat(directory).st_mtime
      return {"missing": missing_listed(),
              "files": sorted(os.listdir(directory))}

    trials = [dict(found, ended=ended) for ended, found in
              tl.kill_forked_workers(work, int(kills), int(seed), saved,
                                     after_kill)]
    print("TRIALS", json.dumps(trials))
""")


def test_killed_saves_never_leave_a_listed_checkpoint_without_files(tmp_path):
  directory = str(tmp_path / "checkpoints")
  result = tl.run_python(_SCRIPT, directory, _KILLS, 7, timeout=600)
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [
      line for line in result.stdout.splitlines() if line.startswith("TRIALS ")
  ]
  trials = json.loads(line.split(" ", 1)[1])
  assert len(trials) == _KILLS
  assert {trial["ended"] for trial in trials} == {-9}, trials  # SIGKILL.
  bad = [trial for trial in trials if trial["missing"]]
  assert not bad, f"{len(bad)} of {_KILLS} kills: {bad}"
  assert os.path.exists(os.path.join(directory, "checkpoint"))
