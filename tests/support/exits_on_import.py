"""A module outside every installed app that ends the process when imported.

Tests name a task in it (``task:tests.support.exits_on_import.x``) to show
that a worker never imports a module a job name read from Redis points at,
unless ``RQUEUE["TASK_MODULES"]`` lists it, and survives one that exits.
"""

raise SystemExit(7)
