"""Graph-mode programs: a graph and its session, and a small v1 model.

`GraphProgram` is one run of a graph-mode program with either
implementation; `GraphModel` is a small model trained by a v1 optimizer in
one, so its checkpoints hold slot and non-slot variables. The other
helpers write checkpoints from a graph, and read a graph's function
library.
"""

import contextlib

import tensorflow as tf

from testlib import impls


class GraphProgram:
  """One run of a graph-mode program: its own graph and session.

  Use it as a context manager: inside, its graph is the default graph (its
  session is not the default session); on the way out the session is
  closed. `lib` holds `impl`'s classes. After
  `track()`, `root` holds `variables` and `checkpoint` is a `CheckpointV1`
  of it.
  """

  def __init__(self, impl, config=None, target=""):
    self.impl = impl
    self.lib = impls.IMPLS[impl]
    self.graph = tf.Graph()
    self.session = None
    self.variables = []
    self.root = None
    self.checkpoint = None
    self._config = config
    self._target = target
    self._scopes = contextlib.ExitStack()

  def __enter__(self):
    self._scopes.enter_context(self.graph.as_default())
    self.session = self._scopes.enter_context(
        contextlib.closing(
            tf.compat.v1.Session(self._target,
                                 graph=self.graph,
                                 config=self._config)))
    return self

  def __exit__(self, *exc_info):
    return self._scopes.__exit__(*exc_info)

  def variable(self, name, value, **kwargs):
    """A `tf.compat.v1.get_variable` whose initial value is `value`."""
    return tf.compat.v1.get_variable(name,
                                     initializer=tf.constant(value),
                                     **kwargs)

  def track(self, variables):
    """Tracks `variables` as `root.variables`, and initializes them."""
    self.variables = list(variables)
    self.root = self.lib.AutoTrackable()
    self.root.variables = self.variables
    self.checkpoint = self.lib.CheckpointV1(root=self.root)
    self.initialize()

  def run(self, fetches, feed_dict=None):
    return self.session.run(fetches, feed_dict)

  def initialize(self):
    self.run(tf.compat.v1.global_variables_initializer())

  def values(self):
    """The values of `variables`."""
    return self.run(self.variables)

  def uninitialized(self):
    """Names of the graph's uninitialized variables, sorted."""
    return sorted(
        self.run(tf.compat.v1.report_uninitialized_variables()).tolist())

  def num_ops(self):
    return len(self.graph.get_operations())

  def save(self, prefix):
    """Saves a numbered checkpoint at `prefix`; returns its path."""
    return self.checkpoint.save(prefix, session=self.session)


def in_graph_programs(scenario):
  """`{impl: scenario(program)}`, each in a `GraphProgram` of that impl."""
  results = {}
  for impl in impls.IMPLS:
    with GraphProgram(impl) as program:
      results[impl] = scenario(program)
  return results


def write_in_graph(impl, prefix, **initial_values):
  """Writes, from a graph of its own, a root holding `initial_values`.

  Each value is a variable of the root, named as its attribute.

  Returns:
    The path of the checkpoint, written by `impl`'s `CheckpointV1.write`.
  """
  with GraphProgram(impl) as program:
    root = program.lib.AutoTrackable()
    for name, value in initial_values.items():
      setattr(root, name, program.variable(name, value))
    program.initialize()
    return program.lib.CheckpointV1(root=root).write(prefix,
                                                     session=program.session)


def function_library_names(graph):
  """The sorted names of the functions in `graph`'s library."""
  return sorted(function.signature.name
                for function in graph.as_graph_def().library.function)


def rewrite_without(path, key):
  """Rewrites the checkpoint at `path` without the value of `key`."""
  reader = tf.train.load_checkpoint(path)
  keys = [k for k in reader.get_variable_to_shape_map() if k != key]
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    session.run(
        tf.raw_ops.SaveV2(prefix=path,
                          tensor_names=keys,
                          shape_and_slices=[""] * len(keys),
                          tensors=[reader.get_tensor(k) for k in keys]))


