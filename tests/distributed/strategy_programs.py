"""Cluster programs of TensorFlow's distribution strategies, one per process.

Scenarios of `cluster_programs.py` (which runs them), each run as one task
of a cluster whose other tasks are processes of their own
(`tl.ServerProcesses`, or other runs of the same program); the task and
the cluster come from `TF_CONFIG`. Each scenario does the same with
TensorFlow's classes and with ours, each library under
`<directory>/<impl>`, checks every value it saved and restored, and
prints one JSON line last.
"""

import json
import os
import sys

import numpy as np
import tensorflow as tf

import testlib as tl

# ----------------------------------------------------------------------------
# ParameterServerStrategy: a coordinator, ps tasks and a worker.
# ----------------------------------------------------------------------------

_PS_SHAPES = {"emb": [12, 4], "dense": [6], "scalar": []}
_PARTITIONERS = {
    "fixed":
        tf.distribute.experimental.partitioners.FixedShardsPartitioner,
    "min_size":
        lambda num_ps:
        (tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=16, max_shards=num_ps)),
}


def _ps_strategy(partitioner):
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  num_ps = len(resolver.cluster_spec().as_dict()["ps"])
  return tf.distribute.experimental.ParameterServerStrategy(
      resolver, variable_partitioner=_PARTITIONERS[partitioner](num_ps))


def _ps_variables(strategy):
  """The model: a partitioned `emb`, and plain variables, on the ps tasks."""
  with strategy.scope():
    return {
        name: tf.Variable(tf.zeros(shape), name=name)
        for name, shape in _PS_SHAPES.items()
    }


def _values(variables):
  return {
      name: tf.convert_to_tensor(variable).numpy()
      for name, variable in variables.items()
  }


def _assert_values(expected, actual, what):
  for name, value in expected.items():
    np.testing.assert_array_equal(actual[name], value, err_msg=f"{name} {what}")


def ps_rounds(directory, rounds, partitioner="fixed"):
  """Rounds of training on the worker, then saves and restores.

  Each round a step scheduled on the worker adds to every variable, then
  the coordinator saves with both libraries' managers (one checkpoint
  object each, over the same variables), checks the values each file
  holds, zeroes the variables and restores each library's checkpoint with
  each library.

  Prints `{"paths": {impl: [paths]}, "expected": values of the last
  round, "shards": {name: partitions}}`.
  """
  strategy = _ps_strategy(partitioner)
  coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
  variables = _ps_variables(strategy)

  @tf.function
  def train_step():
    for variable in variables.values():
      variable.assign_add(tf.ones_like(tf.convert_to_tensor(variable)))

  managers = {
      impl:
          lib.CheckpointManager(lib.Checkpoint(**variables),
                                os.path.join(directory, impl),
                                max_to_keep=2) for impl, lib in tl.IMPLS.items()
  }
  paths = {impl: [] for impl in tl.IMPLS}
  for number in range(int(rounds)):
    coordinator.schedule(train_step)
    coordinator.join()
    expected = _values(variables)
    assert expected["scalar"] == number + 1, expected
    for impl, manager in managers.items():
      paths[impl].append(manager.save())
      _assert_values(expected, tl.values_by_name(paths[impl][-1]),
                     f"saved by {impl} in round {number}")
    for writer, writer_paths in paths.items():
      for reader, lib in tl.IMPLS.items():
        for variable in variables.values():
          variable.assign(tf.zeros_like(tf.convert_to_tensor(variable)))
        lib.Checkpoint(**variables).restore(
            writer_paths[-1]).assert_existing_objects_matched()
        _assert_values(expected, _values(variables),
                       f"saved by {writer}, restored by {reader}")
  return {
      "paths": paths,
      "expected": {
          name: value.tolist() for name, value in expected.items()
      },
      "shards": _partitions(variables)
  }


def _partitions(variables):
  return {
      name: len(getattr(variable, "variables", [variable]))
      for name, variable in variables.items()
  }


