"""The demo app: a password-reset form, report, flaky and failing jobs."""
