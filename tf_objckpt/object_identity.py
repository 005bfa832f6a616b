"""Containers keyed on object identity, by TensorFlow's name for the module.

The code is in `foundation.identity_containers`.
"""

# pylint: disable=unused-import
from tf_objckpt.foundation.identity_containers import ObjectIdentityDictionary
from tf_objckpt.foundation.identity_containers import ObjectIdentitySet
from tf_objckpt.foundation.identity_containers import ObjectIdentityWeakKeyDictionary
from tf_objckpt.foundation.identity_containers import ObjectIdentityWeakSet
# pylint: enable=unused-import