def ps_restore(directory, source, partitioner):
  """Restores the last checkpoints `ps_rounds` saved, on another cluster.

  `source` is the JSON file of what `ps_rounds` printed. Each library
  restores each library's latest checkpoint (its manager's
  `restore_or_initialize`, for ours) into variables partitioned anew.
  """
  del directory  # Unused: the checkpoints are the source's.
  with open(source) as f:
    saved = json.load(f)
  strategy = _ps_strategy(partitioner)
  tf.distribute.coordinator.ClusterCoordinator(strategy)
  variables = _ps_variables(strategy)
  expected = {name: np.array(value) for name, value in saved["expected"].items()}
  for writer, writer_paths in saved["paths"].items():
    latest = tf.train.latest_checkpoint(os.path.dirname(writer_paths[-1]))
    assert latest == writer_paths[-1], (latest, writer_paths)
    for reader, lib in tl.IMPLS.items():
      for variable in variables.values():
        variable.assign(tf.zeros_like(tf.convert_to_tensor(variable)))
      lib.Checkpoint(
          **variables).restore(latest).assert_existing_objects_matched()
      _assert_values(expected, _values(variables),
                     f"saved by {writer}, restored by {reader} resharded")
  return {"shards": _partitions(variables)}


def ps_failed_write(directory, policy="none"):
  """Saves to relative paths, then again once they are bad on ps:1.

  Runs in `directory`, where each library's manager saves under its name
  (a relative path), one shard per task (`policy` "none", our function)
  or through `ShardByTaskPolicy` ("by_task", our ops sent from a thread
  per task). The first saves succeed (ps:1, running elsewhere,
  finds the same folders through links the test made); printed as
  `{"saved": {impl: path}}`. At the line "save", once the test has
  removed ps:1's links, each library saves new values, and reports its
  error (type, message), its latest checkpoint, the values that restores
  and the files no checkpoint owns.
  """
  os.chdir(directory)
  strategy = _ps_strategy("fixed")
  tf.distribute.coordinator.ClusterCoordinator(strategy)
  variables = _ps_variables(strategy)
  managers = {
      impl: lib.CheckpointManager(lib.Checkpoint(**variables), impl, 3)
      for impl, lib in tl.IMPLS.items()
  }
  options = None
  if policy == "by_task":
    options = tf.train.CheckpointOptions(experimental_sharding_callback=(
        tf.train.experimental.ShardByTaskPolicy()))
  _assign_all(variables, 1.)
  print(json.dumps({
      "saved": {
          impl: manager.save(options=options)
          for impl, manager in managers.items()
      }
  }),
        flush=True)
  sys.stdin.readline()
  _assign_all(variables, 2.)
  results = {}
  for impl, manager in managers.items():
    error = None
    try:
      manager.save(options=options)
    except tf.errors.OpError as e:
      error = [type(e).__name__, e.message]
    latest = tf.train.latest_checkpoint(impl)
    _assign_all(variables, 0.)
    # Restores read on the ps tasks too: from where ps:1 finds the file.
    tl.IMPLS[impl].Checkpoint(**variables).restore(
        os.path.abspath(latest)).assert_consumed()
    results[impl] = {
        "error": error,
        "latest": latest,
        "restored": {
            name: sorted(set(value.ravel().tolist()))
            for name, value in _values(variables).items()
        },
        "leftovers": tl.leftovers(impl)
    }
  return results


def _assign_all(variables, value):
  for variable in variables.values():
    variable.assign(tf.fill(variable.shape, value))


SCENARIOS = {
    "ps_rounds": ps_rounds,
    "ps_restore": ps_restore,
    "ps_failed_write": ps_failed_write
}

# ----------------------------------------------------------------------------
# MultiWorkerMirroredStrategy: two workers, each a process running this.
# ----------------------------------------------------------------------------


def _write_directory(directory, strategy):
  """Where a worker writes: the chief the real one, others a temporary one.

  As TensorFlow's multi-worker tutorial does: every worker saves (the save
  reads values all workers hold), only the chief's checkpoint is kept.
  """
  task_id = strategy.cluster_resolver.task_id
  if task_id == 0:
    return directory
  return os.path.join(directory, f"workertemp_{task_id}")


