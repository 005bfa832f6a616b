"""Programs that tests/distributed/ runs in child processes, on real clusters.

    python cluster_programs.py <scenario> <directory> [arguments...]

Each scenario starts its servers in-process (`tf.distribute.Server` on free
localhost ports), saves the same model with TensorFlow and with tf_objckpt
under `<directory>/<impl>/`, restores checkpoints both ways, checks every
restored value, and prints one JSON line last (checkpoint paths, by
implementation and kind, for the test to compare layouts). Any failure
exits non-zero. Run as a child because a cluster changes TensorFlow's
process-wide state (eager context, devices) for good.

More scenarios live beside this file and run through it: variables on
remote tasks (`remote_programs`) and TensorFlow's distribution strategies
with every task a process of its own (`strategy_programs`).
"""

import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

import testlib as tl

# Beside this file, which Python runs as a script: more scenarios.
import remote_programs
import strategy_programs

# The model every scenario saves: name -> value. Partitioners split the
# first axis.
EXPECTED = {
    "emb": np.arange(40, dtype=np.float32).reshape(10, 4),
    "dense": np.arange(6, dtype=np.float32) * 2,
    "scalar": np.float32(7.),
}
_PARTITIONERS = {
    "fixed":
        lambda num_ps: (tf.distribute.experimental.partitioners.
                        FixedShardsPartitioner(num_ps)),
    "min_size":
        lambda num_ps:
        (tf.distribute.experimental.partitioners.MinSizePartitioner(
            min_shard_bytes=32, max_shards=num_ps)),
    "max_size":
        lambda num_ps: (tf.distribute.experimental.partitioners.
                        MaxSizePartitioner(max_shard_bytes=48)),
}


def _model_variables(initial=None):
  """The model's variables, with `EXPECTED` values or zeros."""
  initial = initial or (lambda value: value)
  return {
      name: tf.Variable(initial(value), name=name)
      for name, value in EXPECTED.items()
  }


def _check_values(variables, source):
  for name, value in EXPECTED.items():
    actual = tf.convert_to_tensor(variables[name]).numpy()
    np.testing.assert_array_equal(actual,
                                  value,
                                  err_msg=f"{name} restored from {source}")


def _zeros(value):
  return np.zeros_like(value)


def _options(policy):
  if policy is None:
    return None
  return tf.train.CheckpointOptions(experimental_sharding_callback=policy)


def _policies():
  return {
      "default": None,
      "by_task": tf.train.experimental.ShardByTaskPolicy(),
      "max_size": tf.train.experimental.MaxShardSizePolicy(24)
  }


# ----------------------------------------------------------------------------
# Eager: ParameterServerStrategy with ShardedVariables.
# ----------------------------------------------------------------------------


def _strategy(num_ps, partitioner):
  """A ParameterServerStrategy: servers in this process, or TF_CONFIG's."""
  if "TF_CONFIG" in os.environ:  # The servers run in processes of their own.
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    assert len(resolver.cluster_spec().as_dict()["ps"]) == num_ps
  else:
    cluster = {
        "chief": tl.localhost_addresses(1),
        "worker": tl.localhost_addresses(1),
        "ps": tl.localhost_addresses(num_ps)
    }
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tl.start_servers_in_process(cluster, ["worker", "ps"]),
        rpc_layer="grpc")
  return tf.distribute.experimental.ParameterServerStrategy(
      resolver, variable_partitioner=_PARTITIONERS[partitioner](num_ps))


def _save_all_ways(lib, variables, directory):
  """Saves with save, write (each policy) and a manager; returns the paths."""
  checkpoint = lib.Checkpoint(**variables)
  paths = {"save": checkpoint.save(os.path.join(directory, "ckpt"))}
  for name, policy in _policies().items():
    paths[f"write_{name}"] = checkpoint.write(os.path.join(
        directory, f"write_{name}"),
                                              options=_options(policy))
  manager = lib.CheckpointManager(checkpoint,
                                  os.path.join(directory, "mgr"),
                                  max_to_keep=2)
  paths["manager"] = manager.save(
      options=_options(tf.train.experimental.MaxShardSizePolicy(24)))
  return paths


