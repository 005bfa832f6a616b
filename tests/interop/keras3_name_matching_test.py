"""The name matcher: v1 checkpoint names to Keras 3 variable paths.

The assignment-map rule is compared with TensorFlow's own reader of that
convention, `tf.compat.v1.train.init_from_checkpoint`.

Covers: tf_objckpt.restoring.name_matching.
"""

import numpy as np
import pytest
import tensorflow as tf

from tf_objckpt.restoring import name_matching

KEYS = ["dense/kernel", "dense/bias", "old/w", "encoder/layer/w", "step"]


def test_rules_are_tried_in_order():
  matcher = name_matching.NameMatcher(KEYS, {"old/": "new/"})
  assert matcher.match("dense/kernel") == ("dense/kernel", "exact")
  assert matcher.match("sequential/dense/kernel") == ("dense/kernel",
                                                      "without_model_name")
  assert matcher.match("new/w") == ("old/w", "assignment_map")
  # The model name is stripped before the map applies too.
  assert matcher.match("sequential/new/w") == ("old/w", "assignment_map")
  assert matcher.match("sequential/dense/missing") is None


def test_exact_name_wins_over_the_stripped_path():
  matcher = name_matching.NameMatcher(["a/dense/kernel", "dense/kernel"])
  assert matcher.match("a/dense/kernel") == ("a/dense/kernel", "exact")


def test_single_names_and_the_root_scope():
  matcher = name_matching.NameMatcher(KEYS, {"step": "counter", "/": "root/"})
  assert matcher.match("counter") == ("step", "assignment_map")
  assert matcher.match("root/encoder/layer/w") == ("encoder/layer/w",
                                                   "without_model_name")
  matcher = name_matching.NameMatcher(KEYS, {"encoder/": "/"})
  assert matcher.match("layer/w") == ("encoder/layer/w", "assignment_map")


def test_scope_mapped_to_a_name_is_refused():
  with pytest.raises(ValueError, match="mixes a scope"):
    name_matching.NameMatcher(KEYS, {"old/": "new"})
  with pytest.raises(ValueError, match="mixes a scope"):
    name_matching.NameMatcher(KEYS, [("old/w", "new/")])


def test_report_lists_matched_unmatched_and_unused():
  report = name_matching.match_names(
      ["seq/dense/kernel", "seq/dense/bias", "seq/other/w"], KEYS)
  assert report.matched == {
      "seq/dense/kernel": ("dense/kernel", "without_model_name"),
      "seq/dense/bias": ("dense/bias", "without_model_name")
  }
  assert report.unmatched_names == ["seq/other/w"]
  assert report.unused_keys == ["encoder/layer/w", "old/w", "step"]


def test_variables_are_named_by_keras_path_or_graph_name():
  import keras  # pylint: disable=g-import-not-at-top
  layer = keras.layers.Dense(2, name="d")
  layer.build((None, 3))
  assert name_matching.variable_name(layer.kernel) == "d/kernel"
  assert name_matching.variable_name(tf.Variable(1.0, name="x/y")) == "x/y"


@pytest.mark.parametrize("assignment_map", [
    {
        "old/": "new/"
    },
    {
        "old/w": "new/w"
    },
    {
        "/": "new/"
    },
])
def test_assignment_map_agrees_with_init_from_checkpoint(
    tmp_path, assignment_map):
  """The map picks the key TensorFlow's init_from_checkpoint reads."""
  with tf.Graph().as_default():
    for name in ("old/w", "w", "new/w"):
      tf.compat.v1.get_variable(name, initializer=np.float32(len(name)))
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      path = tf.compat.v1.train.Saver().save(sess, str(tmp_path / "v1"))
  keys = list(tf.train.load_checkpoint(path).get_variable_to_shape_map())
  with tf.Graph().as_default():
    target = tf.compat.v1.get_variable("new/w", initializer=np.float32(-1))
    tf.compat.v1.train.init_from_checkpoint(path, assignment_map)
    with tf.compat.v1.Session() as sess:
      sess.run(tf.compat.v1.global_variables_initializer())
      tf_value = sess.run(target)
  found = name_matching.NameMatcher(keys, assignment_map).match("new/w")
  if found.rule == "exact":  # "new/w" is in the checkpoint; map it away.
    found = [
        m for m in name_matching.NameMatcher(keys, assignment_map).candidates(
            "new/w") if m.rule == "assignment_map"
    ][0]
  assert tf_value == len(found.checkpoint_key)
