"""Saves killed at random points, resumed in the same directory each time.

A child process imports TensorFlow once, then forks, again and again, a
worker that restores the latest checkpoint of a directory and saves in a
loop (through a `CheckpointManager`, or `Checkpoint.save`) until it is
killed with SIGKILL after a random delay. Nothing may be lost or torn, with
TensorFlow or with us: the latest checkpoint restores, and every checkpoint
holds one save's values. What the interrupted saves leave behind differs:
TensorFlow removes none of it, we remove all of it but what the last
interrupted save left (each save cleans up what came before, see
`tf_objckpt.engine.leftovers`).

Sharded saves are as safe: object-based saves of variables on two devices
(one shard each, merged), and the v1 `Saver(sharded=True)` in graph mode.

Covers: tf_objckpt.engine.commit, tf_objckpt.engine.writes,
tf_objckpt.engine.leftovers, tf_objckpt.engine.temporary_names.
"""

import json
import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl

_KILLS = 20
_SIZE = 1 << 20  # Floats per variable; four variables make 16 MiB a save.

_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    import testlib as tl

    impl, variant, directory, kills, seed, size = sys.argv[1:]
    lib = tl.IMPLS[impl]
    size = int(size)
    cpu, = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    def variables_on_two_devices(make):
      variables = []
      for index in range(4):
        with tf.device(f"/cpu:{index % 2}"):
          variables.append(make(index))
      return variables

    def work_with_sharded_saver():
      with tf.Graph().as_default():
        variables = variables_on_two_devices(
            lambda i: tf.compat.v1.get_variable(f"v{i}", [size]))
        count_value = tf.compat.v1.placeholder(tf.float32, [])
        assign = [v.assign(tf.fill([size], count_value)) for v in variables]
        saver = lib.Saver(sharded=True, max_to_keep=2)
        with tf.compat.v1.Session(config=tf.compat.v1.ConfigProto(
            device_count={"CPU": 2})) as sess:
          latest = tf.train.latest_checkpoint(directory)
          count = 0
          if latest:
            saver.restore(sess, latest)
            count = int(latest.rsplit("-", 1)[1])
            for value in sess.run(variables):
              if not (value == count).all():
                os._exit(3)
          while True:
            count += 1
            sess.run(assign, {count_value: float(count)})
            saver.save(sess, os.path.join(directory, "model"),
                       global_step=count, write_meta_graph=False)

    def work():
      if variant == "saver_sharded":
        return work_with_sharded_saver()
      if variant == "per_device":
        variables = variables_on_two_devices(
            lambda _: tf.Variable(tf.zeros([size])))
      else:
        variables = [tf.Variable(tf.zeros([size])) for _ in range(4)]
      checkpoint = lib.Checkpoint(variables=variables)
      if variant == "manager":
        manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=2)
        manager.restore_or_initialize()
        save = manager.save
      else:
        latest = tf.train.latest_checkpoint(directory)
        if latest:
          checkpoint.restore(latest)
        save = lambda: checkpoint.save(os.path.join(directory, "ckpt"))
      count = int(checkpoint.save_counter.numpy())
      for variable in variables:
        if not (variable.numpy() == count).all():
          os._exit(3)  # Torn: values of another save than the counter's.
      while True:
        count += 1
        for variable in variables:
          variable.assign(tf.fill([size], float(count)))
        save()

    def saved():
      # The first kill waits for a complete save, however loaded the
      # machine: a run that never saved could not show what was kept.
      return any(name.endswith(".index") for name in os.listdir(directory))

    exits = [ended for ended, _ in tl.kill_forked_workers(
        work, int(kills), int(seed), saved)]
    print("EXITS", json.dumps(exits))
""")


def _kill_repeatedly(impl, variant, directory, seed):
  """Runs `_KILLS` workers, each killed; returns how each ended."""
  os.makedirs(directory)
  result = tl.run_python(_SCRIPT, impl, variant, directory, _KILLS, seed,
                         _SIZE, timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [line for line in result.stdout.splitlines()
           if line.startswith("EXITS ")]
  return json.loads(line.split(" ", 1)[1])


def _assert_nothing_torn(directory, variant):
  """Every checkpoint holds one save's values; the latest is listed."""
  latest = tf.train.latest_checkpoint(directory)
  assert latest is not None, os.listdir(directory)
  prefixes = [name[:-len(".index")] for name in os.listdir(directory)
              if name.endswith(".index")]
  assert os.path.basename(latest) in prefixes
  for prefix in prefixes:
    reader = tf.train.load_checkpoint(os.path.join(directory, prefix))
    count = int(prefix.rsplit("-", 1)[1])
    if variant == "saver_sharded":
      keys = [f"v{index}" for index in range(4)]
    else:
      assert reader.get_tensor(
          "save_counter/.ATTRIBUTES/VARIABLE_VALUE") == count
      keys = [f"variables/{index}/.ATTRIBUTES/VARIABLE_VALUE"
              for index in range(4)]
    for key in keys:
      np.testing.assert_array_equal(reader.get_tensor(key),
                                    np.full([_SIZE], float(count)))


@pytest.mark.parametrize("variant",
                         ["manager", "save", "per_device", "saver_sharded"])
def test_killed_saves_leave_at_most_one_save_behind(tmp_path, variant):
  found = {}
  for impl in tl.IMPLS:
    directory = str(tmp_path / impl)
    exits = _kill_repeatedly(impl, variant, directory, seed=11)
    assert set(exits) == {-9}, exits  # Killed, never failed or torn.
    _assert_nothing_torn(directory, variant)
    found[impl] = tl.leftovers(directory)
    print(f"{impl}: {_KILLS} kills left {len(found[impl])} interrupted "
          f"saves' files, "
          f"{tl.bytes_under(directory, sum(found[impl].values(), []))} "
          f"bytes: {found[impl]}")
  assert len(found["ours"]) <= 1, found["ours"]
