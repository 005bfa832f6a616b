"""Times our `checkpoint_utils` against TensorFlow's, in fresh processes.

`bert`: a fine-tuning job's warm start. A name-based checkpoint the size
of BERT-base (199 variables, 440 MB, as `run_classifier.py` restores it)
is written once; each child process builds the same graph of variables
(not timed), then times `init_from_checkpoint(path, {"bert/": "bert/"})`
("build") and the session's first run of the initializers ("run"), which
reads the values. Wall times and, as the machine's load moves them less,
the process's CPU time. "read every value" is the floor of any run: one
`RestoreV2` of every value in a fresh process (page faults on new memory
cost most of it on a virtual machine). `--variables` picks resource
variables (the default of `tf.compat.v1.get_variable` in TensorFlow 2) or
reference ones (after `disable_resource_variables()`, as in TensorFlow 1
programs).

`list`: `list_variables` of a checkpoint of 20,000 variables: the first
call in a fresh process, and the best of 20 more there (load only adds to
a call's time), taking turns with the other library's; without garbage
collection during the calls (a collection that a call happens to trigger
costs more than the call).

Each child runs one library; the libraries take turns (`fresh_process`).
Figures are medians of `--repeats` children; the load average is printed
before and after, as ratios move with it.

Run: python benchmarks/checkpoint_utils_benchmark.py [--workloads=bert,list]
  [--variables=resource,reference] [--repeats=5]
"""

import gc
import json
import os
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf

import fresh_process
import tf_objckpt
from tf_objckpt import checkpoint_utils

_WORKLOADS = flags.DEFINE_list("workloads", ["bert", "list"],
                               "bert and/or list.")
_VARIABLES = flags.DEFINE_list("variables", ["resource", "reference"],
                               "Kinds of variables for bert.")
_REPEATS = flags.DEFINE_integer("repeats", 5, "Fresh processes per library.")
_CHILD = flags.DEFINE_string("child", None,
                             "Internal: time one library (JSON request).")
_LIST_CALLS = 20
_LIST_VARIABLES = 20000


def _bert_shapes():
  """`{name: shape}` of BERT-base's variables, as its checkpoints name them."""
  shapes = {
      "bert/embeddings/word_embeddings": [30522, 768],
      "bert/embeddings/position_embeddings": [512, 768],
      "bert/embeddings/token_type_embeddings": [2, 768],
      "bert/embeddings/LayerNorm/gamma": [768],
      "bert/embeddings/LayerNorm/beta": [768],
      "bert/pooler/dense/kernel": [768, 768],
      "bert/pooler/dense/bias": [768]
  }
  for layer in range(12):
    prefix = f"bert/encoder/layer_{layer}/"
    for dense in ("attention/self/query", "attention/self/key",
                  "attention/self/value", "attention/output/dense"):
      shapes[f"{prefix}{dense}/kernel"] = [768, 768]
      shapes[f"{prefix}{dense}/bias"] = [768]
    for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
      shapes[f"{prefix}{norm}/gamma"] = [768]
      shapes[f"{prefix}{norm}/beta"] = [768]
    shapes[f"{prefix}intermediate/dense/kernel"] = [768, 3072]
    shapes[f"{prefix}intermediate/dense/bias"] = [3072]
    shapes[f"{prefix}output/dense/kernel"] = [3072, 768]
    shapes[f"{prefix}output/dense/bias"] = [768]
  return shapes


def _bert_variables(use_resource):
  return [
      tf.compat.v1.get_variable(name,
                                shape,
                                initializer=tf.compat.v1.zeros_initializer(),
                                use_resource=use_resource)
      for name, shape in _bert_shapes().items()
  ]


def _write_bert(prefix):
  with tf.Graph().as_default(), tf.compat.v1.Session() as session:
    variables = [
        tf.compat.v1.get_variable(
            name, shape, initializer=tf.compat.v1.random_normal_initializer())
        for name, shape in _bert_shapes().items()
    ]
    session.run(tf.compat.v1.global_variables_initializer())
    return tf.compat.v1.train.Saver(variables).save(session,
                                                    prefix,
                                                    write_meta_graph=False)


def _write_many(prefix):
  values = [tf.Variable(np.float32(i)) for i in range(_LIST_VARIABLES)]
  return tf_objckpt.Checkpoint(values=values).write(prefix)


def _utils(library):
  return (checkpoint_utils if library == "tf_objckpt" else tf.compat.v1.train)