def _restore_all(paths_by_impl, make_variables, where):
  """Restores every checkpoint with both libraries, checking values."""
  for writer, paths in paths_by_impl.items():
    for kind, path in paths.items():
      for reader, lib in tl.IMPLS.items():
        variables = make_variables()
        lib.Checkpoint(**variables).restore(path).assert_nontrivial_match()
        _check_values(variables, f"{writer} {kind} by {reader} {where}")


def ps_strategy(directory, num_ps, partitioner, *sources):
  """Saves ShardedVariables on `num_ps` ps tasks; restores `sources` too.

  `sources` are JSON files of paths printed by other runs (other
  topologies, plain models) to restore here.
  """
  strategy = _strategy(int(num_ps), partitioner)
  with strategy.scope():
    variables = _model_variables()
  paths = {
      impl: _save_all_ways(lib, variables, os.path.join(directory, impl))
      for impl, lib in tl.IMPLS.items()
  }

  def make_variables():
    with strategy.scope():
      return _model_variables(_zeros)

  _restore_all(paths, make_variables, "(same topology)")
  for source in sources:
    with open(source) as f:
      _restore_all(json.load(f)["paths"], make_variables, f"from {source}")
  _restore_on_create(strategy, paths)
  shards = {
      name: len(getattr(variable, "variables", [variable]))
      for name, variable in variables.items()
  }
  return {"paths": paths, "shards": shards}


def _restore_on_create(strategy, paths_by_impl):
  """Restores before the variables exist; they start restored."""
  for writer, paths in paths_by_impl.items():
    for reader, lib in tl.IMPLS.items():
      checkpoint = lib.Checkpoint()
      status = checkpoint.read(paths["write_max_size"])
      with strategy.scope():
        variables = _model_variables(_zeros)
      for name, variable in variables.items():
        setattr(checkpoint, name, variable)
      status.assert_existing_objects_matched()
      _check_values(variables, f"{writer} on create by {reader}")


# ----------------------------------------------------------------------------
# Eager: one process, plain variables or several local devices.
# ----------------------------------------------------------------------------


def plain(directory, *sources):
  """Plain variables: restores `sources`' checkpoints, saves its own."""
  paths = {
      impl:
          _save_all_ways(lib, _model_variables(), os.path.join(directory, impl))
      for impl, lib in tl.IMPLS.items()
  }
  for source in sources:
    with open(source) as f:
      _restore_all(
          json.load(f)["paths"], lambda: _model_variables(_zeros),
          f"from {source}")
  return {"paths": paths}


def local_devices(directory):
  """Variables on three logical CPUs of one task."""
  cpu, = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
  variables = {}
  for index, (name, value) in enumerate(EXPECTED.items()):
    with tf.device(f"/cpu:{index}"):
      variables[name] = tf.Variable(value, name=name)
  assert variables["scalar"].device.endswith("CPU:2")
  paths = {
      impl: _save_all_ways(lib, variables, os.path.join(directory, impl))
      for impl, lib in tl.IMPLS.items()
  }
  _restore_all(paths, lambda: _model_variables(_zeros), "(local devices)")
  return {"paths": paths}


# ----------------------------------------------------------------------------
# Graph mode: between-graph replication over ps tasks.
# ----------------------------------------------------------------------------


def ps_graph(directory):
  """CheckpointV1 in graph mode, variables placed on two ps tasks."""
  cluster = {
      "worker": tl.localhost_addresses(1),
      "ps": tl.localhost_addresses(2)
  }
  spec = tl.start_servers_in_process(cluster, ["worker", "ps"])
  target = "grpc://" + cluster["worker"][0]
  paths = {
      impl: _graph_saves(impl, spec, target, os.path.join(directory, impl))
      for impl in tl.IMPLS
  }
  for writer, writer_paths in paths.items():
    for kind, path in writer_paths.items():
      for reader in tl.IMPLS:
        _graph_restore(reader, spec, target, path, f"{writer} {kind}")
  return {"paths": paths}


def _graph_variables(spec, zeros=False):
  """a on ps 1, b on ps 0, then the model placed by replica_device_setter."""
  variables = {}
  with tf.device("/job:ps/task:1"):
    variables["a"] = tf.Variable(0. if zeros else 1., name="a")
  with tf.device("/job:ps/task:0"):
    variables["b"] = tf.Variable(0. if zeros else 2., name="b")
  setter = tf.compat.v1.train.replica_device_setter(cluster=spec)
  with tf.compat.v1.device(setter):
    variables.update(_model_variables(_zeros if zeros else None))
  return variables


