"""The `tf-objckpt` command line: inspect, verify, diff and convert checkpoints.

Run as `python -m tf_objckpt COMMAND` or `tf-objckpt COMMAND`. `run SCRIPT
[ARGS...]` runs a training script with TensorFlow patched to use tf_objckpt
(`run_script`); its exit status is the script's. A PATH is a checkpoint
prefix, one of its files (`.index`, `.data-*`), or a directory
(its latest checkpoint is used, and the tool says which). Exit codes: 0
when all is well; 1 when problems or differences are found, a checkpoint too
damaged to open included; 2 for usage errors and paths that hold no
checkpoint.

TensorFlow is imported only once a command runs, so `--help`, `--version`
and usage errors answer at once; the commands' modules, which import it,
are imported then too. Unless `--verbose` is given, TensorFlow's own log
lines are left out of the checkpoint commands, so that the tool prints only
its own output; `run` leaves the script's output as Python would.
"""

import argparse
import os
import sys
from typing import NoReturn, Optional, Sequence

from tf_objckpt.version import __version__

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2

_PATH_HELP = ("a checkpoint prefix (such as /tmp/train/ckpt-3) or a directory, "
              "whose latest checkpoint is used")

_EXAMPLES = {
    "inspect":
        """example:
  tf-objckpt inspect /tmp/train            # the latest checkpoint's tree
  tf-objckpt inspect /tmp/train/ckpt-3 --keys
  tf-objckpt inspect /tmp/train/ckpt-3 --values model/layer_with_weights-0/kernel
  tf-objckpt inspect /tmp/pretrained/ckpt-9 --objects my_project.models:classifier \
      --map model/backbone=model/encoder --map optimizer=optimizer""",
    "verify":
        """example:
  tf-objckpt verify /tmp/train/ckpt-3      # exit code 1 if anything is wrong
  tf-objckpt verify /tmp/train --all       # every checkpoint, one line each""",
    "diff":
        """example:
  tf-objckpt diff /tmp/train/ckpt-3 /tmp/train/ckpt-4 --atol 1e-6""",
    "convert":
        """example:
  tf-objckpt convert /tmp/legacy/model-7 /tmp/migrated/ckpt \\
      --objects my_project.models:build_objects --map dense/=encoder/dense/""",
    "run":
        """example:
  tf-objckpt run train.py --epochs 3      # as 'python train.py --epochs 3'""",
}


