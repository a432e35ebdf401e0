"""Test-only Django app that holds the job functions used by the test suite."""
