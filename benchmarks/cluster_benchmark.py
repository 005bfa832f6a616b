"""Times saves and restores on real localhost clusters, ours and TensorFlow's.

The clusters of the distributed tests, every task an OS process of its
own (started here, `--server`, and killed at the end):

- remote: eager variables on two ps tasks (`connect_to_cluster`), four
  variables, two on each task;
- pss: `ParameterServerStrategy`, a coordinator, two ps tasks and a
  worker; half the bytes in a variable partitioned over both ps tasks (a
  `ShardedVariable`), half in four plain ones.

Each measurement runs in a fresh client process (the coordinator, for
pss), the servers running on: the first and second `write()` of the
variables, the median of five more (a later write's usual pace: one
write's time swings with the load), then the first and second `read()`
of that checkpoint into them. Libraries alternate their order between
repetitions.

Run: python benchmarks/cluster_benchmark.py [--clusters=remote,pss]
     [--mib=256] [--repeats=3]
Prints one line per (cluster, measurement): the median seconds of each
library and TensorFlow's time divided by ours (above 1 means we are faster).
A last line per cluster shows where a later write's time goes: the bytes
alone (one SaveV2 per task at once, in a function traced before), which
both libraries' writes cost at least, timed the same way in each
library's clients: its ratio shows how much the machine's pace differed
between them (1 on a quiet machine). Last, one more client times both
libraries, taking turns, in rounds of a later write and a later read: the
same client's pace for both.
"""

import contextlib
import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app
from absl import flags
import tensorflow as tf

import fresh_process
import tf_objckpt

_CLUSTERS = flags.DEFINE_list("clusters", ["remote", "pss"],
                              "Which clusters to run.")
_MIB = flags.DEFINE_integer("mib", 256, "MiB of variables saved.")
_REPEATS = flags.DEFINE_integer("repeats", 3,
                                "Fresh clients per measurement and library.")
_CHILD = flags.DEFINE_string("child", None, "Internal: one measurement.")
_SERVER = flags.DEFINE_string("server", None,
                              "Internal: serve one task of TF_CONFIG.")

_LIBRARIES = {
    "tensorflow": tf.train.Checkpoint,
    "tf_objckpt": tf_objckpt.Checkpoint
}
_PLAIN_VARIABLES = 4
_FLOAT_BYTES = 4
_ROW = 1024  # Floats per row of the variables.
_LATER = 5  # Writes after the second, timed in each client.
_ALTERNATING = 8  # Rounds of the one client timing both libraries.


def _rows(mib):
  return mib * 2**20 // (_FLOAT_BYTES * _ROW)


