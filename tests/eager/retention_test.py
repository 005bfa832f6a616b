"""Which checkpoints a manager keeps, decided without a clock or files.

`api.retention` decides what `CheckpointManager` keeps from its checkpoint
list alone. The first tests pin its rules on lists; the last ones replay,
on our functions, what TensorFlow's own `tf.train.CheckpointManager` did
under a frozen clock (its `checkpoints` after each save, which files it
deleted, and what a new manager resumes), and require the same answers.

Covers: tf_objckpt.api.retention, tf_objckpt.api.checkpoint_manager.
"""

import os
import random
import time

import pytest
import tensorflow as tf

from tf_objckpt.api import retention

HOUR = 3600.


def _saves(policy, times, active=(), last_preserved=0.):
  """Replays saves of ckpt-1, ckpt-2, ... at `times`; every `Retained`."""
  retained = []
  for number, now in enumerate(times, start=1):
    kept = retention.after_save(active, (f"ckpt-{number}", now), last_preserved,
                                policy)
    active, last_preserved = kept.active, kept.last_preserved_timestamp
    retained.append(kept)
  return retained


def _paths(checkpoints):
  return [path for path, _ in checkpoints]


def test_the_newest_max_to_keep_stay_and_the_oldest_go_first():
  retained = _saves(retention.Policy(max_to_keep=3), [1., 2., 3., 4., 5.])
  assert _paths(retained[-1].active) == ["ckpt-3", "ckpt-4", "ckpt-5"]
  assert [kept.deleted for kept in retained] == [(), (), (), ("ckpt-1",),
                                                 ("ckpt-2",)]
  assert retained[-1].active[-1] == ("ckpt-5", 5.)


@pytest.mark.parametrize("max_to_keep", [None, 0])
def test_without_max_to_keep_all_stay(max_to_keep):
  retained = _saves(retention.Policy(max_to_keep), [1., 2., 3.])
  assert _paths(retained[-1].active) == ["ckpt-1", "ckpt-2", "ckpt-3"]
  assert not any(kept.deleted for kept in retained)


def test_a_rewritten_prefix_moves_to_the_end_once():
  active = (("a", 1.), ("b", 2.), ("c", 3.))
  kept = retention.after_save(active, ("a", 4.), 0.,
                              retention.Policy(max_to_keep=3))
  assert kept.active == (("b", 2.), ("c", 3.), ("a", 4.))
  assert kept.deleted == ()


def test_one_leaving_an_interval_after_the_last_preserved_is_preserved():
  policy = retention.Policy(max_to_keep=1, keep_checkpoint_every_n_hours=1)
  # Saved exactly an hour after the last preserved one: preserved.
  kept = retention.after_save((("a", HOUR),), ("b", HOUR + 1), 0., policy)
  assert (kept.deleted, kept.last_preserved_timestamp) == ((), HOUR)
  assert kept.active == (("b", HOUR + 1),)
  # A second less: deleted, and the last preserved time stays.
  kept = retention.after_save((("a", HOUR - 1),), ("b", HOUR), 0., policy)
  assert (kept.deleted, kept.last_preserved_timestamp) == (("a",), 0.)


def test_preserved_ones_are_an_interval_apart():
  policy = retention.Policy(max_to_keep=2, keep_checkpoint_every_n_hours=1)
  retained = _saves(policy, [n * HOUR / 4 for n in range(1, 13)])
  deleted = [path for kept in retained for path in kept.deleted]
  leaving = [f"ckpt-{n}" for n in range(1, 11)]
  preserved = [path for path in leaving if path not in deleted]
  assert preserved == ["ckpt-4", "ckpt-8"]
  assert retained[-1].last_preserved_timestamp == 2 * HOUR


def test_a_restart_takes_those_newer_than_the_last_preserved():
  kept = retention.after_restart(["a", "b", "c"], [1., 2., 3.], 1.5, now=10.)
  assert kept == retention.Retained((("b", 2.), ("c", 3.)), 1.5)


