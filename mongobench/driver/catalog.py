"""Every workload by the name experiments give in their `workload:` field.

The workload modules register themselves when imported; importing them here, in
this order, fills WORKLOADS in the order the runner and the tests expect.
"""

# Imported for their registration: insert, then the keyed workloads.
from mongobench.driver import insert, updates, queries, readupdate  # noqa: F401, I001
from mongobench.driver.base import WORKLOADS

__all__ = ["WORKLOADS"]
