"""Progress, metadata and the status views run real worker processes: the ``faults`` fixture."""

from tests.faults.conftest import faults

__all__ = ["faults"]