GRAPH_OPTIMIZERS = {
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.1),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
}
VARIABLE_KINDS = ("resource", "reference", "partitioned")


def v1_dense(inputs, units, scope):
  """A dense layer the v1 way: `<scope>/kernel` and `<scope>/bias`."""
  with tf.compat.v1.variable_scope(scope):
    kernel = tf.compat.v1.get_variable("kernel", (inputs.shape[-1], units))
    bias = tf.compat.v1.get_variable(
        "bias", (units,), initializer=tf.compat.v1.random_normal_initializer())
  return tf.matmul(inputs, kernel) + bias


class GraphModel(GraphProgram):
  """A small model in a `GraphProgram`, with a v1 optimizer.

  The model is `tf.compat.v1.get_variable` variables (resource, reference
  or partitioned) on `root`, trained by a `tf.compat.v1.train` optimizer, so
  checkpoints hold slot variables and non-slot optimizer variables such as
  Adam's `beta1_power`. `checkpoint` is a `CheckpointV1` of both.
  """

  def __init__(self,
               impl,
               kind="resource",
               optimizer="adam",
               create_optimizer=True,
               seed=1):
    super().__init__(impl)
    self.kind = kind
    self.optimizer = None
    self.train_op = None
    self._optimizer_name = optimizer
    self._create_optimizer = create_optimizer
    self._seed = seed

  def __enter__(self):
    super().__enter__()
    init = tf.compat.v1.random_uniform_initializer(seed=self._seed)
    use_resource = self.kind != "reference"
    self.root = self.lib.AutoTrackable()
    self.root.w = tf.compat.v1.get_variable("w", [3, 2],
                                            initializer=init,
                                            use_resource=use_resource)
    self.root.b = tf.compat.v1.get_variable("b", [2],
                                            initializer=init,
                                            use_resource=use_resource)
    self.variables = [self.root.w, self.root.b]
    if self.kind == "partitioned":
      self.root.parts = list(
          tf.compat.v1.get_variable(
              "p", [4, 2],
              initializer=init,
              partitioner=tf.compat.v1.fixed_size_partitioner(2)))
      self.variables.extend(self.root.parts)
    self.optimizer = GRAPH_OPTIMIZERS[self._optimizer_name]()
    self.checkpoint = self.lib.CheckpointV1(model=self.root,
                                            optimizer=self.optimizer)
    if self._create_optimizer:
      self.create_slots()
    return self

  def create_slots(self):
    """Builds the training op, creating slot and non-slot variables."""
    x = tf.constant([[1., 2., 3.]])
    loss = tf.reduce_sum(tf.square(tf.matmul(x, self.root.w) + self.root.b))
    for part in self.variables[2:]:
      loss += tf.reduce_sum(tf.square(part))
    self.train_op = self.optimizer.minimize(loss)

  def labelled_values(self):
    """`{label: value}` of model and optimizer variables (see `labelled`)."""
    variables = labelled(
        {
            "w": self.root.w,
            "b": self.root.b,
            **{
                f"p{i}": part for i, part in enumerate(self.variables[2:])
            }
        }, self.optimizer)
    return dict(zip(variables, self.run(list(variables.values()))))

  def train(self, steps=3):
    for _ in range(steps):
      self.run(self.train_op)


def labelled(variables, optimizer):
  """Adds an optimizer's slot and non-slot variables to `{label: variable}`.

  Labels do not depend on graph names, which differ between programs (and
  between eager and graph mode).
  """
  result = dict(variables)
  for label, variable in variables.items():
    for slot_name in optimizer.get_slot_names():
      slot = optimizer.get_slot(variable, slot_name)
      if slot is not None:
        result[f"{label}/{slot_name}"] = slot
  for (name, _), variable in optimizer._non_slot_dict.items():  # pylint: disable=protected-access
    result[name] = variable
  return result
