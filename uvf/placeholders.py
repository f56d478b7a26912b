"""Placeholders for the original's configurables that HIRO's configs never call.

A placeholder is registered with gin under its original name and with its original signature, so the original gin
files parse and gin validates bindings exactly as the original did; calling it raises `NotImplementedError` naming
what is not ported. Apply `@gin.configurable` on top of `@placeholder(...)`: gin reads the signature through
`__wrapped__`.
"""

import functools


def not_built(what):
  """The message of a placeholder: `what` is registered for the original gin files but not ported."""
  return (f'{what} is not ported: it is registered so that the original gin files parse, but none of the HIRO '
          f'configs uses it.')


def placeholder(what):
  """Decorator: keeps the function's signature and docstring; calling it raises `NotImplementedError`."""

  def decorate(fn):

    @functools.wraps(fn)
    def raise_not_built(*args, **kwargs):
      del args, kwargs
      raise NotImplementedError(not_built(what))

    return raise_not_built

  return decorate
