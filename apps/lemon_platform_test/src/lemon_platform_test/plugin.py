"""The pytest plugin entry point of the contract kits."""

from __future__ import annotations
