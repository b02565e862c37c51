"""Sweeps on a Ray cluster (`pltlab sweep --cluster`, `pltlab cluster`): the nodes run the loads
(one per node at a time by default), the driver keeps the queue and is the only writer of the
results database. Imported only when a cluster is asked for: without it, Ray is never loaded."""