def _parser():
  """The command line's parser; building it imports nothing of TensorFlow."""
  parser = argparse.ArgumentParser(
      prog="tf-objckpt",
      description="Inspect, verify, compare and convert TensorFlow "
      "checkpoints (object-based or name-based, written by TensorFlow or "
      "tf_objckpt); run a training script with TensorFlow patched to use "
      "tf_objckpt.",
      epilog="exit codes: 0 ok; 1 problems or differences found (or a "
      "checkpoint too damaged to open); 2 usage error or no checkpoint at "
      "the path. Run 'tf-objckpt COMMAND --help' for each command.")
  parser.add_argument("--version",
                      action="version",
                      version=f"tf-objckpt {__version__}")
  commands = parser.add_subparsers(dest="command",
                                   required=True,
                                   metavar="COMMAND")
  common = argparse.ArgumentParser(add_help=False)
  common.add_argument("--verbose",
                      action="store_true",
                      help="also show TensorFlow's own log lines")

  def command(name, summary, parents=(common,)):
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=_EXAMPLES[name],
        parents=list(parents),
        formatter_class=argparse.RawDescriptionHelpFormatter)

  inspect = command(
      "inspect", "Show what a checkpoint holds: the object "
      "graph as a tree, with dtype, shape and size of each "
      "value, and totals.")
  # PATH may come after `--values KEY...`, which takes it: see `_path_last`.
  inspect.usage = ("%(prog)s [-h] [--verbose]\n" + " " * 26 +
                   "[--keys | --json | --values KEY [KEY ...]]\n" + " " * 26 +
                   "[--objects MODULE:FUNCTION [--map NEW=CHECKPOINT ...]]\n" +
                   " " * 26 + "PATH")
  inspect.set_defaults(usage_error=inspect.error)
  inspect.add_argument("path", metavar="PATH", nargs="?", help=_PATH_HELP)
  output = inspect.add_mutually_exclusive_group()
  output.add_argument("--keys",
                      action="store_true",
                      help="print the checkpoint keys, one per line, instead "
                      "of the tree")
  output.add_argument("--json",
                      action="store_true",
                      help="print machine-readable JSON")
  output.add_argument("--values",
                      nargs="+",
                      metavar="KEY",
                      help="print these values (checkpoint keys or object "
                      "paths); large ones are summarised")
  inspect.add_argument("--objects",
                       metavar="MODULE:FUNCTION",
                       help="instead, preview a restore into the objects this "
                       "function builds (a dict of names to trackables, or "
                       "the root): which value would go into which object, "
                       "nothing assigned; exit code 1 unless all match and "
                       "fit")
  inspect.add_argument("--map",
                       action="append",
                       default=[],
                       metavar="NEW=CHECKPOINT",
                       help="with --objects: restore the checkpoint's object "
                       "path CHECKPOINT into the new objects' path NEW "
                       "(CheckpointOptions' object_map; '' is the root; "
                       "repeatable)")

  verify = command(
      "verify", "Read every value of every shard, checking "
      "checksums, and check the object graph's consistency.")
  verify.add_argument("path", metavar="PATH", help=_PATH_HELP)
  verify.add_argument("--all",
                      action="store_true",
                      help="check every checkpoint of directory PATH (those "
                      "its state file lists and the others), one line each")

  diff = command(
      "diff", "List the differences between two checkpoints: "
      "keys, dtypes and shapes, values, object graph.")
  diff.add_argument("path_a", metavar="A", help=_PATH_HELP)
  diff.add_argument("path_b", metavar="B", help=_PATH_HELP)
  diff.add_argument("--atol",
                    type=float,
                    default=0.0,
                    help="values differing by at most this much are equal "
                    "(default 0)")
  diff.add_argument("--include-bookkeeping",
                    action="store_true",
                    help="let changes of the save counter and of the "
                    "serialized object graph decide the exit code too (they "
                    "are always shown, apart)")

  convert = command(
      "convert", "Turn a name-based (v1 Saver) checkpoint "
      "into an object-based one, for the objects a function "
      "of yours builds.")
  convert.add_argument("path", metavar="NAME_BASED_PATH", help=_PATH_HELP)
  convert.add_argument("out_prefix",
                       metavar="OUT_PREFIX",
                       help="the prefix to write the object-based checkpoint "
                       "at")
  convert.add_argument("--objects",
                       required=True,
                       metavar="MODULE:FUNCTION",
                       help="a function building the objects: it returns a "
                       "dict of names to trackables (each a dependency of "
                       "the checkpoint) or one trackable (the root)")
  convert.add_argument("--map",
                       action="append",
                       default=[],
                       metavar="OLD=NEW",
                       help="checkpoint name OLD holds the variable named "
                       "NEW, as in init_from_checkpoint's assignment_map; "
                       "'old/=new/' maps a whole scope (repeatable). Tried "
                       "after the exact name and the name without the Keras "
                       "model's scope")
  convert.add_argument("--allow-partial",
                       action="store_true",
                       help="write even if some variables or values found no "
                       "match")

  run = command("run", "Run a Python script as 'python SCRIPT ARGS...' "
                "would, with TensorFlow patched to save and restore "
                "checkpoints through tf_objckpt (patch_tensorflow()). The "
                "exit status is the script's.",
                parents=())
  run.usage = "%(prog)s [-h] SCRIPT [ARGS ...]"
  run.add_argument("script", metavar="SCRIPT", help="the script to run")
  run.add_argument("args",
                   nargs=argparse.REMAINDER,
                   metavar="ARGS",
                   help="its arguments, if any (options included)"
                  ).required = False  # Not one of "the arguments required".
  return parser


def _parse(argv):
  """The parsed command line; exits with status 2 on a usage error."""
  args = _parser().parse_args(argv)
  if args.command == "inspect" and args.path is None:
    _path_last(args)
  return args


