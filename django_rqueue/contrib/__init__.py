"""Optional apps built on django-rqueue; each is enabled by adding it to ``INSTALLED_APPS``."""
