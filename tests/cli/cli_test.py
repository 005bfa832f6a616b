"""The command line tool, run as a real process on real checkpoints.

`python -m tf_objckpt inspect | verify | diff` on checkpoints written by
TensorFlow and by tf_objckpt (object-based and name-based), and on damaged,
truncated and incomplete copies. TensorFlow's reader is the oracle: what
`tf.train.list_variables` lists is what `inspect --keys` lists, and a copy
TensorFlow cannot read all of is one `verify` fails.

Covers: tf_objckpt.__main__, tf_objckpt.tools.cli,
tf_objckpt.tools.inspect_checkpoint, tf_objckpt.tools.diff_checkpoints,
tf_objckpt.inspection.checkpoint_listing,
tf_objckpt.inspection.verify_checkpoint.
"""

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
from tf_objckpt.engine import bundle_index

KERNEL = "model/layer_with_weights-0/kernel/.ATTRIBUTES/VARIABLE_VALUE"


def _objects():
  model, optimizer = tl.trained("tf_keras", "sequential")
  big = tf.Variable(np.arange(1000, dtype=np.float32))
  return dict(model=model, optimizer=optimizer, big=big)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
  """Directories of checkpoints: by TensorFlow, by us, name-based."""
  root = tmp_path_factory.mktemp("checkpoints")
  objects = _objects()
  for impl in ("tf", "ours"):
    tl.IMPLS[impl].Checkpoint(**objects).save(str(root / impl / "ckpt"))
  with tf.Graph().as_default():
    with tf.compat.v1.variable_scope("dense"):
      tf.compat.v1.get_variable("kernel",
                                initializer=np.arange(6,
                                                      dtype=np.float32).reshape(
                                                          3, 2))
      tf.compat.v1.get_variable("bias", initializer=[0.5, -0.5])
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      saver.save(session, str(root / "names" / "model"), global_step=7)
  return root


def _copy(checkpoint_dir, destination):
  """A copy of the directory's latest checkpoint; returns its prefix."""
  prefix = tf.train.latest_checkpoint(str(checkpoint_dir))
  os.makedirs(destination)
  for name in os.listdir(checkpoint_dir):
    if name.startswith(os.path.basename(prefix) + "."):
      shutil.copy(os.path.join(checkpoint_dir, name), destination)
  return os.path.join(destination, os.path.basename(prefix))


def _data_file(prefix):
  return prefix + ".data-00000-of-00001"


def _tf_reads_everything(prefix):
  """Whether TensorFlow's reader reads every value of the checkpoint."""
  try:
    reader = tf.train.load_checkpoint(prefix)
    for key in reader.get_variable_to_shape_map():
      reader.get_tensor(key)
  except Exception:  # pylint: disable=broad-except
    return False
  return True


def test_inspect_shows_the_same_tree_for_tensorflows_and_ours(checkpoints):
  outputs = {
      impl: tl.run_cli("inspect", checkpoints / impl) for impl in ("tf", "ours")
  }
  for impl, result in outputs.items():
    assert result.returncode == 0, result.stderr
    latest = tf.train.latest_checkpoint(str(checkpoints / impl))
    assert f"its latest checkpoint {latest!r}" in result.stderr
  trees = {
      impl: result.stdout.split("\n", 1)[1] for impl, result in outputs.items()
  }
  assert trees["tf"] == trees["ours"]
  tree = trees["ours"]
  assert "\n  model\n    layer_with_weights-0\n" in tree
  assert "      kernel: float32 (4, 8) 128 B\n" in tree
  assert "    layer-0 -> model/layer_with_weights-0\n" in tree
  assert "  big: float32 (1000,) 3.9 KiB\n" in tree
  values = len(
      tf.train.list_variables(
          tf.train.latest_checkpoint(str(checkpoints / "tf")))) - 1
  assert re.search(rf"Total: {values} values, [\d.]+ KiB, 1 shard\n$", tree)