def _path_last(args):
  """Takes PATH from the end of `--values KEY... PATH`, as usage allows."""
  if not args.values or len(args.values) < 2:
    args.usage_error("the following arguments are required: PATH")
  args.path = args.values.pop()


def _load_tensorflow_quietly():
  """Imports TensorFlow so that its native log lines are left out.

  TensorFlow's C++ code logs through absl. Lines logged while TensorFlow
  loads (oneDNN, CUDA stubs, CPU features) come before absl's logging is
  set up, and absl writes those to file descriptor 2 whatever
  TF_CPP_MIN_LOG_LEVEL says: they are dropped by pointing descriptor 2 at
  the null device while TensorFlow loads. Later lines (`cuInit` errors, the
  `OP_REQUIRES failed` line of each failed read) obey TF_CPP_MIN_LOG_LEVEL,
  which TensorFlow reads as it loads: it is set to hide them all.
  """
  if "tensorflow" in sys.modules:
    return
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  sys.stderr.flush()
  saved_stderr = os.dup(2)
  null = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(null, 2)
    import tensorflow  # noqa: F401  # pylint: disable=g-import-not-at-top
  finally:
    os.dup2(saved_stderr, 2)
    os.close(saved_stderr)
    os.close(null)
  import logging  # pylint: disable=g-import-not-at-top  # Not for `run`.
  logging.getLogger("tensorflow").setLevel(logging.ERROR)


def _find(location):
  """The checkpoint prefix at PATH; says on stderr how it was found."""
  from tf_objckpt.inspection import checkpoint_listing  # pylint: disable=g-import-not-at-top
  prefix, note = checkpoint_listing.find_checkpoint(location)
  if note:
    print(note, file=sys.stderr)
  return prefix


def _open(location, strict=True):
  """Opens the checkpoint at PATH (see `_find`)."""
  from tf_objckpt.inspection import checkpoint_listing  # pylint: disable=g-import-not-at-top
  return checkpoint_listing.open_listing(_find(location), strict=strict)


def _inspect(args):
  if args.objects or args.map:
    return _preview(args)
  from tf_objckpt.tools import inspect_checkpoint  # pylint: disable=g-import-not-at-top
  text, code = inspect_checkpoint.run(_open(args.path, strict=False),
                                      keys=args.keys,
                                      as_json_output=args.json,
                                      values=args.values)
  if code == EXIT_USAGE:
    print(f"tf-objckpt inspect: {text}", file=sys.stderr)
  else:
    print(text)
  return code


def _preview(args):
  """`inspect --objects ... --map ...`: a restore's dry run, printed."""
  # pylint: disable=g-import-not-at-top
  from tf_objckpt.api import trackable_saver
  from tf_objckpt.tools import convert_checkpoint
  # pylint: enable=g-import-not-at-top
  if not args.objects or args.keys or args.json or args.values:
    args.usage_error("--map needs --objects, and --objects goes without "
                     "--keys, --json and --values")
  object_map = {}
  for pair in args.map:
    new_path, separator, checkpoint_path = pair.partition("=")
    if not separator:
      args.usage_error(f"--map takes NEW=CHECKPOINT, got {pair!r}")
    object_map[new_path] = checkpoint_path
  try:
    build = convert_checkpoint.import_function(args.objects)
  except ValueError as e:
    args.usage_error(str(e))
  prefix = _find(args.path)
  checkpoint = convert_checkpoint.checkpoint_of(build())
  try:
    preview = checkpoint.preview_restore(
        prefix, trackable_saver.CheckpointOptions(object_map=object_map))
  except ValueError as e:
    print(f"tf-objckpt inspect: {e}", file=sys.stderr)
    return EXIT_PROBLEMS
  print(preview)
  return EXIT_OK if preview.complete else EXIT_PROBLEMS


def _verify(args):
  if args.all:
    return _verify_all(args.path)
  from tf_objckpt.inspection import verify_checkpoint  # pylint: disable=g-import-not-at-top
  listing = _open(args.path, strict=False)
  result = verify_checkpoint.verify(listing)
  print("\n".join(verify_checkpoint.report_lines(listing, result)))
  return EXIT_PROBLEMS if result.errors else EXIT_OK


