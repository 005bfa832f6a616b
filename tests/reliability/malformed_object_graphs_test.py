"""Restores from object graphs damaged in every way we can generate.

A checkpoint's object graph comes from disk. Whatever it holds, a restore
must neither hang nor crash nor raise anything but a TensorFlow error type,
a `ValueError` or (from the status assertions) an `AssertionError`; and a
graph that refers to nodes or values that do not exist is a `DataLossError`
naming the checkpoint, before anything is assigned. So is a graph whose
slots refer to the wrong kind of node (the root, or a node holding no
variable), or whose slot objects turn out to be of the wrong kind (a
variable's path leads to a layer, an optimizer's to a variable). Hundreds
of graphs are generated from one real checkpoint (with optimizer slots),
each restored under a time limit; a 100,000-node chain restores in linear
time. Two attributes naming one key, and a child listed twice under one
name, restore as in TensorFlow.

Covers: tf_objckpt.restoring.object_graph_check, tf_objckpt.restore,
tf_objckpt.restoring.restore_walk.
"""

import random

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2
import tf_keras

import testlib as tl
import tf_objckpt
from tf_objckpt import graph_view

_SECONDS_PER_GRAPH = 20
_ALLOWED_ERRORS = (tf.errors.OpError, ValueError)


def _model_and_optimizer():
  """A small tf_keras model and a legacy Adam with slots, both built."""
  model = tf_keras.Sequential(
      [tf_keras.layers.Dense(3),
       tf_keras.layers.Dense(2)])
  model.build([None, 4])
  optimizer = tf_keras.optimizers.legacy.Adam(0.1)
  optimizer.apply_gradients(
      (tf.ones_like(v), v) for v in model.trainable_variables)
  return model, optimizer


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
  """`(path, values, proto)` of a checkpoint of a model and its optimizer."""
  model, optimizer = _model_and_optimizer()
  path = tf_objckpt.Checkpoint(model=model, optimizer=optimizer).write(
      str(tmp_path_factory.mktemp("saved") / "ckpt"))
  reader = tf.train.load_checkpoint(path)
  values = {
      key: reader.get_tensor(key)
      for key in reader.get_variable_to_shape_map()
      if key != tl.OBJECT_GRAPH_KEY
  }
  return path, values, tl.object_graph(path)


def _write_with_object_graph(prefix, values, proto):
  """Writes `values` with `proto` as the object graph."""
  keys = sorted(values)
  tensors = [tf.constant(values[key]) for key in keys]
  keys.append(tl.OBJECT_GRAPH_KEY)
  tensors.append(tf.constant(proto.SerializeToString()))
  tf.raw_ops.SaveV2(prefix=prefix,
                    tensor_names=keys,
                    shape_and_slices=[""] * len(keys),
                    tensors=tensors)
  return prefix


# Mutations: each changes the object graph in place; those of
# `_INVALIDATING_MUTATIONS` make it structurally invalid (which must be a
# DataLossError).
def _child_out_of_range(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.children])
  rng.choice(node.children).node_id = len(proto.nodes) + rng.randrange(5)


def _negative_child(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.children])
  rng.choice(node.children).node_id = -1 - rng.randrange(3)


def _duplicate_local_name(proto, rng):
  """Gives two children referring to different nodes one local name."""
  pairs = [(first, second)
           for node in proto.nodes
           for first in node.children
           for second in node.children
           if first.node_id != second.node_id]
  if pairs:
    first, second = rng.choice(pairs)
    second.local_name = first.local_name


def _slot_out_of_range(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.slot_variables])
  slot = rng.choice(node.slot_variables)
  if rng.random() < 0.5:
    slot.slot_variable_node_id = len(proto.nodes) + rng.randrange(5)
  else:
    slot.original_variable_node_id = len(proto.nodes) + rng.randrange(5)


def _missing_key(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.attributes])
  rng.choice(node.attributes).checkpoint_key += "_missing"