def test_a_restart_takes_times_from_the_future_as_now():
  """A clock set back since the saves: their times become now."""
  kept = retention.after_restart(["a", "b"], [5., 30.], 2., now=10.)
  assert kept == retention.Retained((("a", 5.), ("b", 10.)), 2.)
  kept = retention.after_restart(["a", "b"], [5., 30.], 20., now=10.)
  assert kept == retention.Retained((), 10.)


def test_a_restart_without_timestamps_keeps_no_checkpoint_active():
  """Old state files list no times: every checkpoint counts as preserved."""
  kept = retention.after_restart(["a", "b"], [], 4., now=10.)
  assert kept == retention.Retained((), 4.)


# What TensorFlow's manager does, replayed on our functions.


@pytest.fixture
def clock(monkeypatch):
  """`time.time()` frozen at `clock[0]`, which tests move."""
  now = [1_700_000_000.]
  monkeypatch.setattr(time, "time", lambda: now[0])
  return now


def _tensorflows_saves(directory, clock, policy, steps):
  """Saves with TensorFlow's manager, `steps[i]` seconds apart.

  Returns:
    Per save: (the save's time, the manager's `checkpoints`, the prefixes
    whose index is gone).
  """
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(v=tf.Variable(1.)),
      directory,
      max_to_keep=policy.max_to_keep,
      keep_checkpoint_every_n_hours=policy.keep_checkpoint_every_n_hours)
  observed = []
  for step in steps:
    clock[0] += step
    saved = manager.save()
    observed.append((clock[0], list(manager.checkpoints), [
        os.path.join(directory, f"ckpt-{n}")
        for n in range(1,
                       int(saved.rsplit("-", 1)[1]) + 1)
        if not tf.io.gfile.exists(os.path.join(directory, f"ckpt-{n}.index"))
    ]))
  return observed


def _random_steps(seed):
  generator = random.Random(seed)
  return [
      generator.choice([60., 10 * 60., HOUR / 3, HOUR, 3 * HOUR])
      for _ in range(12)
  ]


_POLICIES = [
    retention.Policy(1),
    retention.Policy(3),
    retention.Policy(None),
    retention.Policy(2, 0.5),
    retention.Policy(3, 1.),
    retention.Policy(1, 2.)
]


@pytest.mark.parametrize("policy", _POLICIES, ids=str)
@pytest.mark.parametrize("seed", [0, 1])
def test_saves_keep_and_delete_what_tensorflows_manager_does(
    tmp_path, clock, policy, seed):
  directory = str(tmp_path)
  start = clock[0]
  observed = _tensorflows_saves(directory, clock, policy, _random_steps(seed))
  active, last_preserved, deleted = (), start - 1., []
  for number, (now, checkpoints, gone) in enumerate(observed, start=1):
    kept = retention.after_save(
        active, (os.path.join(directory, f"ckpt-{number}"), now),
        last_preserved, policy)
    active, last_preserved = kept.active, kept.last_preserved_timestamp
    deleted.extend(kept.deleted)
    assert (_paths(active), deleted) == (checkpoints, gone)


@pytest.mark.parametrize("policy", _POLICIES[3:], ids=str)
def test_a_restart_resumes_what_tensorflows_manager_does(
    tmp_path, clock, policy):
  directory = str(tmp_path)
  _tensorflows_saves(directory, clock, policy, _random_steps(2))
  clock[0] += HOUR
  state = tf.train.get_checkpoint_state(directory)
  resumed = tf.train.CheckpointManager(
      tf.train.Checkpoint(),
      directory,
      max_to_keep=policy.max_to_keep,
      keep_checkpoint_every_n_hours=policy.keep_checkpoint_every_n_hours)
  kept = retention.after_restart(state.all_model_checkpoint_paths,
                                 state.all_model_checkpoint_timestamps,
                                 state.last_preserved_timestamp, clock[0])
  assert _paths(kept.active) == resumed.checkpoints
  assert kept.active  # Some are active again.
