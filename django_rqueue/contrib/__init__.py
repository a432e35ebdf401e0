"""Optional parts built on django-rqueue: apps enabled by adding them to ``INSTALLED_APPS``
(webhooks), integrations of other libraries (Sentry)."""
