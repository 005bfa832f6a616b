"""`python -m tf_objckpt COMMAND`: the command line tool (see `cli`)."""

from tf_objckpt.tools import cli

if __name__ == "__main__":
  cli.run()