def _time_bert(library, path, use_resource):
  """The warm start's build and run, wall and CPU seconds."""
  init_from_checkpoint = _utils(library).init_from_checkpoint
  with tf.Graph().as_default():
    variables = _bert_variables(use_resource)
    wall, cpu = time.perf_counter(), time.process_time()
    init_from_checkpoint(path, {"bert/": "bert/"})
    built = time.perf_counter()
    initializer = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session() as session:
      session.run(initializer)
      ran = time.perf_counter()
      cpu = time.process_time() - cpu
      assert session.run(variables[-1]).any()
  return {
      "build": built - wall,
      "run": ran - built,
      "build + run": ran - wall,
      "build + run (CPU)": cpu
  }


def _time_read(path):
  """Reading every value once into new memory: what both runs must do.

  One `RestoreV2` of every value, in a session's first run, its outputs
  dropped: the checkpoint's bytes copied from the page cache into memory
  the process touches for the first time, and checksummed.
  """
  reader = tf.compat.v1.train.load_checkpoint(path)
  keys = sorted(reader.get_variable_to_dtype_map())
  with tf.Graph().as_default():
    read = tf.raw_ops.RestoreV2(
        prefix=path,
        tensor_names=keys,
        shape_and_slices=[""] * len(keys),
        dtypes=[reader.get_variable_to_dtype_map()[key] for key in keys])
    with tf.compat.v1.Session() as session:
      wall, cpu = time.perf_counter(), time.process_time()
      session.run(read[0].op)
      return {
          "read every value": time.perf_counter() - wall,
          "read every value (CPU)": time.process_time() - cpu
      }


def _timed_without_gc(function, *args):
  """`(seconds, result)` of `function(*args)`, with no garbage collection.

  Both libraries build the same 20,000 lists; a collection that one call
  happens to trigger costs more than the call, and says nothing of it.
  """
  gc.collect()
  gc.disable()
  try:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result
  finally:
    gc.enable()


def _time_list(library, path):
  """The first call of `library`'s, then its best of later calls.

  The later calls of the two libraries take turns in this process, so that
  the machine's load hits both alike.
  """
  list_variables = _utils(library).list_variables
  other = _utils(
      next(name for name in fresh_process.LIBRARIES
           if name != library)).list_variables
  first, listed = _timed_without_gc(list_variables, path)
  assert len(listed) == _LIST_VARIABLES + 1  # And the object graph.
  times = []
  for _ in range(_LIST_CALLS):
    _timed_without_gc(other, path)
    times.append(_timed_without_gc(list_variables, path)[0])
  return {"first call": first, "later calls (best)": min(times)}


def _child(request):
  if request["workload"] == "read":
    result = _time_read(request["path"])
  elif request["workload"] == "bert":
    result = _time_bert(request["library"], request["path"],
                        request["variables"] == "resource")
  else:
    result = _time_list(request["library"], request["path"])
  fresh_process.emit(result)


def _compare(label, **request):
  results = fresh_process.repeated(
      _REPEATS.value, lambda library: fresh_process.run_child(
          __file__, library=library, **request))
  fresh_process.print_medians(label, results)
  for library, figures in results.items():
    spread = ", ".join(f"{name} {min(times):.3f}-{max(times):.3f}"
                       for name, times in figures.items())
    print(f"{'':>9} ranges {library}: {spread}")


def _load():
  return " ".join(f"{load:.2f}" for load in os.getloadavg())


def main(argv):
  del argv
  tf.get_logger().setLevel("ERROR")
  if _CHILD.value:
    tf.compat.v1.disable_eager_execution()
    _child(json.loads(_CHILD.value))
    return
  print(f"load average before: {_load()}", flush=True)
  with tempfile.TemporaryDirectory() as directory:
    if "bert" in _WORKLOADS.value:
      path = _write_bert(os.path.join(directory, "bert", "model.ckpt"))
      for variables in _VARIABLES.value:
        _compare(f"bert {variables[:3]}",
                 workload="bert",
                 path=path,
                 variables=variables)
      reads = [
          fresh_process.run_child(__file__, workload="read", path=path)
          for _ in range(_REPEATS.value)
      ]
      for name in reads[0]:
        times = [read[name] for read in reads]
        print(
            f"{'bert':>9} {name:<26} {statistics.median(times):8.3f}s "
            f"({min(times):.3f}-{max(times):.3f}), the floor of any run",
            flush=True)
    if "list" in _WORKLOADS.value:
      path = _write_many(os.path.join(directory, "many", "ckpt"))
      _compare("list 20k", workload="list", path=path)
  print(f"load average after: {_load()}", flush=True)


if __name__ == "__main__":
  app.run(main)
