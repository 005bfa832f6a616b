"""The session graph-mode calls run in: the one given, else the default.

TensorFlow's lookup of the default session is shared (`get_session`): it
asks the provider registered with `register_session_provider` (tf_keras
registers its own) before the default session. TensorFlow's name for the
module of these two is `checkpoint`, which re-exports them;
`default_session` is what our saves, restores and load statuses run in.
"""

from tensorflow.python.checkpoint import checkpoint as tf_checkpoint_lib

# TensorFlow's session lookup, shared: tf_keras registers its provider there.
get_session = tf_checkpoint_lib.get_session
register_session_provider = tf_checkpoint_lib.register_session_provider


def default_session(session, action):
  """`session`, else the default session (or the one Keras provides).

  Raises:
    RuntimeError: If there is no session to `action` in.
  """
  if session is None:
    session = get_session()
  if session is None:
    raise RuntimeError(
        f"Unable to {action} in graph mode without a default session. Pass "
        "`session=`, or use `with tf.compat.v1.Session() as session:`.")
  return session
