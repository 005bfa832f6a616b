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
(one shard each, merged), saves split by `ParallelShardsPolicy` (shards
written at the same time, durable or not), and the v1 `Saver(sharded=True)`
in graph mode. A save killed while two of its shards are being written at
once leaves only its own files, which the next save removes.

Covers: tf_objckpt.engine.commit, tf_objckpt.engine.writes,
tf_objckpt.engine.leftovers, tf_objckpt.engine.temporary_names.
"""

import json
import os
import re
import textwrap
import time

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
    import tf_objckpt

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
      # Four shards written at once (durable: each flushed before it counts).
      options = tf_objckpt.CheckpointOptions(
          durable=variant == "parallel_shards_durable",
          experimental_sharding_callback=(
              tf_objckpt.ParallelShardsPolicy(max_shards=4, min_shard_bytes=1)
              if variant.startswith("parallel_shards") else None))
      if variant in ("manager", "parallel_shards_durable"):
        manager = lib.CheckpointManager(checkpoint, directory, max_to_keep=2)
        manager.restore_or_initialize()
        save = lambda: manager.save(options=options)
      else:
        latest = tf.train.latest_checkpoint(directory)
        if latest:
          checkpoint.restore(latest)
        save = lambda: checkpoint.save(os.path.join(directory, "ckpt"),
                                       options=options)
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
  result = tl.run_python(_SCRIPT,
                         impl,
                         variant,
                         directory,
                         _KILLS,
                         seed,
                         _SIZE,
                         timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  line, = [
      line for line in result.stdout.splitlines() if line.startswith("EXITS ")
  ]
  return json.loads(line.split(" ", 1)[1])


def _assert_nothing_torn(directory, variant):
  """Every checkpoint holds one save's values; the latest is listed."""
  latest = tf.train.latest_checkpoint(directory)
  assert latest is not None, os.listdir(directory)
  prefixes = [
      name[:-len(".index")]
      for name in os.listdir(directory)
      if name.endswith(".index")
  ]
  assert os.path.basename(latest) in prefixes
  for prefix in prefixes:
    reader = tf.train.load_checkpoint(os.path.join(directory, prefix))
    count = int(prefix.rsplit("-", 1)[1])
    if variant == "saver_sharded":
      keys = [f"v{index}" for index in range(4)]
    else:
      assert reader.get_tensor(
          "save_counter/.ATTRIBUTES/VARIABLE_VALUE") == count
      keys = [
          f"variables/{index}/.ATTRIBUTES/VARIABLE_VALUE" for index in range(4)
      ]
    for key in keys:
      np.testing.assert_array_equal(reader.get_tensor(key),
                                    np.full([_SIZE], float(count)))


@pytest.mark.parametrize("variant", [
    "manager", "save", "per_device", "saver_sharded", "parallel_shards",
    "parallel_shards_durable"
])
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


_SAVES_WITH_PARALLEL_SHARDS = textwrap.dedent("""
    import sys
    import tensorflow as tf
    import tf_objckpt

    directory, saves = sys.argv[1], int(sys.argv[2])
    variables = [tf.Variable(tf.zeros([8 << 20])) for _ in range(4)]
    checkpoint = tf_objckpt.Checkpoint(variables=variables)
    manager = tf_objckpt.CheckpointManager(checkpoint, directory,
                                           max_to_keep=2)
    manager.restore_or_initialize()
    options = tf_objckpt.CheckpointOptions(
        durable=True, experimental_sharding_callback=(
            tf_objckpt.ParallelShardsPolicy(max_shards=2, min_shard_bytes=1)))
    for _ in range(saves):
      count = float(checkpoint.save_counter.numpy() + 1)
      for variable in variables:
        variable.assign(tf.fill([8 << 20], count))
      manager.save(options=options)
""")


def _shards_being_written(directory):
  """Names of the shards of `directory`'s `_temp` folders still unwritten."""
  found = set()
  for name in os.listdir(directory):
    if re.fullmatch(r".*_temp(_[0-9a-f]{32})?", name):
      try:
        found.update(
            entry.split(".")[0]
            for entry in os.listdir(os.path.join(directory, name))
            if ".tempstate" in entry)
      except FileNotFoundError:  # Merged meanwhile.
        pass
  return found


def test_a_save_killed_while_two_shards_are_written_leaves_only_its_files(
    tmp_path):
  """SIGKILL once two shards of one durable save are being written at once.

  A shard's data file keeps its temporary name while SaveV2 writes it, so
  two such names together show the shards being written at the same time.
  """
  directory = str(tmp_path)
  child = tl.start_python(
      ["-c", _SAVES_WITH_PARALLEL_SHARDS, directory, 1000000])
  try:
    deadline = time.time() + 240
    while len(_shards_being_written(directory)) < 2:
      assert child.poll() is None, child.communicate()[1][-3000:]
      assert time.time() < deadline, "no two shards were written at once"
  finally:
    tl.kill_group(child)
  leftovers = tl.leftovers(directory)
  assert len(leftovers) == 1, leftovers
  (killed, files), = leftovers.items()
  assert len(files) == 1, files
  assert re.fullmatch(re.escape(killed) + "_temp_[0-9a-f]{32}", files[0]), files
  latest = tf.train.latest_checkpoint(directory)
  if latest is not None:  # The first save may be the one killed.
    _assert_holds_its_save(latest)
  result = tl.run_python(_SAVES_WITH_PARALLEL_SHARDS, directory, 1)
  assert result.returncode == 0, result.stderr[-3000:]
  assert not tl.leftovers(directory)
  _assert_holds_its_save(tf.train.latest_checkpoint(directory))


def _assert_holds_its_save(prefix):
  """Both libraries restore `prefix`: every value its save's number."""
  count = float(prefix.rsplit("-", 1)[1])
  for lib in tl.IMPLS.values():
    variables = [tf.Variable(tf.zeros([8 << 20])) for _ in range(4)]
    lib.Checkpoint(
        variables=variables).read(prefix).assert_existing_objects_matched()
    for variable in variables:
      assert (variable.numpy() == count).all(), prefix