@pytest.mark.parametrize("kind", ["tf", "names"])
def test_inspect_keys_are_tensorflows_variables(checkpoints, kind):
  """`--keys`: one key per line and nothing else; `--json`: their types."""
  prefix = tf.train.latest_checkpoint(str(checkpoints / kind))
  result = tl.run_cli("inspect", prefix, "--keys")
  assert result.returncode == 0, result.stderr
  assert result.stderr == ""
  expected = [
      key for key, _ in tf.train.list_variables(prefix)
      if key != tl.OBJECT_GRAPH_KEY
  ]
  assert result.stdout.splitlines() == expected
  listed = json.loads(tl.run_cli("inspect", prefix, "--json").stdout)
  reader = tf.train.load_checkpoint(prefix)
  assert {
      value["key"]: (value["dtype"], value["shape"])
      for value in listed["values"]
  } == {
      key: (reader.get_variable_to_dtype_map()[key].name, shape)
      for key, shape in tf.train.list_variables(prefix)
      if key != tl.OBJECT_GRAPH_KEY
  }


def test_inspect_name_based_checkpoint_as_a_tree_of_names(checkpoints):
  result = tl.run_cli("inspect", checkpoints / "names")
  assert result.returncode == 0, result.stderr
  assert "(name-based)" in result.stdout
  assert "\ndense\n  bias: float32 (2,) 8 B\n  kernel: float32 (3, 2) 24 B\n" in (
      result.stdout)


def test_inspect_json_and_values(checkpoints):
  prefix = tf.train.latest_checkpoint(str(checkpoints / "ours"))
  result = tl.run_cli("inspect", prefix, "--json")
  assert result.returncode == 0, result.stderr
  listing = json.loads(result.stdout)
  by_key = {value["key"]: value for value in listing["values"]}
  assert by_key[KERNEL]["object_path"] == "model/layer_with_weights-0/kernel"
  assert by_key[KERNEL]["shape"] == [4, 8]
  assert by_key[KERNEL]["bytes"] == 128
  assert listing["totals"]["values"] == len(by_key)
  assert listing["totals"]["shards"] == 1
  assert "optimizer/_iterations" in {obj["path"] for obj in listing["objects"]}

  result = tl.run_cli("inspect", prefix, "--values", "big", KERNEL)
  assert result.returncode == 0, result.stderr
  kernel = tf.train.load_checkpoint(prefix).get_tensor(KERNEL)
  assert "[0, 1, 2, 3, 4, ...] (1000 values; min 0, max 999, " \
      "mean 499.5)" in result.stdout
  assert f"{kernel[0, 0]:.6g}" in result.stdout  # As printed: 6 digits.

  result = tl.run_cli("inspect", prefix, "--values", "no/such/key")
  assert result.returncode == 2
  assert "No value 'no/such/key'" in result.stderr
  assert "Closest" not in result.stderr

  result = tl.run_cli("inspect", prefix, "--values",
                      "model/layer_with_weights-0/kernal")
  assert result.returncode == 2
  assert (f"No value 'model/layer_with_weights-0/kernal' in checkpoint "
          f"{prefix!r}. Closest: model/layer_with_weights-0/kernel, ") in (
              result.stderr)


@pytest.mark.parametrize("kind", ["tf", "ours", "names"])
def test_verify_accepts_intact_checkpoints(checkpoints, kind):
  result = tl.run_cli("verify", checkpoints / kind)
  assert result.returncode == 0, result.stdout + result.stderr
  assert result.stdout.rstrip().endswith("; OK")
  assert "error:" not in result.stdout


