"""Key-value stores for the remote filesystem and shared state: in memory, Redis."""

from harness.stores.base import BaseStore, Item, Namespace

__all__ = ["BaseStore", "Item", "Namespace"]
