"""Free space, and the message of a write that failed because the disk (or a quota) is full."""

import errno
import os
import shutil
from typing import Optional, Union

from rundir import errors
from rundir import formatting

PathLike = Union[str, os.PathLike[str]]  # a path: str or pathlib.Path


def free_bytes(directory: PathLike) -> Optional[int]:
  """Free bytes on the file system of `directory` (or of its nearest existing parent); None if unknown (a remote
  file system such as gs://, or an error)."""
  directory = os.fspath(directory)
  path = os.path.abspath(directory) if '://' not in directory else None
  while path:
    if os.path.exists(path):
      try:
        return shutil.disk_usage(path).free
      except OSError:
        return None
    parent = os.path.dirname(path)
    path = parent if parent != path else None
  return None


def is_disk_full(error: BaseException) -> bool:
  """Whether the exception of a write says the disk (or a quota) is full: ENOSPC / EDQUOT, or TensorFlow's
  ResourceExhaustedError / 'No space left on device' of its file system layer."""
  if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
    return True
  text = str(getattr(error, 'message', '') or error)
  return type(error).__name__ == 'ResourceExhaustedError' or 'No space left on device' in text


def storage_error(error: BaseException, directory: PathLike, what: str, needed: Optional[int] = None,
                  intact: Optional[str] = None) -> errors.RunDirectoryError:
  """The `RunDirectoryError` of a failed write of `what` into `directory` (disk full, permission, ...).

  Args:
    error: the exception the write raised.
    directory: where it wrote.
    what: e.g. 'the full checkpoint model.ckpt-300000'.
    needed: bytes the write needs, if known.
    intact: the checkpoint the run resumes from (named in the message), if any.
  """
  message = (getattr(error, 'message', None) or str(error)).strip().splitlines()
  reason = 'the disk is full' if is_disk_full(error) else f'{type(error).__name__}: {message[0] if message else ""}'
  need = f' It needs about {formatting.format_bytes(needed)};' if needed else ''
  keep = (f' The previous checkpoint {intact} is intact: free some space and run the same command to resume from '
          f'it.' if intact else ' Free some space (or fix the directory) and run the same command again.')
  return errors.RunDirectoryError(f'writing {what} into {os.fspath(directory)} failed: {reason}.{need} '
                                  f'{formatting.format_bytes(free_bytes(directory))} free there.{keep}')
