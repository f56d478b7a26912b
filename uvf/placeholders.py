"""Placeholders for configurables whose implementation lands in a later issue.

A placeholder is registered with gin under its original name and with its original signature, so the original gin
files parse and gin validates bindings exactly as the original did; calling it raises `NotImplementedError` naming
what is missing and the issue that builds it. Apply `@gin.configurable` on top of `@placeholder(...)`: gin reads the
signature through `__wrapped__`, and `functools.wraps` carries `not_implemented` to gin's wrapper.
"""

import functools


def not_built(what, issue):
  """The message of a placeholder: `what` is not implemented yet, and issue `issue` builds it."""
  return f'{what} is not implemented yet (issue #{issue}).'


def placeholder(what, issue):
  """Decorator: keeps the function's signature and docstring; calling it raises `NotImplementedError`."""

  def decorate(fn):

    @functools.wraps(fn)
    def raise_not_built(*args, **kwargs):
      del args, kwargs
      raise NotImplementedError(not_built(what, issue))

    raise_not_built.not_implemented = f'{what} (issue #{issue})'
    return raise_not_built

  return decorate