def _verify_all(directory):
  """One line per checkpoint of `directory`: intact, or what is damaged."""
  # pylint: disable=g-import-not-at-top
  from tensorflow.python.lib.io import file_io
  from tf_objckpt.api import self_healing
  from tf_objckpt.inspection import checkpoint_listing
  # pylint: enable=g-import-not-at-top
  if not file_io.is_directory(directory):
    raise checkpoint_listing.NoCheckpointError(
        f"{directory!r} is not a directory; --all checks the checkpoints of "
        "a directory.")
  prefixes = self_healing.all_checkpoints(directory)
  if not prefixes:
    raise checkpoint_listing.NoCheckpointError(
        f"{directory!r} holds no checkpoint.")
  damaged = 0
  for prefix in prefixes:
    problems = self_healing.damage(prefix)
    damaged += bool(problems)
    print(f"{prefix}: " + (
        f"damaged: {self_healing.summary(problems)}" if problems else "intact"))
  return EXIT_PROBLEMS if damaged else EXIT_OK


def _diff(args):
  from tf_objckpt.tools import diff_checkpoints  # pylint: disable=g-import-not-at-top
  listing_a, listing_b = (_open(args.path_a,
                                strict=False), _open(args.path_b, strict=False))
  print(f"A: {listing_a.save_path}\nB: {listing_b.save_path}")
  differences = diff_checkpoints.diff(listing_a, listing_b, atol=args.atol)
  print("\n".join(
      diff_checkpoints.report_lines(differences, args.atol,
                                    args.include_bookkeeping)))
  found = differences.decisive(args.include_bookkeeping)
  return EXIT_PROBLEMS if found else EXIT_OK


def _convert(args):
  from tf_objckpt.tools import convert_checkpoint  # pylint: disable=g-import-not-at-top
  prefix = _find(args.path)
  try:
    mapping = convert_checkpoint.parse_mapping(args.map)
    build = convert_checkpoint.import_function(args.objects)
  except ValueError as e:
    print(f"tf-objckpt convert: error: {e}", file=sys.stderr)
    return EXIT_USAGE
  try:
    result = convert_checkpoint.convert(prefix,
                                        args.out_prefix,
                                        build(),
                                        mapping,
                                        allow_partial=args.allow_partial)
  except ValueError as e:
    print(f"tf-objckpt convert: {e}", file=sys.stderr)
    return EXIT_PROBLEMS
  print("\n".join(result.report_lines()))
  return EXIT_OK if result.written else EXIT_PROBLEMS


def _run(args):
  # Imported when used: the switch imports the v1 Saver (see tf_objckpt).
  from tf_objckpt.tools import run_script  # pylint: disable=g-import-not-at-top
  return run_script.run(args.script, args.args)


# The commands on checkpoints (`run` is not one).
_COMMANDS = {
    "inspect": _inspect,
    "verify": _verify,
    "diff": _diff,
    "convert": _convert
}


def main(argv: Optional[Sequence[str]] = None) -> int:
  """Runs one command; returns its exit code."""
  args = _parse(argv)
  if args.command == "run":
    return _run(args)  # The script's output and logs, as Python runs it.
  if not args.verbose:
    _load_tensorflow_quietly()
  # pylint: disable=g-import-not-at-top
  from tensorflow.python.framework import errors
  from tf_objckpt.inspection import checkpoint_listing
  from tf_objckpt.inspection import verify_checkpoint
  # pylint: enable=g-import-not-at-top
  try:
    return _COMMANDS[args.command](args)
  except checkpoint_listing.NoCheckpointError as e:
    print(f"tf-objckpt {args.command}: {e}", file=sys.stderr)
    return EXIT_USAGE
  except errors.NotFoundError as e:
    print(f"tf-objckpt {args.command}: {e.message}", file=sys.stderr)
    return EXIT_USAGE
  except errors.OpError as e:
    print(
        f"tf-objckpt {args.command}: {type(e).__name__}: "
        f"{verify_checkpoint.op_error_text(e)}",
        file=sys.stderr)
    return EXIT_PROBLEMS


def run() -> NoReturn:
  """The console script's entry point."""
  sys.exit(main())
