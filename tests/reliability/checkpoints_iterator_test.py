"""`checkpoints_iterator` and `wait_for_new_checkpoint`: new, finished, intact.

Both libraries yield each new checkpoint the state file names, stop at a
timeout (or when `timeout_fn` says so) and keep `min_interval_secs`
between checkpoints. Ours waits for a checkpoint whose index is not there
yet (its save still running), and skips one whose index is there but
whose files are missing, short or corrupt (damaged: its save had
finished) with one WARNING in `verify`'s words, naming the file, judging
it again when its files change; TensorFlow yields either once its index
exists. Timeouts are 0, so every wait is one look at the directory and
the outcome does not depend on the machine's speed; `min_interval_secs`
is checked against a fake clock.

Covers: tf_objckpt.api.checkpoint_polling, tf_objckpt.checkpoint_utils.
"""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

import testlib as tl
from tf_objckpt.api import checkpoint_polling
from tf_objckpt.engine import bundle_index

# TensorFlow 2.21 asks `timeout_fn` after each checkpoint it yields too.
_ASKS_AFTER_EACH_CHECKPOINT = not tf.__version__.startswith(("2.15.", "2.16."))


def _utils(impl):
  return tl.IMPLS[impl].checkpoint_utils


class _Trainer:
  """Saves numbered checkpoints into a directory, as a training job does."""

  def __init__(self, directory):
    self.directory = str(directory)
    self.variable = tf.Variable(np.zeros([64], np.float32))
    self.checkpoint = tf.train.Checkpoint(v=self.variable)
    self.manager = tf.train.CheckpointManager(self.checkpoint,
                                              self.directory,
                                              max_to_keep=None)

  def save(self):
    self.variable.assign_add(tf.ones([64]))
    return self.manager.save()

  def prefix(self, number):
    return os.path.join(self.directory, f"ckpt-{number}")


def _iterate(impl, directory, timeout_fn, **kwargs):
  """The prefixes `impl`'s iterator yields, as numbers ("ckpt-3" -> 3)."""
  utils = _utils(impl)
  return [
      int(path.rsplit("-", 1)[1]) for path in utils.checkpoints_iterator(
          directory, timeout=0, timeout_fn=timeout_fn, **kwargs)
  ]


def _saving_while_waiting(trainer, saves, damage=None):
  """A `timeout_fn` that saves `saves` more checkpoints, one per timeout.

  `damage(number)` may damage checkpoint `number` right after its save.
  Returns True (stop) once every save is made and seen by one more wait.
  """
  state = {"left": saves}

  def timeout_fn():
    if state["left"] == 0:
      return True
    state["left"] -= 1
    path = trainer.save()
    if damage:
      damage(int(path.rsplit("-", 1)[1]))
    return False

  return timeout_fn


def _in_fresh_directories(tmp_path, scenario):
  """`{impl: scenario(impl, _Trainer)}`, each in a directory of its own."""
  return {impl: scenario(impl, _Trainer(tmp_path / impl)) for impl in tl.IMPLS}


def _skipped(messages):
  """The messages of logged warnings that a checkpoint was skipped."""
  return [
      message for message in messages
      if message.startswith(("Skipped checkpoint", "Skipped damaged"))
  ]