def _slot_at_non_variable(proto, rng):
  """Points a slot reference at the root or another node that is no variable."""
  node = rng.choice([n for n in proto.nodes if n.slot_variables])
  slot = rng.choice(node.slot_variables)
  target = rng.choice([
      node_id for node_id, n in enumerate(proto.nodes)
      if not _is_variable(n) or node_id == 0
  ])
  if rng.random() < 0.5:
    slot.slot_variable_node_id = target
  else:
    slot.original_variable_node_id = target


def _empty_key(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.attributes])
  rng.choice(node.attributes).checkpoint_key = ""


def _no_nodes(proto, rng):
  del rng
  del proto.nodes[:]


def _self_cycle(proto, rng):
  node_id = rng.randrange(len(proto.nodes))
  proto.nodes[node_id].children.add(node_id=node_id, local_name="itself")


def _swapped_children(proto, rng):
  node = rng.choice([n for n in proto.nodes if len(n.children) > 1])
  first, second = rng.sample(list(node.children), 2)
  first.node_id, second.node_id = second.node_id, first.node_id


def _redirected_child(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.children])
  rng.choice(node.children).node_id = rng.randrange(len(proto.nodes))


def _root_without_children(proto, rng):
  del rng
  del proto.nodes[0].children[:]


def _dropped_attributes(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.attributes])
  del node.attributes[:]


def _renamed_child(proto, rng):
  node = rng.choice([n for n in proto.nodes if n.children])
  rng.choice(node.children).local_name += "_renamed"


def _duplicate_key(proto, rng):
  attributes = [a for n in proto.nodes for a in n.attributes]
  if len(attributes) > 1:
    first, second = rng.sample(attributes, 2)
    second.checkpoint_key = first.checkpoint_key


_INVALIDATING_MUTATIONS = (_child_out_of_range, _negative_child,
                           _duplicate_local_name, _slot_out_of_range,
                           _slot_at_non_variable, _missing_key, _empty_key,
                           _no_nodes)
_MUTATIONS = _INVALIDATING_MUTATIONS + (
    _self_cycle, _swapped_children, _redirected_child, _root_without_children,
    _dropped_attributes, _renamed_child, _duplicate_key)


def _mutated(proto, seed):
  """A copy of `proto` with one to three mutations."""
  rng = random.Random(seed)
  mutated = trackable_object_graph_pb2.TrackableObjectGraph()
  mutated.CopyFrom(proto)
  for _ in range(rng.randint(1, 3)):
    if not mutated.nodes:
      break
    rng.choice(_MUTATIONS)(mutated, rng)
  return mutated


def _is_variable(node):
  return any(
      attribute.name == "VARIABLE_VALUE" for attribute in node.attributes)


def _is_invalid(proto, keys):
  """Whether a reference of `proto` points at nothing or at the wrong kind.

  The test's oracle: children and slots must refer to existing nodes, slots
  to variables other than the root; attributes must name held keys.
  """
  count = len(proto.nodes)
  referred = [child.node_id for node in proto.nodes for child in node.children]
  in_slots = [
      node_id for node in proto.nodes for slot in node.slot_variables
      for node_id in (slot.original_variable_node_id,
                      slot.slot_variable_node_id)
  ]
  referred += in_slots
  slots_at_variables = all(
      0 < node_id < count and _is_variable(proto.nodes[node_id])
      for node_id in in_slots)
  names_unique = all(
      len({child.local_name
           for child in node.children}) == len({(child.local_name,
                                                 child.node_id)
                                                for child in node.children})
      for node in proto.nodes)
  keys_held = all(attribute.checkpoint_key and any(
      key.startswith(attribute.checkpoint_key)
      for key in keys)
                  for node in proto.nodes
                  for attribute in node.attributes)
  return (not count or not names_unique or not keys_held or
          not slots_at_variables or
          any(not 0 <= node_id < count for node_id in referred))


def _restore_into_fresh_objects(path, impl="ours"):
  """Reads eagerly into a new model and optimizer; returns what happened.

  Returns:
    `(error of restore(), variables before, variables after)`; assertions
    are run too and may only raise `AssertionError` or the allowed errors.
  """
  model, optimizer = _model_and_optimizer()
  variables = model.variables + optimizer.variables()
  before = [v.numpy().copy() for v in variables]
  restored = tl.outcome(
      tl.IMPLS[impl].Checkpoint(model=model, optimizer=optimizer).read, path)
  if restored.error is None:
    status = restored.result.expect_partial()
    for assertion in tl.STATUS_ASSERTIONS:
      error = tl.outcome(getattr(status, assertion)).error
      assert error is None or isinstance(
          error, (AssertionError,) + _ALLOWED_ERRORS), repr(error)
  return restored.error, before, [v.numpy() for v in variables]


