"""The exceptions of workflows (django_rqueue.exceptions): what they carry and say."""

from __future__ import annotations

import pytest

from django_rqueue.exceptions import (
    RedisUnavailable,
    RqueueError,
    WorkflowNotCreated,
    WorkflowStateError,
)


@pytest.mark.parametrize("state", ["succeeded", "failed", "cancelled", "running", None])
def test_a_workflow_state_error_carries_the_state_found(state: str | None):
    error = WorkflowStateError("workflow q:W has finished", "q:W", state)
    assert isinstance(error, RqueueError) and not isinstance(error, RedisUnavailable)
    assert (error.workflow_id, error.state, str(error)) == (
        "q:W",
        state,
        "workflow q:W has finished",
    )


@pytest.mark.parametrize(
    ("committed", "says"),
    [
        (False, "workflow q:W was not created (nothing of it runs): Redis down"),
        (True, "workflow q:W was committed and will run, but its creation could not be confirmed"),
    ],
)
def test_workflow_not_created_says_whether_it_will_run(committed: bool, says: str):
    cause = RedisUnavailable("Redis down")
    try:
        raise WorkflowNotCreated("q:W", committed, str(cause)) from cause
    except RedisUnavailable as caught:  # existing handlers of outages catch it
        assert isinstance(caught, WorkflowNotCreated)
        assert (caught.workflow_id, caught.committed) == ("q:W", committed)
        assert str(caught).startswith(says) and str(caught).endswith(": Redis down")
        assert caught.__cause__ is cause
