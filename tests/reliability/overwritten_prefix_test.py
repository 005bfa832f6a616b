"""`write()` over an existing prefix, killed at random points.

A checkpoint is several files, so writing over a prefix cannot be atomic.
After a kill at any point, the prefix must hold the old checkpoint, the new
one, or fail to load with a `DataLossError` (or `NotFoundError`) naming it;
it must never restore silently mixed values. A child process imports
TensorFlow once, then forks, again and again, a worker that writes the same
prefix in a loop (each write's values all equal its count) until it is
killed; after each kill another worker reads the prefix back. Neither
TensorFlow nor we mix values; our failures are all `DataLossError`s naming
the prefix (TensorFlow's reads may fail otherwise).

Covers: tf_objckpt.engine.commit, tf_objckpt.engine.writes,
tf_objckpt.engine.reads.
"""

import json
import textwrap

import pytest

import testlib as tl

_KILLS = 15

_SCRIPT = textwrap.dedent("""
    import json, os, random, signal, sys, time
    import numpy as np
    import tensorflow as tf
    import testlib as tl

    impl, prefix, kills, seed = sys.argv[1:]
    lib = tl.IMPLS[impl]
    size = 1 << 20  # Four variables of 4 MiB.

    def write_forever():
      variables = [tf.Variable(tf.zeros([size])) for _ in range(4)]
      checkpoint = lib.Checkpoint(variables=variables)
      count = 0
      while True:
        count += 1
        for variable in variables:
          variable.assign(tf.fill([size], float(count)))
        checkpoint.write(prefix)

    def read_back():
      variables = [tf.Variable(tf.fill([size], -1.)) for _ in range(4)]
      try:
        lib.Checkpoint(variables=variables).read(prefix).assert_consumed()
      except Exception as e:  # pylint: disable=broad-except
        return type(e).__name__ + (" naming" if prefix in str(e) else "")
      values = {float(v) for variable in variables
                for v in np.unique(variable.numpy())}
      return "one write" if len(values) == 1 and -1. not in values else (
          "mixed " + repr(sorted(values)))

    # Runs `work` in a forked child. This process itself runs no TensorFlow
    # op: a child forked after TensorFlow's threads started could not.
    def in_child(work):
      pid = os.fork()
      if pid == 0:
        try:
          work()
        finally:
          os._exit(0)
      return pid

    def report(path):
      with open(path, "w") as f:
        f.write(read_back())

    rng = random.Random(int(seed))
    outcomes = []
    for kill in range(int(kills)):
      writer = in_child(write_forever)
      time.sleep(rng.uniform(0.2, 1.5))
      os.kill(writer, signal.SIGKILL)
      os.waitpid(writer, 0)
      outcome_file = f"{prefix}.outcome{kill}"
      os.waitpid(in_child(lambda: report(outcome_file)), 0)
      try:
        with open(outcome_file) as f:
          outcomes.append(f.read())
      except OSError:
        outcomes.append("reader died")
    print("OUTCOMES", json.dumps(outcomes))
""")


@pytest.mark.parametrize("impl", tl.IMPLS)
def test_killed_overwrites_never_mix_values(tmp_path, impl):
  prefix = str(tmp_path / "ckpt")
  result = tl.run_python(_SCRIPT, impl, prefix, _KILLS, 7)
  lines = [
      line for line in result.stdout.splitlines()
      if line.startswith("OUTCOMES ")
  ]
  assert lines, result.stderr[-3000:]
  outcomes = json.loads(lines[0][len("OUTCOMES "):])
  assert len(outcomes) == _KILLS
  assert not [outcome for outcome in outcomes if outcome.startswith("mixed")
             ], outcomes
  if impl == "ours":
    assert set(outcomes) <= {
        "one write", "DataLossError naming", "NotFoundError naming"
    }, outcomes
    # Our writes finish within the kill window; TensorFlow's first write of a
    # process may not.
    assert "one write" in outcomes, outcomes