@pytest.mark.parametrize(
    "seeds", [range(start, start + 60) for start in range(0, 300, 60)],
    ids=lambda seeds: f"{seeds.start}-{seeds.stop - 1}")
def test_generated_graphs_fail_cleanly(tmp_path, saved, seeds):
  _, values, proto = saved
  invalid_count = 0
  for seed in seeds:
    mutated = _mutated(proto, seed)
    invalid = _is_invalid(mutated, values)
    path = _write_with_object_graph(str(tmp_path / f"graph{seed}"), values,
                                    mutated)
    with tl.time_limit(_SECONDS_PER_GRAPH):
      error, before, after = _restore_into_fresh_objects(path)
    context = f"seed {seed}: {error!r}"
    if invalid:
      invalid_count += 1
      assert isinstance(error, tf.errors.DataLossError), context
      assert path in str(error), context
      for old, new in zip(before, after):  # Nothing was assigned.
        np.testing.assert_array_equal(old, new, err_msg=context)
    else:
      assert error is None or isinstance(error, _ALLOWED_ERRORS), context
  assert 0 < invalid_count < len(seeds)


def test_the_unmutated_graph_restores_everything(tmp_path, saved):
  path, _, _ = saved
  model, optimizer = _model_and_optimizer()
  tf_objckpt.Checkpoint(model=model,
                        optimizer=optimizer).read(path).assert_consumed()


@pytest.mark.parametrize("mutation", _INVALIDATING_MUTATIONS)
def test_each_structural_fault_is_data_loss_naming_the_node(
    tmp_path, saved, mutation):
  _, values, proto = saved
  mutated = trackable_object_graph_pb2.TrackableObjectGraph()
  mutated.CopyFrom(proto)
  mutation(mutated, random.Random(0))
  assert _is_invalid(mutated, values)
  path = _write_with_object_graph(str(tmp_path / "ckpt"), values, mutated)
  error, _, _ = _restore_into_fresh_objects(path)
  assert isinstance(error, tf.errors.DataLossError), repr(error)
  assert f"checkpoint {path!r}" in str(error)
  if mutated.nodes:
    assert "node " in str(error) and "(root)" in str(error)


def _edited(proto, edit):
  """A copy of `proto` changed by `edit(copy, node id of a path)`."""
  edited = trackable_object_graph_pb2.TrackableObjectGraph()
  edited.CopyFrom(proto)

  def node_id(path):
    current = 0
    for name in path.split("/") if path else ():
      current = next(child.node_id
                     for child in edited.nodes[current].children
                     if child.local_name == name)
    return current

  edit(edited, node_id)
  return edited


def _child(proto, parent_id, local_name):
  return next(child for child in proto.nodes[parent_id].children
              if child.local_name == local_name)


def _layer_path_to_a_variable(proto, node_id):
  _child(proto, node_id("model"),
         "layer-0").node_id = node_id("model/layer_with_weights-0/kernel")


def _variable_path_to_the_optimizer(proto, node_id):
  optimizer_id = node_id("optimizer")
  _child(proto, node_id("model/layer_with_weights-0"),
         "kernel").node_id = (optimizer_id)
  del proto.nodes[0].children[:]
  proto.nodes[0].children.add(node_id=1, local_name="model")


@pytest.mark.parametrize(
    "edit, node_path, problem",
    [
        # TensorFlow: AttributeError ('Dense' object has no attribute ...).
        (_layer_path_to_a_variable, "(root).model.layer-0",
         "its object is not a variable (Dense)"),
        # TensorFlow: restores the kernel, skips the slots.
        (_variable_path_to_the_optimizer,
         "(root).model.layer_with_weights-0.kernel", "its object is a variable"
        ),
    ])