def _remote_variables(mib):
  """Four variables of `mib` MiB in all, two on each ps task."""
  variables = {}
  for index in range(_PLAIN_VARIABLES):
    with tf.device(f"/job:ps/task:{index % 2}/cpu:0"):
      variables[f"v{index}"] = tf.Variable(
          tf.fill([_rows(mib) // _PLAIN_VARIABLES, _ROW], float(index)))
  return variables


def _pss_variables(mib):
  """Half in a variable partitioned over both ps tasks, half in four."""
  strategy = tf.distribute.experimental.ParameterServerStrategy(
      tf.distribute.cluster_resolver.TFConfigClusterResolver(),
      variable_partitioner=(
          tf.distribute.experimental.partitioners.FixedShardsPartitioner(2)))
  tf.distribute.coordinator.ClusterCoordinator(strategy)
  rows = _rows(mib) // 2
  with strategy.scope():
    variables = {"emb": tf.Variable(tf.ones([rows, _ROW]))}
    for index in range(_PLAIN_VARIABLES):
      variables[f"v{index}"] = tf.Variable(
          tf.fill([rows // _PLAIN_VARIABLES, _ROW], float(index)))
  return variables


def _cluster_variables(request):
  """Connects to the request's cluster; returns its variables."""
  if request["cluster"] == "remote":
    tf.config.experimental_connect_to_cluster(
        tf.train.ClusterSpec(request["spec"]))
    return _remote_variables(request["mib"])
  return _pss_variables(request["mib"])


def _run_child(request):
  """Times writes and reads with one library on the running cluster."""
  variables = _cluster_variables(request)
  if request.get("alternate"):
    fresh_process.emit(_alternating(variables, request["prefix"]))
    return
  checkpoint = _LIBRARIES[request["library"]](**variables)
  prefix = request["prefix"]
  fresh_process.clear(prefix, prefix + "_again")
  timings = {
      "first write":
          fresh_process.timed(lambda: checkpoint.write(prefix)),
      "second write":
          fresh_process.timed(lambda: checkpoint.write(prefix + "_again")),
  }
  timings[f"later write, median of {_LATER}"] = _median_of_later_writes(
      checkpoint, prefix)
  timings["first read"] = fresh_process.timed(
      lambda: checkpoint.read(prefix).assert_consumed())
  timings["second read"] = fresh_process.timed(
      lambda: checkpoint.read(prefix).assert_consumed())
  timings["floor: the shards alone"] = _shards_alone(variables,
                                                     prefix + "_floor")
  fresh_process.emit(timings)


def _alternating(variables, prefix):
  """`{library: {measurement: [seconds]}}` of both libraries in one client.

  After a first write and read each, `_ALTERNATING` rounds of a write (to
  a new prefix) and a read per library, the libraries taking turns: the
  client's pace, which differs from one process to the next, is the same
  for both.
  """
  checkpoints = {
      library: checkpoint_class(**variables)
      for library, checkpoint_class in _LIBRARIES.items()
  }
  times = {
      library: {
          "later write": [],
          "later read": []
      } for library in checkpoints
  }
  for library, checkpoint in checkpoints.items():
    checkpoint.read(checkpoint.write(f"{prefix}_{library}_warm"))
  for index in range(_ALTERNATING):
    for library, checkpoint in checkpoints.items():
      path = f"{prefix}_{library}_{index}"
      fresh_process.clear(path)
      times[library]["later write"].append(
          fresh_process.timed(functools.partial(checkpoint.write, path)))
      times[library]["later read"].append(
          fresh_process.timed(functools.partial(_read, checkpoint, path)))
  return times


def _read(checkpoint, path):
  checkpoint.read(path).assert_consumed()


def _median_of_later_writes(checkpoint, prefix):
  """The median seconds of `_LATER` more writes, each to a new prefix.

  One write's time swings with the machine's load; the median of several
  in one client shows its usual pace.
  """
  seconds = []
  for index in range(_LATER):
    path = f"{prefix}_later{index}"
    fresh_process.clear(path)
    seconds.append(
        fresh_process.timed(functools.partial(checkpoint.write, path)))
  return statistics.median(seconds)


def _shards_alone(variables, prefix):
  """Seconds the bytes of a later write take alone: where its time goes.

  One SaveV2 per task, all at once, through a function traced and run
  once before: no object graph, merge, state file or rename. A library's
  later write costs this plus its own work.
  """
  by_task = {}
  for name, variable in variables.items():
    for index, part in enumerate(getattr(variable, "variables", [variable])):
      task = tf.DeviceSpec.from_string(part.device).replace(device_type="CPU",
                                                            device_index=0)
      by_task.setdefault(task.to_string(), []).append((f"{name}/{index}", part))

  @tf.function(autograph=False)
  def write(path):
    written = []
    for index, (task, parts) in enumerate(by_task.items()):
      with tf.device(task):
        written.append(
            tf.raw_ops.SaveV2(prefix=tf.strings.join([path, str(index)]),
                              tensor_names=[name for name, _ in parts],
                              shape_and_slices=[""] * len(parts),
                              tensors=[part.read_value() for _, part in parts]))
    with tf.control_dependencies(written):
      return tf.identity(path)

  write(tf.constant(prefix + "_warm")).numpy()
  fresh_process.clear(prefix)
  return fresh_process.timed(lambda: write(tf.constant(prefix)).numpy())


def _serve():
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  tf.distribute.Server(resolver.cluster_spec(),
                       job_name=resolver.task_type,
                       task_index=resolver.task_id,
                       protocol="grpc").join()


def _free_addresses(count):
  sockets = [socket.socket() for _ in range(count)]
  try:
    for sock in sockets:
      sock.bind(("localhost", 0))
    return [f"localhost:{sock.getsockname()[1]}" for sock in sockets]
  finally:
    for sock in sockets:
      sock.close()


def _tf_config(spec, job, index):
  return json.dumps({"cluster": spec, "task": {"type": job, "index": index}})


@contextlib.contextmanager
def _servers(spec, jobs):
  """Runs a server process for every task of `jobs`; kills them after."""
  processes = [
      subprocess.Popen(  # pylint: disable=consider-using-with
          [sys.executable, __file__, "--server=1"],
          env=dict(os.environ,
                   TF_CONFIG=_tf_config(spec, job, index),
                   TF_CPP_MIN_LOG_LEVEL="2"),
          stdout=subprocess.DEVNULL,
          stderr=subprocess.DEVNULL)
      for job in jobs
      for index in range(len(spec[job]))
  ]
  try:
    for address in [address for job in jobs for address in spec[job]]:
      _wait_until_serving(address)
    yield
  finally:
    for process in processes:
      process.kill()
      process.wait()


def _wait_until_serving(address, timeout=60):
  host, port = address.rsplit(":", 1)
  deadline = time.time() + timeout
  while True:
    try:
      socket.create_connection((host, int(port)), timeout=1).close()
      return
    except OSError:
      if time.time() > deadline:
        raise
      time.sleep(0.05)


def _bench(cluster, directory, mib, repeats):
  """`{library: {measurement: [seconds]}}` on a new cluster of `cluster`."""
  spec = {"ps": _free_addresses(2)}
  child_env = {}
  if cluster == "pss":
    spec.update(chief=_free_addresses(1), worker=_free_addresses(1))
    child_env = {"TF_CONFIG": _tf_config(spec, "chief", 0)}
  servers = [job for job in spec if job != "chief"]
  os.environ.update(child_env)  # The children inherit it.
  try:
    with _servers(spec, servers):
      separate = fresh_process.repeated(
          repeats, lambda library: fresh_process.run_child(
              __file__,
              library=library,
              cluster=cluster,
              spec=spec,
              mib=mib,
              prefix=os.path.join(directory, f"{cluster}_{library}")))
      together = fresh_process.run_child(__file__,
                                         alternate=True,
                                         cluster=cluster,
                                         spec=spec,
                                         mib=mib,
                                         prefix=os.path.join(
                                             directory, f"{cluster}_both"))
      return separate, together
  finally:
    for name in child_env:
      del os.environ[name]


def main(argv):
  del argv
  if _SERVER.value:
    _serve()
    return
  if _CHILD.value:
    _run_child(json.loads(_CHILD.value))
    return
  with tempfile.TemporaryDirectory() as directory:
    for cluster in _CLUSTERS.value:
      print(f"{cluster}: {_MIB.value} MiB, load {os.getloadavg()[0]:.1f}",
            flush=True)
      separate, together = _bench(cluster, directory, _MIB.value,
                                  _REPEATS.value)
      fresh_process.print_medians(cluster, separate)
      print(f"{cluster}, both libraries in one client, alternating, medians "
            f"of {_ALTERNATING}:")
      fresh_process.print_medians(cluster, together)


if __name__ == "__main__":
  app.run(main)
