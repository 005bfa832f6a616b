"""How many bytes of values a restore may hold read at once.

A restore whose values fit under this limit reads each value once, holds
them all until every one is read (and so its checksum checked), then
assigns them: one pass, all or nothing. Above it, restores read and assign
bounded pieces (`reads.CheckpointValues.restore_in_pieces`,
`graph_restores.ReadChain`).

The limit is `CheckpointOptions.max_restore_memory` where set (else
`tuning.TUNING.default_max_restore_memory`, if set); otherwise half of
the memory available when the restore starts. Available is the
least of `MemAvailable` (`/proc/meminfo`) and, for each memory cgroup
limiting this process (v2: the process's cgroup and its ancestors; v1:
the hierarchical limit), its limit minus what it uses, not counting
inactive page cache, which the kernel reclaims first. The other half is
the safety margin: for what other threads and processes allocate while
the restore runs, and, graph building, for variables a session creates as
it restores them. Where none of this can be read (no `/proc`), the limit
is unbounded: one pass, as TensorFlow reads. Files are read as bytes: a
restore may run where no text codec can be imported (a sandbox, a
process whose Python files were made unreadable).
"""

import os
from typing import Any, Optional

from tf_objckpt.engine import tuning

_MEMINFO = "/proc/meminfo"
_MOUNTINFO = "/proc/self/mountinfo"
_CGROUPS = "/proc/self/cgroup"
# A v1 memory cgroup without a limit reports about 2**63 bytes.
_NO_LIMIT = 1 << 62


def restore_memory_limit(options: Any = None) -> Optional[int]:
  """The bytes of values a restore with `options` may hold at once.

  Returns:
    `options.max_restore_memory` if set; else the process's default
    (`tuning.TUNING.default_max_restore_memory`) if set; else half of
    `available_bytes()`; None (no limit) where that is unknown.
  """
  limit = getattr(options, "max_restore_memory", None)
  if limit is None:
    limit = tuning.TUNING.default_max_restore_memory
  if limit is not None:
    return limit
  available = available_bytes()
  return None if available is None else available // 2


def fits(total_bytes: int, limit: Optional[int]) -> bool:
  """Whether values of `total_bytes` may be held at once under `limit`."""
  return limit is None or total_bytes <= limit


def available_bytes() -> Optional[int]:
  """Bytes this process may allocate now without swapping or being killed.

  The least of `MemAvailable` and each memory cgroup's room; None where
  neither is known.
  """
  candidates = [_mem_available()] + _cgroup_rooms()
  known = [value for value in candidates if value is not None]
  return max(0, min(known)) if known else None


def _mem_available():
  """`MemAvailable` of `/proc/meminfo`, in bytes, or None."""
  try:
    with open(_MEMINFO, "rb") as meminfo:
      for line in meminfo:
        if line.startswith(b"MemAvailable:"):
          return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def _read_int(file_path):
  """The number a cgroup file holds; None for "max" or if unreadable."""
  try:
    with open(file_path, "rb") as f:
      text = f.read().strip()
  except OSError:
    return None
  if text == b"max":
    return None
  try:
    return int(text)
  except ValueError:
    return None


def _read_stat(file_path):
  """`{name: value}` of a cgroup's `memory.stat`; empty if unreadable."""
  stat = {}
  try:
    with open(file_path, "rb") as f:
      for line in f:
        name, _, value = line.partition(b" ")
        if value.strip().isdigit():
          stat[name.decode("latin-1")] = int(value)
  except OSError:
    pass
  return stat


def _mounts():
  """`[(fs type, mount root, mount point, super options)]` of cgroup mounts."""
  mounts = []
  try:
    with open(_MOUNTINFO, "rb") as mountinfo:
      for line in mountinfo:
        fields = line.decode("latin-1").split()
        separator = fields.index("-")
        fs_type = fields[separator + 1]
        if fs_type in ("cgroup", "cgroup2"):
          mounts.append(
              (fs_type, fields[3], fields[4], fields[separator + 3].split(",")))
  except (OSError, ValueError, IndexError):
    pass
  return mounts


def _own_cgroups():
  """`{controllers: path}` from `/proc/self/cgroup` ("" for cgroup v2)."""
  own = {}
  try:
    with open(_CGROUPS, "rb") as cgroups:
      for line in cgroups:
        _, controllers, cgroup_path = line.decode("latin-1").rstrip("\n").split(
            ":", 2)
        own[controllers] = cgroup_path
  except (OSError, ValueError):
    pass
  return own


def _directory(mount_root, mount_point, cgroup_path):
  """The directory of a cgroup under a mount of `mount_root`, or None."""
  if mount_root != "/" and not (cgroup_path == mount_root or
                                cgroup_path.startswith(mount_root + "/")):
    # A namespaced mount shows the process's own cgroup as its root.
    return mount_point if os.path.isdir(mount_point) else None
  relative = (cgroup_path[len(mount_root):]
              if mount_root != "/" else cgroup_path)
  directory = os.path.join(mount_point, relative.lstrip("/"))
  if os.path.isdir(directory):
    return directory
  # Inside a container the path may name the host's hierarchy.
  return mount_point


def _cgroup_rooms():
  """The room left in each memory cgroup limiting this process, in bytes."""
  own = _own_cgroups()
  rooms = []
  for fs_type, mount_root, mount_point, options in _mounts():
    if fs_type == "cgroup2" and "" in own:
      directory = _directory(mount_root, mount_point, own[""])
      rooms.extend(_v2_rooms(directory, mount_point))
    elif fs_type == "cgroup" and "memory" in options:
      cgroup_path = next(
          (cgroup_path for controllers, cgroup_path in own.items()
           if "memory" in controllers.split(",")), None)
      if cgroup_path is not None:
        rooms.append(_v1_room(_directory(mount_root, mount_point, cgroup_path)))
  return rooms


def _v2_rooms(directory, mount_point):
  """The room of `directory`'s cgroup and each ancestor that has a limit."""
  rooms = []
  while directory and directory.startswith(mount_point):
    limit = _read_int(os.path.join(directory, "memory.max"))
    if limit is not None:
      current = _read_int(os.path.join(directory, "memory.current")) or 0
      stat = _read_stat(os.path.join(directory, "memory.stat"))
      rooms.append(limit - (current - stat.get("inactive_file", 0)))
    if directory == mount_point:
      break
    directory = os.path.dirname(directory)
  return rooms


def _v1_room(directory):
  """The room of a v1 memory cgroup (its hierarchical limit), or None."""
  stat = _read_stat(os.path.join(directory, "memory.stat"))
  limit = stat.get("hierarchical_memory_limit")
  if limit is None:
    limit = _read_int(os.path.join(directory, "memory.limit_in_bytes"))
  if limit is None or limit >= _NO_LIMIT:
    return None
  usage = _read_int(os.path.join(directory, "memory.usage_in_bytes")) or 0
  return limit - (usage - stat.get("total_inactive_file", 0))