def mwms_managers(directory, steps):
  """Trains `steps` steps, saves with each library's manager, restores.

  Each worker saves into `_write_directory` (the others' are removed after
  the save), then, once every worker has saved, restores the chief's
  latest checkpoint with each library. Prints `{"paths": {impl: path},
  "expected": the weight}`.
  """
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  with strategy.scope():
    weight = tf.Variable(tf.zeros([4, 3]), name="weight")
    step = tf.Variable(0, dtype=tf.int64, name="step")

  @tf.function
  def train_step():

    def replica_step():
      context = tf.distribute.get_replica_context()
      update = context.all_reduce(
          "sum",
          tf.fill([4, 3],
                  tf.cast(context.replica_id_in_sync_group, tf.float32) + 1.))
      weight.assign_add(update)
      step.assign_add(1)

    strategy.run(replica_step)

  for _ in range(int(steps)):
    train_step()
  expected = weight.numpy()
  paths = {}
  for impl, lib in tl.IMPLS.items():
    write_directory = _write_directory(os.path.join(directory, impl), strategy)
    manager = lib.CheckpointManager(lib.Checkpoint(weight=weight, step=step),
                                    write_directory,
                                    max_to_keep=2)
    paths[impl] = manager.save()
    _assert_values({"weight": expected}, tl.values_by_name(paths[impl]),
                   f"saved by {impl}")
    if write_directory != os.path.join(directory, impl):
      tf.io.gfile.rmtree(write_directory)
  _barrier(strategy)
  for writer in tl.IMPLS:
    latest = tf.train.latest_checkpoint(os.path.join(directory, writer))
    for reader, lib in tl.IMPLS.items():
      weight.assign(tf.zeros([4, 3]))
      lib.Checkpoint(weight=weight, step=step).restore(latest).assert_consumed()
      _assert_values({"weight": expected}, {"weight": weight.numpy()},
                     f"saved by {writer}, restored by {reader}")
  return {"paths": paths, "expected": expected.tolist()}


def _barrier(strategy):
  """Returns once every worker got here (an all-reduce waits for them)."""

  @tf.function
  def all_here():
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        "sum", tf.constant(1.)))

  assert strategy.experimental_local_results(all_here())[0].numpy() == 2.


class _StopAtEpoch(Exception):
  """Raised by `_Interrupt`: a job stopped during training."""


def mwms_backup_and_restore(directory, impl):
  """tf_keras `fit` with `BackupAndRestore`, interrupted, then fit again.

  With `impl` "ours", TensorFlow is patched (`patch_tensorflow()`) so that
  the callback's checkpoints and managers are ours. The first `fit` stops
  at its third epoch; the second resumes from the backup. Prints
  `{"epochs_begun": of the second fit, "saved": the backup's folders,
  "weights": ..., "left": files of the backup at the end}`.
  """
  import tf_keras  # pylint: disable=import-outside-toplevel
  import tf_objckpt  # pylint: disable=import-outside-toplevel

  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  backup = os.path.join(directory, impl, "backup")
  epochs_begun = []

  class Interrupt(tf_keras.callbacks.Callback):

    def on_epoch_begin(self, epoch, logs=None):
      epochs_begun.append(epoch)
      if epoch == 2 and len(epochs_begun) == 3:
        raise _StopAtEpoch(epoch)

  def fit():
    tf_keras.utils.set_random_seed(7)
    with strategy.scope():
      model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=[3])])
      model.compile(tf_keras.optimizers.SGD(0.1), "mse")
    data = tf.data.Dataset.from_tensor_slices(
        (np.arange(24, dtype=np.float32).reshape(8, 3) / 24,
         np.ones([8, 2], np.float32))).batch(4).repeat()
    model.fit(
        data,
        epochs=4,
        steps_per_epoch=2,
        verbose=0,
        callbacks=[tf_keras.callbacks.BackupAndRestore(backup),
                   Interrupt()])
    return model

  if impl == "ours":
    tf_objckpt.patch_tensorflow()
  try:
    fit()
  except _StopAtEpoch:
    pass
  saved = sorted(tf.io.gfile.listdir(backup))
  del epochs_begun[:]
  model = fit()
  return {
      "epochs_begun": epochs_begun,
      "saved": saved,
      "weights": [weight.tolist() for weight in model.get_weights()],
      "left": tl.files_under(backup) if os.path.exists(backup) else []
  }


SCENARIOS.update({
    "mwms_managers": mwms_managers,
    "mwms_backup_and_restore": mwms_backup_and_restore,
})

# ----------------------------------------------------------------------------
# v1 between-graph replication: ps processes, and this worker.
# ----------------------------------------------------------------------------


