"""`MultiWorkerMirroredStrategy` with two worker processes.

Both workers (`strategy_programs`, one OS process each, on localhost)
train with all-reduces, then save with TensorFlow's manager and with ours,
the chief into the real directory and the other worker into a temporary
one it removes after, as TensorFlow's multi-worker tutorial does; then
both restore the chief's latest checkpoint with each library. The chief's
checkpoints must be byte-identical. In the same cluster, tf_keras's
`BackupAndRestore` (through ours when TensorFlow is patched, and
TensorFlow's) backs up a `fit` that is interrupted, and the next `fit`
resumes from the backup, with the same weights either way.

Covers: tf_objckpt.api.checkpoint_manager, tf_objckpt.tools.patching,
tf_objckpt.engine.writes.
"""

import os

import pytest

import testlib as tl

pytestmark = pytest.mark.distributed


def _on_both_workers(scenario, directory, *args, timeout=150):
  """Runs `scenario` on the two workers of a new cluster; returns theirs."""
  cluster = tl.ServerProcesses({}, clients={"worker": 2})
  workers = [
      tl.start_cluster_program(scenario,
                               str(directory),
                               *args,
                               env=cluster.env("worker", index))
      for index in range(2)
  ]
  try:
    return [
        tl.finish_cluster_program(worker, timeout, f"{scenario} worker {index}")
        for index, worker in enumerate(workers)
    ]
  finally:
    for worker in workers:
      tl.kill_group(worker)


def test_every_worker_saves_and_both_restore_the_chiefs(tmp_path):
  chief, other = _on_both_workers("mwms_managers", tmp_path, 3)
  assert chief["expected"] == other["expected"]
  for impl in tl.IMPLS:
    assert os.path.dirname(chief["paths"][impl]) == str(tmp_path / impl)
    assert "workertemp_1" in other["paths"][impl]
    assert sorted(os.listdir(tmp_path / impl)) == [
        "checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index"
    ]
  for suffix in (".index", ".data-00000-of-00001"):
    assert ((tmp_path / "ours" / "ckpt-1").with_suffix(suffix).read_bytes() == (
        tmp_path / "tf" / "ckpt-1").with_suffix(suffix).read_bytes())


def test_backup_and_restore_resumes_an_interrupted_fit(tmp_path):
  results = {
      impl: _on_both_workers("mwms_backup_and_restore", tmp_path, impl)
      for impl in tl.IMPLS
  }
  for impl, (chief, other) in results.items():
    assert chief["epochs_begun"] == other["epochs_begun"] == [2, 3], impl
    assert chief["saved"] == ["chief"], (impl, chief["saved"])
    assert chief["weights"] == other["weights"]
    assert not chief["left"], chief["left"]  # Removed once fit ended.
  assert results["ours"][0]["weights"] == results["tf"][0]["weights"]
