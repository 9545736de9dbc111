"""The offline simulator: a scenario's arrivals, departures and DRA allocations played
through the same decision the controller makes.

- ``simulation``: ``Simulation``, the steps played, with the retry-oldest-first rule.
- ``pending``: ``PendingQueue``, the waiting workers, oldest first by role and memory.
- ``autoscaler``: ``AutoscaledSimulation``, the fleet grown and shrunk by ``NodeGroup``s.
- ``nodegroups``: ``NodeGroup``, the autoscaler's changes and the records it keeps.
- ``mover``: ``Mover``, moves played on the scenario's clock, over ``tracked``'s
  ``TrackedFleet``, which notes what each change touched.
"""

from placement.simulator.autoscaler import AutoscaledSimulation, NodeGroup
from placement.simulator.simulation import Moved, Placement, Seating, Simulation, WorkerState

__all__ = ["AutoscaledSimulation", "Moved", "NodeGroup", "Placement", "Seating", "Simulation",
           "WorkerState"]