def test_verify_names_the_file_and_key_of_a_damaged_value(
    checkpoints, tmp_path):
  prefix = _copy(checkpoints / "tf", tmp_path / "damaged")
  entry = bundle_index.read_bundle_index(prefix).entries[KERNEL]
  with open(_data_file(prefix), "r+b") as f:
    f.seek(entry.offset + 3)
    byte = f.read(1)
    f.seek(entry.offset + 3)
    f.write(bytes([byte[0] ^ 0xFF]))
  assert not _tf_reads_everything(prefix)
  result = tl.run_cli("verify", prefix)
  assert result.returncode == 1, result.stdout + result.stderr
  errors = [
      line for line in result.stdout.splitlines() if line.startswith("error:")
  ]
  assert errors == [
      f"error: {_data_file(prefix)}: {KERNEL}: cannot be read: "
      f"DataLossError: {errors[0].split('DataLossError: ')[1]}"
  ]
  assert "Checksum does not match" in errors[0]
  assert "1 problem found" in result.stdout


def test_verify_truncated_missing_and_unreadable_copies(checkpoints, tmp_path):
  truncated = _copy(checkpoints / "ours", tmp_path / "truncated")
  size = os.path.getsize(_data_file(truncated))
  with open(_data_file(truncated), "r+b") as f:
    f.truncate(size // 2)
  missing = _copy(checkpoints / "names", tmp_path / "missing")
  os.remove(_data_file(missing))
  bad_index = _copy(checkpoints / "tf", tmp_path / "bad_index")
  with open(bad_index + ".index", "r+b") as f:
    f.truncate(20)
  for prefix in (truncated, missing, bad_index):
    assert not _tf_reads_everything(prefix)

  result = tl.run_cli("verify", truncated)
  assert result.returncode == 1
  assert (f"error: {_data_file(truncated)}: data file is truncated: "
          f"{size // 2} bytes") in result.stdout
  beyond = re.findall(r"^  (\S+)$", result.stdout, re.MULTILINE)
  assert beyond  # One problem each; the truncation is not one more.
  assert f"{len(beyond)} values beyond its end cannot be read" in (
      result.stdout)
  assert f"; {len(beyond)} problems found" in result.stdout

  result = tl.run_cli("verify", missing)
  assert result.returncode == 1
  assert (f"error: {_data_file(missing)}: data file is missing; it holds 2 "
          "values\n  dense/bias\n  dense/kernel\n") in result.stdout
  assert result.stdout.endswith("; 2 problems found\n")

  result = tl.run_cli("verify", bad_index)
  assert result.returncode == 1
  assert "DataLossError" in result.stderr and bad_index in result.stderr


def test_verify_reports_object_graph_faults_and_unreferenced_values(
    checkpoints, tmp_path):
  prefix = tf.train.latest_checkpoint(str(checkpoints / "ours"))
  graph = tl.object_graph(prefix)
  reader = tf.train.load_checkpoint(prefix)
  values = {
      key: reader.get_tensor(key)
      for key in reader.get_variable_to_shape_map()
      if key != tl.OBJECT_GRAPH_KEY
  }
  values["stray/value"] = np.ones(3, np.float32)
  kernel = next(node for node in graph.nodes for attribute in node.attributes
                if attribute.checkpoint_key == KERNEL)
  del values[KERNEL]
  values[tl.OBJECT_GRAPH_KEY] = graph.SerializeToString()
  out = str(tmp_path / "crafted")
  tf.raw_ops.SaveV2(prefix=out,
                    tensor_names=list(values),
                    shape_and_slices=[""] * len(values),
                    tensors=list(values.values()))
  assert kernel.attributes
  result = tl.run_cli("verify", out)
  assert result.returncode == 1, result.stdout
  assert (f"error: {_data_file(out)}: {tl.OBJECT_GRAPH_KEY}: node "
          in result.stdout)
  assert ("(model/layer_with_weights-0/kernel): attribute 'VARIABLE_VALUE' "
          f"names checkpoint key '{KERNEL}'") in result.stdout
  assert (f"warning: {_data_file(out)}: stray/value: no object of the object "
          "graph refers to this value") in result.stdout
  assert "1 problem found, 1 warning" in result.stdout


def test_verify_reports_a_damaged_object_graph_once(checkpoints, tmp_path):
  prefix = _copy(checkpoints / "ours", tmp_path / "graph")
  entry = bundle_index.read_bundle_index(prefix).entries[tl.OBJECT_GRAPH_KEY]
  with open(_data_file(prefix), "r+b") as f:
    f.seek(entry.offset + 3)
    byte = f.read(1)
    f.seek(entry.offset + 3)
    f.write(bytes([byte[0] ^ 0xFF]))
  with pytest.raises(tf.errors.OpError, match="checksum does not match"):
    tf.train.Checkpoint().read(prefix)
  result = tl.run_cli("verify", prefix)
  assert result.returncode == 1, result.stdout + result.stderr
  lines = result.stdout.splitlines()
  assert len(lines) == 2, result.stdout
  assert lines[0].startswith(f"error: {_data_file(prefix)}: "
                             f"{tl.OBJECT_GRAPH_KEY}: cannot be read: "
                             "DataLossError: ")
  assert lines[1].endswith("; 1 problem found")
  assert result.stderr == ""


def test_diff_sets_bookkeeping_apart(tmp_path):
  """Two saves of one run differ in the save counter only."""
  objects = _objects()
  checkpoint = tl.IMPLS["tf"].Checkpoint(**objects)
  first = checkpoint.save(str(tmp_path / "ckpt"))
  second = checkpoint.save(str(tmp_path / "ckpt"))
  result = tl.run_cli("diff", first, second)
  assert result.returncode == 0, result.stdout + result.stderr
  assert result.stdout == (
      f"A: {first}\nB: {second}\nNo differences apart from bookkeeping.\n"
      "Bookkeeping changed, not counted without --include-bookkeeping (1):\n"
      "  ~ save_counter/.ATTRIBUTES/VARIABLE_VALUE: max abs diff 1\n")
  counted = tl.run_cli("diff", first, second, "--include-bookkeeping")
  assert counted.returncode == 1
  assert "Bookkeeping changed, counted (1):\n" in counted.stdout

  objects["big"].assign_add(tf.ones([1000]))
  third = tl.IMPLS["tf"].Checkpoint(**objects).write(str(tmp_path / "plain"))
  result = tl.run_cli("diff", second, third)
  assert result.returncode == 1
  assert result.stdout.split("\n", 2)[2].startswith(
      "Values changed (atol=0) (1):\n"
      "  ~ big/.ATTRIBUTES/VARIABLE_VALUE: max abs diff 1\n"
      "Bookkeeping changed, not counted without --include-bookkeeping (3):\n"
      "  - save_counter/.ATTRIBUTES/VARIABLE_VALUE int64 () 8 B\n"
      "  - object save_counter\n"
      f"  ~ {tl.OBJECT_GRAPH_KEY}: the serialized object graph differs (")


def test_diff_lists_keys_values_and_objects(checkpoints, tmp_path):
  identical = tl.run_cli("diff", checkpoints / "tf", checkpoints / "ours")
  assert identical.returncode == 0, identical.stdout + identical.stderr
  assert identical.stdout.rstrip().endswith("No differences.")

  objects = _objects()
  first = tl.IMPLS["ours"].Checkpoint(**objects).write(str(tmp_path / "a"))
  objects["big"].assign_add(tf.fill([1000], 0.25))
  objects["extra"] = tf.Variable(np.zeros((2, 2), np.float32))
  second = tl.IMPLS["tf"].Checkpoint(**objects).write(str(tmp_path / "b"))
  result = tl.run_cli("diff", first, second)
  assert result.returncode == 1
  assert "Only in B (1):\n  + extra/.ATTRIBUTES/VARIABLE_VALUE float32 (2, 2)" \
      in result.stdout
  assert ("Values changed (atol=0) (1):\n  ~ big/.ATTRIBUTES/VARIABLE_VALUE: "
          "max abs diff 0.25\n") in result.stdout
  assert "Object graph changed (1):\n  + object extra\n" in result.stdout
  assert KERNEL not in result.stdout  # Unchanged.

  tolerant = tl.run_cli("diff", first, second, "--atol", "10")
  assert tolerant.returncode == 1
  assert "Values changed" not in tolerant.stdout
  assert "+ object extra" in tolerant.stdout


def test_usage_errors_and_help(tmp_path):
  assert tl.run_cli().returncode == 2
  assert tl.run_cli("inspect").returncode == 2
  assert tl.run_cli("diff", tmp_path, "--atol", "x").returncode == 2
  empty = tl.run_cli("verify", tmp_path)
  assert empty.returncode == 2
  assert "is a directory without checkpoints" in empty.stderr
  absent = tl.run_cli("inspect", tmp_path / "nothing")
  assert absent.returncode == 2
  assert "No checkpoint found" in absent.stderr
  for command in ("inspect", "verify", "diff", "convert"):
    result = tl.run_cli(command, "--help")
    assert result.returncode == 0
    assert f"example:\n  tf-objckpt {command} " in result.stdout


def test_console_script_runs_the_same_main():
  setup = open(os.path.join(tl.REPO_ROOT, "setup.py")).read()
  assert '"tf-objckpt = tf_objckpt.tools.cli:run"' in setup
  result = tl.run_python(
      "import sys; sys.argv = ['tf-objckpt', 'verify', '--help']\n"
      "from tf_objckpt.tools import cli; cli.run()")
  assert result.returncode == 0
  assert result.stdout.startswith("usage: tf-objckpt verify")


_SHARDED_SAVE = """
import sys
import numpy as np
import tensorflow as tf
with tf.Graph().as_default():
  with tf.device("/cpu:0"):
    tf.compat.v1.get_variable("a", initializer=np.arange(4, dtype=np.float32))
  with tf.device("/cpu:1"):
    tf.compat.v1.get_variable("b", initializer=np.arange(8, dtype=np.float32))
  saver = tf.compat.v1.train.Saver(sharded=True)
  config = tf.compat.v1.ConfigProto(device_count={"CPU": 2})
  with tf.compat.v1.Session(config=config) as session:
    session.run(tf.compat.v1.global_variables_initializer())
    saver.save(session, sys.argv[1])
"""


def test_verify_reads_every_shard(tmp_path):
  prefix = str(tmp_path / "sharded")
  written = tl.run_python(_SHARDED_SAVE, prefix)
  assert written.returncode == 0, written.stderr
  shards = [f"{prefix}.data-0000{index}-of-00002" for index in range(2)]
  assert all(os.path.exists(shard) for shard in shards)
  result = tl.run_cli("verify", prefix)
  assert result.returncode == 0, result.stdout + result.stderr
  assert "read 2 values (48 B, 2 shards)" in result.stdout
  os.remove(shards[1])
  assert not _tf_reads_everything(prefix)
  result = tl.run_cli("verify", prefix)
  assert result.returncode == 1
  assert result.stdout.startswith(
      f"error: {shards[1]}: data file is missing; it holds 1 value\n  b\n")
  assert "read 1 value (16 B, 2 shards)" in result.stdout
  assert result.stdout.endswith("; 1 problem found\n")


def test_progress_line_only_on_a_terminal(checkpoints):
  """stderr a terminal: a progress line, cleared at the end; else none."""
  prefix = tf.train.latest_checkpoint(str(checkpoints / "ours"))
  plain = tl.run_cli("verify", prefix)
  assert "verifying:" not in plain.stderr
  main, secondary = pty.openpty()
  try:
    env = dict(os.environ,
               TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join(
                   [tl.REPO_ROOT,
                    os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-m", "tf_objckpt", "verify", prefix],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env=env,
        timeout=300,
        check=False)
    os.close(secondary)
    terminal = b""
    while select.select([main], [], [], 0)[0]:
      try:
        chunk = os.read(main, 65536)
      except OSError:
        break
      if not chunk:
        break
      terminal += chunk
  finally:
    os.close(main)
  assert result.returncode == 0
  assert re.search(rb"\rverifying: \d+/\d+ values", terminal), terminal[-500:]
  assert terminal.rstrip().endswith(b"\r\x1b[K")
