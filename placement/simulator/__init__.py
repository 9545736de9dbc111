"""The offline simulator: a scenario's arrivals, departures and DRA allocations played
through the same decision the controller makes.

- ``simulation``: ``Simulation``, the steps played, with the retry-oldest-first rule.
- ``pending``: ``PendingQueue``, the waiting workers, oldest first by role and memory.
"""

from placement.simulator.simulation import Moved, Placement, Seating, Simulation, WorkerState

__all__ = ["Moved", "Placement", "Seating", "Simulation", "WorkerState"]