def _graph_saves(impl, spec, target, directory):
  lib = tl.IMPLS[impl]
  paths = {}
  with tf.Graph().as_default(), tf.compat.v1.Session(target) as session:
    variables = _graph_variables(spec)
    devices = {variable.device for variable in variables.values()}
    assert len({device.split("/device")[0] for device in devices
               }) == 2, (devices)
    session.run(tf.compat.v1.global_variables_initializer())
    paths["save"] = lib.CheckpointV1(**variables).save(os.path.join(
        directory, "ckpt"),
                                                       session=session)
    # A new checkpoint for each policy: TensorFlow's graph-mode saver keeps
    # its first save op whatever the options of later saves.
    for name, policy in _policies().items():
      paths[f"write_{name}"] = lib.CheckpointV1(**variables).write(
          os.path.join(directory, f"write_{name}"),
          session=session,
          options=_options(policy))
  return paths


def _graph_restore(impl, spec, target, path, source):
  lib = tl.IMPLS[impl]
  with tf.Graph().as_default(), tf.compat.v1.Session(target) as session:
    variables = _graph_variables(spec, zeros=True)
    status = lib.CheckpointV1(**variables).restore(path)
    status.assert_nontrivial_match().run_restore_ops(session)
    values = session.run(variables)
  assert values["a"] == 1. and values["b"] == 2., (source, values)
  for name, value in EXPECTED.items():
    np.testing.assert_array_equal(values[name],
                                  value,
                                  err_msg=f"{name} from {source} by {impl}")


# ----------------------------------------------------------------------------
# Preemption: a training job killed by SIGTERM, then restarted.
# ----------------------------------------------------------------------------


def preemption(directory, impl, kind, total_steps, resume_at=0):
  """Trains to `total_steps` under a PreemptionCheckpointHandler.

  Checks that the handler restored step `resume_at` (and the weight that
  goes with it). Prints `{"resumed_at": step}`, "step N" after each step,
  and `{"finished_at": step}` at the end. On SIGTERM the handler saves and
  exits with its restart code. `kind` is what the handler is given: our
  "manager" (or TensorFlow's, for impl "tf") or the "checkpoint".
  """
  lib = tl.IMPLS[impl]
  step = tf.Variable(0, dtype=tf.int64)
  weight = tf.Variable(0.)
  checkpoint = lib.Checkpoint(step=step, weight=weight)
  target = (lib.CheckpointManager(checkpoint, directory, max_to_keep=1)
            if kind == "manager" else checkpoint)
  handler = tf.distribute.experimental.PreemptionCheckpointHandler(
      tf.distribute.cluster_resolver.TFConfigClusterResolver(),
      target,
      checkpoint_dir=directory if kind == "checkpoint" else None)
  assert step.numpy() == int(resume_at), (step.numpy(), resume_at)
  assert weight.numpy() == step.numpy(), (weight.numpy(), step.numpy())
  assert handler.total_run_calls == step.numpy()
  print(json.dumps({"resumed_at": int(step.numpy())}), flush=True)

  @tf.function
  def train_step():
    step.assign_add(1)
    weight.assign_add(1.)

  while step.numpy() < int(total_steps):
    handler.run(train_step)
    print(f"step {step.numpy()}", flush=True)
    time.sleep(0.02)
  return {
      "finished_at": int(step.numpy()),
      "latest": tf.train.latest_checkpoint(directory)
  }


def server(directory):
  """A worker or ps task of the cluster in TF_CONFIG; serves until killed.

  It runs in `directory` ("-": where it was started).
  """
  if directory != "-":
    os.chdir(directory)
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  tf.distribute.Server(resolver.cluster_spec(),
                       job_name=resolver.task_type,
                       task_index=resolver.task_id,
                       protocol="grpc",
                       start=True).join()


_SCENARIOS = {
    "ps_strategy": ps_strategy,
    "plain": plain,
    "local_devices": local_devices,
    "ps_graph": ps_graph,
    "preemption": preemption,
    "server": server,
    **remote_programs.SCENARIOS,
    **strategy_programs.SCENARIOS,
}


def main(argv):
  scenario, directory, *args = argv[1:]
  result = _SCENARIOS[scenario](directory, *args)
  sys.stdout.flush()
  print(json.dumps(result))


if __name__ == "__main__":
  main(sys.argv)
