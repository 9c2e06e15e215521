"""The optimizer: passes over the kernel IR and the ISA program, and the manager that
orders and runs them (see docs/passes.md)."""

from hologram.passes.api import LEVELS, PIPELINES, Pass

__all__ = ["LEVELS", "PIPELINES", "Pass"]
