"""The error a model that cannot be loaded raises; torch-free, so a settings check that names it (a
checkpoint reference in the config) does not import torch or transformers."""

from __future__ import annotations


class ModelUnavailableError(RuntimeError):
    """A model id or path that cannot be loaded on this machine; its message is one line naming the
    model and what is wrong (the command line prints it as a configuration error)."""