def test_slot_objects_of_the_wrong_kind_are_data_loss(tmp_path, saved, edit,
                                                      node_path, problem):
  _, values, proto = saved
  path = _write_with_object_graph(str(tmp_path / "ckpt"), values,
                                  _edited(proto, edit))
  error, before, after = _restore_into_fresh_objects(path)
  assert isinstance(error, tf.errors.DataLossError), repr(error)
  assert f"checkpoint {path!r}" in str(error)
  assert node_path in str(error) and problem in str(error)
  for old, new in zip(before, after):
    np.testing.assert_array_equal(old, new)


def _slot_and_hyperparameter_share_keys(proto, node_id):
  kernel = node_id("model/layer_with_weights-0/kernel")
  slots = {
      slot.slot_name: slot.slot_variable_node_id
      for slot in proto.nodes[node_id("optimizer")].slot_variables
      if slot.original_variable_node_id == kernel
  }
  for source, target in ((slots["m"], slots["v"]),
                         (node_id("optimizer/beta_1"),
                          node_id("optimizer/beta_2"))):
    proto.nodes[target].attributes[0].checkpoint_key = (
        proto.nodes[source].attributes[0].checkpoint_key)


def _child_listed_twice(proto, node_id):
  layer = node_id("model/layer_with_weights-0")
  proto.nodes[layer].children.add(
      node_id=node_id("model/layer_with_weights-0/kernel"), local_name="kernel")


@pytest.mark.parametrize(
    "edit", [_slot_and_hyperparameter_share_keys, _child_listed_twice])
def test_shared_keys_and_repeated_children_restore_as_tensorflow_does(
    tmp_path, saved, edit):
  """Two attributes naming one key both restore from it; a child listed
  twice under one name is one child. (Two children under one name that
  refer to different nodes are ambiguous: TensorFlow restores the first
  one and drops the other; ours is a `DataLossError`, tested above.)"""
  _, values, proto = saved
  path = _write_with_object_graph(str(tmp_path / "ckpt"), values,
                                  _edited(proto, edit))
  results = {
      impl: _restore_into_fresh_objects(path, impl) for impl in ("tf", "ours")
  }
  for impl, (error, _, _) in results.items():
    assert error is None, (impl, error)
  for expected, actual in zip(results["tf"][2], results["ours"][2]):
    np.testing.assert_array_equal(expected, actual)
  restored = set(
      map(float,
          np.concatenate([value.ravel() for value in results["ours"][2]])))
  assert restored <= set(
      map(float,
          np.concatenate([np.ravel(value) for value in values.values()])))


def _chain(length):
  """A chain of `length` trackables linked as `.next`, and the last one."""
  root = tf_objckpt.AutoTrackable()
  last = root
  for _ in range(length - 1):
    following = tf_objckpt.AutoTrackable()
    last.next = following
    last = following
  return root, last


def test_a_100000_node_chain_restores_in_linear_time(tmp_path):
  """A deep graph costs time and memory linear in its size.

  Naming every node by its full path, as assertions once did, would take
  memory quadratic in the depth (tens of gigabytes here).
  """
  length = 100_000
  root, last = _chain(length)
  last.v = tf.Variable(1.)
  proto = trackable_object_graph_pb2.TrackableObjectGraph()
  for node_id in range(length - 1):
    proto.nodes.add().children.add(node_id=node_id + 1, local_name="next")
  tail = proto.nodes.add()
  tail.children.add(node_id=length, local_name="v")
  key = "next/" * (length - 1) + "v/.ATTRIBUTES/VARIABLE_VALUE"
  variable_node = proto.nodes.add()
  variable_node.attributes.add(name="VARIABLE_VALUE",
                               checkpoint_key=key,
                               full_name="v")
  path = _write_with_object_graph(str(tmp_path / "chain"),
                                  {key: np.float32(7.)}, proto)
  saver = tf_objckpt.TrackableSaver(graph_view.ObjectGraphView(root))
  with tl.time_limit(120):
    status = saver.restore(path)
    status.assert_existing_objects_matched()
    status.assert_consumed()
  assert float(last.v.numpy()) == 7.