def _truncate(data_file):
  """Cuts a data file in half; returns its content and the verify words."""
  with open(data_file, "rb") as f:
    content = f.read()
  with open(data_file, "wb") as f:
    f.write(content[:len(content) // 2])
  return content, (f"{data_file}: data file is truncated: {len(content) // 2} "
                   f"bytes, the index places values up to byte {len(content)}")


def _flip_value(prefix):
  index = bundle_index.read_bundle_index(prefix)
  key = "v/.ATTRIBUTES/VARIABLE_VALUE"
  entry = index.entries[key]
  with open(index.data_file_of(key), "r+b") as f:
    f.seek(entry.offset + 8)
    f.write(b"\xa5\xa5\xa5\xa5")


def test_yields_each_new_checkpoint_then_times_out(tmp_path):

  def scenario(impl, trainer):
    trainer.save()
    return _iterate(impl, trainer.directory,
                    _saving_while_waiting(trainer, saves=3))

  assert _in_fresh_directories(tmp_path, scenario) == {
      "tf": [1, 2, 3, 4],
      "ours": [1, 2, 3, 4]
  }


def test_timeout_without_timeout_fn_ends_the_iterator(tmp_path):
  empty = tmp_path / "empty"
  empty.mkdir()
  assert tl.agreed(_iterate, str(empty), None) == []

  def scenario(impl, trainer):
    trainer.save()
    trainer.save()
    return _iterate(impl, trainer.directory, None)

  # Only the latest, then the timeout.
  assert tl.by_impl(lambda impl: scenario(impl, _Trainer(tmp_path / impl))) == {
      "tf": [2],
      "ours": [2]
  }


def test_timeout_fn_is_asked_after_each_checkpoint_as_in_2_21(tmp_path):

  def save_after_each_yield(impl, trainer):
    trainer.save()
    seen = []
    utils = _utils(impl)
    for path in utils.checkpoints_iterator(trainer.directory,
                                           timeout=0,
                                           timeout_fn=lambda: True):
      seen.append(path)
      if len(seen) < 3:
        trainer.save()
    return len(seen)

  # Told to stop right after checkpoint 1, although checkpoint 2 is there.
  # TensorFlow 2.15 and 2.16 ask only after a timeout: they see it, and 3.
  results = _in_fresh_directories(tmp_path, save_after_each_yield)
  assert results == {"ours": 1, "tf": 1 if _ASKS_AFTER_EACH_CHECKPOINT else 3}


class _FakeClock:
  """`time.time` and `time.sleep` of a clock that moves only when told."""

  def __init__(self):
    self.now = 1000.0
    self.slept = []

  def time(self):
    return self.now

  def sleep(self, seconds):
    self.slept.append(round(seconds, 6))
    self.now += seconds


def test_min_interval_secs_spaces_the_checkpoints(tmp_path, monkeypatch):

  def scenario(impl, trainer):
    clock = _FakeClock()
    module = (checkpoint_polling if impl == "ours" else _utils("tf"))
    monkeypatch.setattr(module, "time", clock)
    trainer.save()
    seen = []
    for path in _utils(impl).checkpoints_iterator(
        trainer.directory,
        min_interval_secs=30,
        timeout=0,
        timeout_fn=lambda: len(seen) >= 2):
      seen.append(path)
      clock.now += 5  # The evaluation takes 5 s.
      if len(seen) < 2:
        trainer.save()
    return len(seen), clock.slept

  assert _in_fresh_directories(tmp_path, scenario) == {
      "tf": (2, [25.0, 25.0]),
      "ours": (2, [25.0, 25.0])
  }


def test_waits_for_a_checkpoint_whose_index_is_not_there_yet(tmp_path):
  # The state file names checkpoint 2 before its files exist (TensorFlow's
  # asynchronous CheckpointManager does); both wait, then yield it.
  def scenario(impl, trainer):
    trainer.save()
    prefix_2 = trainer.save()
    hidden = {
        name: name + ".hidden"
        for name in (bundle_index.index_file_name(prefix_2),
                     bundle_index.data_file_name(prefix_2, 0, 1))
    }
    for name, hidden_name in hidden.items():
      os.rename(name, hidden_name)
    calls = []

    def timeout_fn():
      calls.append(None)
      if len(calls) == 2:  # Its save finishes.
        for name, hidden_name in hidden.items():
          os.rename(hidden_name, name)
      return len(calls) > 3

    # Not found by the first wait, nor after the first timeout.
    return _iterate(impl, trainer.directory, timeout_fn)

  assert _in_fresh_directories(tmp_path, scenario) == {"tf": [2], "ours": [2]}


def test_a_short_data_file_is_damage_until_its_copy_completes(tmp_path):
  """The index is there: its save had finished, the data file is damaged.

  Ours skips it with one WARNING in `verify`'s words, however many times
  it looks; once the file is whole again (a copy completing), it yields
  it. TensorFlow yields it at once.
  """

  def scenario(impl, trainer):
    prefix = trainer.save()
    data_file = bundle_index.data_file_name(prefix, 0, 1)
    content, words = _truncate(data_file)
    seen = []

    def timeout_fn():
      seen.append("timeout")
      if seen.count("timeout") == 3:  # The copy completes.
        with open(data_file, "wb") as f:
          f.write(content)
      return seen.count("timeout") > 4

    utils = _utils(impl)
    for path in utils.checkpoints_iterator(trainer.directory,
                                           timeout=0,
                                           timeout_fn=timeout_fn):
      seen.append(path)
    return seen, words

  with tl.captured_logs(logging.WARNING) as messages:
    results = _in_fresh_directories(tmp_path, scenario)
  assert results["tf"][0][0].endswith("ckpt-1")
  seen, words = results["ours"]
  assert seen[:3] == ["timeout"] * 3 and seen[3].endswith("ckpt-1")
  warnings = _skipped(messages)
  assert len(warnings) == 1, warnings
  assert words in warnings[0]


def test_skips_a_damaged_checkpoint_with_one_warning(tmp_path):

  def scenario(impl, trainer):
    trainer.save()
    damaged = []

    def damage(number):
      if number == 2:
        _flip_value(trainer.prefix(2))
        damaged.append(number)

    timeout_fn = _saving_while_waiting(trainer, saves=1, damage=damage)
    extra_waits = []

    def waiting_longer():
      # Three more looks at the damaged checkpoint, then checkpoint 3.
      if damaged and len(extra_waits) < 3:
        extra_waits.append(None)
        if len(extra_waits) == 3:
          trainer.save()
        return False
      return timeout_fn()

    return _iterate(impl, trainer.directory, waiting_longer)

  with tl.captured_logs(logging.WARNING) as messages:
    results = _in_fresh_directories(tmp_path, scenario)
  assert results == {"tf": [1, 2, 3], "ours": [1, 3]}
  warnings = _skipped(messages)
  assert len(warnings) == 1, warnings
  assert "Skipped damaged checkpoint" in warnings[0]
  assert str(tmp_path / "ours" / "ckpt-2") in warnings[0]
  assert "v/.ATTRIBUTES/VARIABLE_VALUE" in warnings[0]


def _iterate_ours_saving_once(trainer):
  """What our iterator yields while the trainer saves once, at its second
  timeout; it stops after two more."""
  looks = []

  def timeout_fn():
    looks.append(None)
    if len(looks) == 2:
      trainer.save()
    return len(looks) > 3

  return _iterate("ours", trainer.directory, timeout_fn)


def test_a_truncated_checkpoint_is_warned_about_once_in_verifys_words(tmp_path):
  """The newest checkpoint truncated: skipped, then a newer one yielded."""
  trainer = _Trainer(tmp_path)
  prefix = trainer.save()
  _, words = _truncate(bundle_index.data_file_name(prefix, 0, 1))
  with tl.captured_logs(logging.WARNING) as messages:
    assert _iterate_ours_saving_once(trainer) == [2]
  warnings = _skipped(messages)
  assert warnings == [
      f"Skipped damaged checkpoint {tmp_path / 'ckpt-1'}: error: {words}; 3 "
      "values beyond its end cannot be read"
  ]


def test_a_checkpoint_without_its_index_passed_over_is_warned_about_once(
    tmp_path):
  """Named, its index never there (a save that died): one WARNING."""
  trainer = _Trainer(tmp_path)
  prefix = trainer.save()
  os.remove(bundle_index.index_file_name(prefix))
  with tl.captured_logs(logging.WARNING) as messages:
    assert _iterate_ours_saving_once(trainer) == [2]
  assert _skipped(messages) == [
      f"Skipped checkpoint {prefix}: its index file "
      f"{bundle_index.index_file_name(prefix)!r} was not there when a newer "
      "checkpoint was named."
  ]


def test_a_damaged_checkpoint_saved_again_is_judged_again(tmp_path):
  # A training job restarted from checkpoint 1 saves checkpoint 2 again.
  trainer = _Trainer(tmp_path)
  trainer.save()
  prefix_2 = trainer.save()
  _flip_value(prefix_2)
  looks = []

  def timeout_fn():
    looks.append(None)
    if len(looks) == 2:
      trainer.variable.assign_add(tf.ones([64]))
      trainer.checkpoint.write(prefix_2)
    return len(looks) > 3

  with tl.captured_logs(logging.WARNING) as messages:
    utils = _utils("ours")
    seen = list(
        utils.checkpoints_iterator(trainer.directory,
                                   timeout=0,
                                   timeout_fn=timeout_fn))
  assert seen == [prefix_2]
  assert len(_skipped(messages)) == 1


@pytest.mark.parametrize("damage", ["corrupted", "unfinished", "intact"])
def test_wait_for_new_checkpoint(tmp_path, damage):
  trainer = _Trainer(tmp_path)
  first = trainer.save()
  second = trainer.save()
  if damage == "corrupted":
    _flip_value(second)
  elif damage == "unfinished":
    os.remove(bundle_index.data_file_name(second, 0, 1))
  waits = {
      impl:
          _utils(impl).wait_for_new_checkpoint(trainer.directory,
                                               first,
                                               timeout=0) for impl in tl.IMPLS
  }
  assert waits["tf"] == second
  assert waits["ours"] == (second if damage == "intact" else None)
  assert tl.agreed(lambda impl: _utils(impl).wait_for_new_checkpoint(
      trainer.directory, second, timeout=0)) is None
