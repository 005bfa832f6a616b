"""Helpers of the tests, grouped by what they help with.

Tests are differential: they do the same thing with TensorFlow (the
oracle) and with tf_objckpt, and compare. Test files `import testlib as tl`
(`pytest.ini` puts tests/ on the path) and use the names below, which each
module of the package defines once:

- `impls`: the two implementations by name (`tl.IMPLS`), and running one
  scenario with both (`tl.by_impl`, `tl.agreed`, `tl.assert_agree`);
- `checkpoints`: checkpoints as `tf.train.load_checkpoint` sees them (keys
  with shapes and dtypes, the object graph, values), comparisons, and
  writers of small checkpoints;
- `files`: the files of checkpoints on disk, what interrupted saves leave
  behind, which data file holds each key, and real damage to them;
- `outcomes`: `tl.outcome`, the one way tests catch what a call raises,
  and captured logs;
- `state_objects`: Python state to checkpoint (`Counter`, `Recorder`, ...);
- `graph`: `GraphProgram`, a graph-mode program with its own graph and
  session, and `GraphModel`, a small v1 model trained in one;
- `keras_models`: Keras models and optimizers of Keras 3 and tf_keras;
- `processes`: child processes (Python, the command line tool) and time
  limits;
- `cluster`: distributed runs (free ports, `run_cluster_program`, server
  processes a test kills and starts again: `ServerProcesses`).
"""

# The names tests use as `tl.<name>`, from the module that defines each.
from testlib.impls import (Impl, IMPLS, OWNERS, PAIRS, other, by_impl, agreed,
                           assert_agree, tensorflow_patched)
from testlib.checkpoints import (OBJECT_GRAPH_KEY, object_graph, signature,
                                 keys, values, values_by_name,
                                 TENSORFLOWS_AND_OURS, assert_values_equal,
                                 assert_same_checkpoint, write, write_both,
                                 write_with_saver, snapshot, MANY, mixed_value,
                                 variable_values, assert_variables_equal)
from testlib.files import (files_under, assert_same_files, leftovers,
                           bytes_under, file_layout, DAMAGE, damage)
from testlib.outcomes import (Outcome, outcome, STATUS_ASSERTIONS,
                              assertion_outcomes, errors_by_impl,
                              assert_same_error_type, assert_names_the_value,
                              captured_logs)
from testlib.state_objects import (Counter, Recorder, NumpyWrapper, StringState,
                                   TfStringState)
from testlib.graph import (GraphProgram, in_graph_programs, write_in_graph,
                           function_library_names, rewrite_without,
                           GRAPH_OPTIMIZERS, VARIABLE_KINDS, v1_dense,
                           GraphModel, labelled)
from testlib.keras_models import (KERAS_3, FLAVORS, MODEL_KINDS, keras_module,
                                  make_optimizer, create_optimizer_variables,
                                  make_model, training_data, train_step,
                                  untrained, trained)
from testlib.processes import (REPO_ROOT, time_limit, run_python, child_env,
                               run_cli, start_python, read_line, kill_group,
                               finish, terminate_after_line,
                               kill_forked_workers)
from testlib.cluster import (CLUSTER_PROGRAMS, free_ports, localhost_addresses,
                             start_servers_in_process, run_cluster_program,
                             start_cluster_program, finish_cluster_program,
                             ServerProcesses)
