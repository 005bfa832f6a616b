"""The sharding policies, by TensorFlow's name for their module.

Code and TensorFlow's own tests written against
`tensorflow.python.checkpoint.sharding.sharding_policies` import
`ShardByTaskPolicy` and `MaxShardSizePolicy` from here; our
`ParallelShardsPolicy` is here too. The code is in
`engine/sharding_policies.py`.
"""

# pylint: disable=unused-import
from tf_objckpt.engine.sharding_policies import MaxShardSizePolicy
from tf_objckpt.engine.sharding_policies import ParallelShardsPolicy
from tf_objckpt.engine.sharding_policies import ShardByTaskPolicy
# pylint: enable=unused-import