def v1_between_graph(directory, impl, last_step, crash_at=0):
  """Trains on the ps tasks with `MonitoredTrainingSession` to `last_step`.

  The graph is placed by `replica_device_setter`; `impl`'s
  `Saver(sharded=True)` saves every 4 steps into `directory`. With
  `crash_at`, the process exits (as if killed) once that step has run,
  without the session's last save. Prints `{"started_at": the step the
  session began at, "weight": its value then, "finished_at": ...}`.
  """
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  spec = resolver.cluster_spec()
  server = tf.distribute.Server(spec,
                                job_name="worker",
                                task_index=0,
                                protocol="grpc")
  with tf.Graph().as_default():
    with tf.compat.v1.device(
        tf.compat.v1.train.replica_device_setter(cluster=spec)):
      global_step = tf.compat.v1.train.get_or_create_global_step()
      weight = tf.compat.v1.get_variable("weight", [8],
                                         initializer=tf.zeros_initializer())
      bias = tf.compat.v1.get_variable("bias", [],
                                       initializer=tf.zeros_initializer())
      with tf.control_dependencies(
          [weight.assign_add(tf.ones([8])),
           bias.assign_sub(1.)]):
        train_op = global_step.assign_add(1)
    devices = {variable.device for variable in (global_step, weight, bias)}
    assert len(devices) == 2, devices  # Round robin over the two ps tasks.
    saver = tl.IMPLS[impl].Saver(sharded=True, max_to_keep=3)
    with tf.compat.v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=True,
        checkpoint_dir=directory,
        scaffold=tf.compat.v1.train.Scaffold(saver=saver),
        save_checkpoint_steps=4,
        save_checkpoint_secs=None,
        save_summaries_steps=None,
        save_summaries_secs=None,
        log_step_count_steps=None,
        hooks=[tf.compat.v1.train.StopAtStepHook(last_step=int(last_step))
              ]) as session:
      started = session.run({"step": global_step, "weight": weight})
      step = started["step"]
      while not session.should_stop():
        step = session.run(train_op)
        if step == int(crash_at):
          print(json.dumps({"started_at": int(started["step"])}), flush=True)
          os._exit(0)  # pylint: disable=protected-access
  return {
      "started_at": int(started["step"]),
      "weight": started["weight"].tolist(),
      "finished_at": int(step)
  }


SCENARIOS["v1_between_graph"] = v1_between_graph


def mwms_killed_save(directory, impl, start, mib):
  """A worker's saves of a `mib` MiB variable, one of which is killed.

  Each worker saves with `impl`'s manager into `_write_directory`. With
  `start` "save": a save, `{"saved": path}` printed, then new values,
  "saving" printed, and a save the test kills the chief during (then
  `{"error": ..., "latest": ...}` if this worker lives). With "recover"
  (the workers started again): the chief's latest checkpoint is restored
  and checked against the file, a step trained, and a save made; prints
  `{"restored": path, "saved": path, "left": files no checkpoint owns}`.
  """
  strategy = tf.distribute.MultiWorkerMirroredStrategy()
  size = int(float(mib) * 2**20) // 4
  with strategy.scope():
    variables = {
        "big": tf.Variable(tf.zeros([size]), name="big"),
        "weight": tf.Variable(tf.zeros([4]), name="weight")
    }
  lib = tl.IMPLS[impl]
  real_directory = os.path.join(directory, impl)
  write_directory = _write_directory(real_directory, strategy)
  manager = lib.CheckpointManager(lib.Checkpoint(**variables),
                                  write_directory,
                                  max_to_keep=2)

  def assign(value):
    for variable in variables.values():
      variable.assign(tf.fill(variable.shape, value))

  def save():
    path = manager.save()
    if write_directory != real_directory:
      tf.io.gfile.rmtree(write_directory)
    return path

  if start == "recover":
    restored = tf.train.latest_checkpoint(real_directory)
    manager.checkpoint.restore(restored).assert_consumed()
    stored = tl.values_by_name(restored)
    _assert_values({name: stored[name] for name in variables},
                   _values(variables), f"restored from {restored}")
    _barrier(strategy)
    saved = save()
    _barrier(strategy)
    return {
        "restored": restored,
        "saved": saved,
        "left": tl.leftovers(real_directory),
        "files": sorted(os.listdir(real_directory))
    }
  assign(1.)
  print(json.dumps({"saved": save()}), flush=True)
  _barrier(strategy)
  assign(2.)
  print("saving", flush=True)
  try:
    save()
    error = None
  except tf.errors.OpError as e:
    error = [type(e).__name__, e.message]
  return {"error": error, "latest": tf.train.latest_checkpoint(real_directory)}


SCENARIOS["mwms_killed_save"] = mwms_killed_save
